"""Hot paths: appends no longer write the session row, boundaries are numbered, past views
have a version-range index.

* messages.view_tokens / tail_state / written_at: an append records the view's running
  figures on its own row; rows with seq > sessions.last_seq carry the session's current
  state. Existing rows keep NULL: every session row is already current for them.
* compactions.ordinal (boundary K = one indexed lookup) and view_floor (the oldest
  valid_from of the replaced view, bounding its past-view scan), both backfilled.
* ix_view_entries_version_range (session_id, valid_from, valid_to), replacing
  ix_view_entries_session_id_valid_to (one index fewer for every rewrite to write).
* pipeline_states: what the pipeline's layers looked at in a view version (derived data;
  a fresh process's first prepare() resumes from it instead of rescanning the view).

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("view_tokens", BigInt, nullable=True))
    op.add_column("messages", sa.Column("tail_state", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("written_at", sa.Float(), nullable=True))
    op.add_column("compactions", sa.Column("ordinal", sa.Integer(), nullable=True))
    op.add_column("compactions", sa.Column("view_floor", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE compactions SET ordinal = (SELECT COUNT(*) FROM compactions o "
        "WHERE o.session_id = compactions.session_id AND (o.boundary_seq < compactions.boundary_seq "
        "OR (o.boundary_seq = compactions.boundary_seq AND o.id <= compactions.id)))"
    )
    op.execute(
        "UPDATE compactions SET view_floor = (SELECT MIN(v.valid_from) FROM view_entries v "
        "WHERE v.session_id = compactions.session_id AND v.valid_from <= compactions.replaced_version "
        "AND (v.valid_to IS NULL OR v.valid_to > compactions.replaced_version))"
    )
    with op.batch_alter_table("compactions") as batch:
        batch.alter_column("ordinal", existing_type=sa.Integer(), nullable=False)
        batch.create_unique_constraint("uq_compactions_session_id_ordinal", ["session_id", "ordinal"])
    op.create_index("ix_view_entries_version_range", "view_entries", ["session_id", "valid_from", "valid_to"])
    op.drop_index("ix_view_entries_session_id_valid_to", table_name="view_entries")
    op.create_table(
        "pipeline_states",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("view_version", sa.Integer(), nullable=False),
        sa.Column("scanned", sa.Integer(), nullable=False),
        sa.Column("state_json", sa.Text(), nullable=False),
        sa.Column("saved_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name=op.f("fk_pipeline_states_session_id_sessions"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_pipeline_states")),
    )


def downgrade() -> None:
    op.drop_table("pipeline_states")
    op.create_index("ix_view_entries_session_id_valid_to", "view_entries", ["session_id", "valid_to"])
    op.drop_index("ix_view_entries_version_range", table_name="view_entries")
    with op.batch_alter_table("compactions") as batch:
        batch.drop_constraint("uq_compactions_session_id_ordinal", type_="unique")
        batch.drop_column("view_floor")
        batch.drop_column("ordinal")
    _checkpoint_appended_state()
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("written_at")
        batch.drop_column("tail_state")
        batch.drop_column("view_tokens")


def _checkpoint_appended_state() -> None:
    """Before the per-message figures go, write each session's current figures to its row (0001's shape)."""
    last = ("(SELECT m.{col} FROM messages m WHERE m.session_id = sessions.id "
            "AND m.seq = (SELECT MAX(seq) FROM messages x WHERE x.session_id = sessions.id))")
    op.execute(
        f"UPDATE sessions SET view_tokens = {last.format(col='view_tokens')}, "
        f"tail_state = {last.format(col='tail_state')}, "
        f"updated_at = COALESCE({last.format(col='written_at')}, updated_at), "
        f"last_seq = {last.format(col='seq')} "
        f"WHERE {last.format(col='seq')} > last_seq AND {last.format(col='view_tokens')} IS NOT NULL"
    )
