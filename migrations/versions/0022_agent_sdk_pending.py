"""Agent SDK entries imported after the append: a key's count of entries already in its session.

An append of the Agent SDK adapter keeps the entries and returns; their Claude Code lines become
the key's session afterwards, when the adapter's appends pause, on flush or close, or when any
`sessionstore` command opens the store writable. `agent_sdk_keys.imported_count` says how many of
the key's entries are in the session already (or kept as entries only, for a key with an
`import_note`); a key is pending while `imported_count < entry_count`, found through the partial
index `ix_agent_sdk_keys_pending`. Every key an earlier revision wrote was imported by its append,
so the upgrade sets the count to the key's entries.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
PENDING = sa.text("imported_count < entry_count")


def upgrade() -> None:
    with op.batch_alter_table("agent_sdk_keys") as batch:
        batch.add_column(sa.Column("imported_count", BigInt, nullable=False, server_default="0"))
    op.execute("UPDATE agent_sdk_keys SET imported_count = entry_count")
    op.create_index(
        "ix_agent_sdk_keys_pending",
        "agent_sdk_keys",
        ["owner"],
        unique=False,
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )


def downgrade() -> None:
    op.drop_index("ix_agent_sdk_keys_pending", table_name="agent_sdk_keys")
    with op.batch_alter_table("agent_sdk_keys") as batch:
        batch.drop_column("imported_count")
