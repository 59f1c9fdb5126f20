"""Pinned messages: what a caller marks to be carried verbatim through every compaction.

* pins: one row per pinned message (session, seq, uuid, its token cost, when pinned). Unpinning
  deletes the row; the transcript itself is never changed. The session's pin budget is the sum
  of `tokens`, read with one indexed aggregate.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pins",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("seq", BigInt, nullable=False),
        sa.Column("uuid", sa.String(length=100), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("pinned_at", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False, server_default="caller"),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_pins_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("session_id", "seq", name=op.f("pk_pins")),
    )


def downgrade() -> None:
    op.drop_table("pins")
