"""Usage: per-response usage, its rollup by session, hour, model and prompt band, and a mark.

* usage_responses: one row per API response (its streamed pieces folded into one: the
  largest count of each token kind), keyed by the API message id.
* usage_rollup: the responses summed per (session, hour, model, prompt band); every usage
  report and every cost column reads only this table (ix_usage_rollup_hour bounds --since).
* usage_marks: how far each session's messages are counted.
* usage_state (SQLite): the newest transcript row when every session was last found counted; while it
  is still the newest, a report skips the per-session check.

Like the search index these are derived data, kept off the append path: a usage report first
counts the messages above each session's mark (reading their usage, never their content), so
existing rows are counted by the first report after the upgrade, not by the upgrade itself.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_COUNTS = ("input_tokens", "output_tokens", "cache_write_5m", "cache_write_1h", "cache_read")


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_id"], ["sessions.id"], name=f"fk_{table}_session_id_sessions", ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "usage_marks",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("counted_seq", BigInt, nullable=False),
        _session_fk("usage_marks"),
        sa.PrimaryKeyConstraint("session_id", name="pk_usage_marks"),
    )
    op.create_table(
        "usage_state",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("last_rowid", BigInt, nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("seq", BigInt, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_usage_state"),
    )
    op.create_table(
        "usage_responses",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("response_id", sa.String(length=200), nullable=False),
        sa.Column("hour", BigInt, nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("band", sa.Integer(), nullable=False),
        *(sa.Column(name, BigInt, nullable=False) for name in _COUNTS),
        _session_fk("usage_responses"),
        sa.PrimaryKeyConstraint("session_id", "response_id", name="pk_usage_responses"),
    )
    op.create_table(
        "usage_rollup",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("hour", BigInt, nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("band", sa.Integer(), nullable=False),
        sa.Column("responses", BigInt, nullable=False),
        *(sa.Column(name, BigInt, nullable=False) for name in _COUNTS),
        _session_fk("usage_rollup"),
        sa.PrimaryKeyConstraint("session_id", "hour", "model", "band", name="pk_usage_rollup"),
    )
    op.create_index("ix_usage_rollup_hour", "usage_rollup", ["hour"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_usage_rollup_hour", table_name="usage_rollup")
    op.drop_table("usage_rollup")
    op.drop_table("usage_responses")
    op.drop_table("usage_state")
    op.drop_table("usage_marks")
