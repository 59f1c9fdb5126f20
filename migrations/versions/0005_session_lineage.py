"""Session lineage: which session a fork came from and where it was cut.

* session_forks: one row per fork (its parent session, the kind of cut: message,
  boundary or current, the parent's view version, the message or boundary index),
  indexed by parent so a session lists its forks in one lookup. The parent id has
  no foreign key: the lineage outlives a deleted parent.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_forks",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("parent_id", sa.String(length=36), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("view_version", sa.Integer(), nullable=False),
        sa.Column("message_uuid", sa.String(length=100), nullable=True),
        sa.Column("message_seq", BigInt, nullable=True),
        sa.Column("boundary_index", sa.Integer(), nullable=True),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_session_forks_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_forks")),
    )
    op.create_index("ix_session_forks_parent_id", "session_forks", ["parent_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_session_forks_parent_id", table_name="session_forks")
    op.drop_table("session_forks")
