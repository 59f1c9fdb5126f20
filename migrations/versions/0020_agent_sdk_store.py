"""The Claude Agent SDK's session store: its keys and their entries, kept exactly.

* agent_sdk_keys: one row per SDK key (project_key, session id, subpath; '' for the main
  transcript), with its storage write time (`mtime_ms`, epoch milliseconds), the SDK's folded
  summary kept verbatim (`summary_json`, main keys only), how many entries it holds, and the
  sessionstore session its Claude Code lines became (`linked_session`; NULL while none did), and
  why they stopped becoming one (`import_note`: a copy of a session imported otherwise...).
* agent_sdk_entries: every appended entry, in append order (`n`), as the JSON text the
  adapter wrote; `uuid` (when the entry has one) is unique per key so a retried batch adds nothing.
* owner on both (PostgreSQL: the role that appended, `current_user`; SQLite: 'local'); keys are
  unique per owner, and on PostgreSQL row-level security (enabled and forced) gives each role its
  own keys and entries only.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
OWNER_TYPE = sa.String(63)
TABLES = ("agent_sdk_keys", "agent_sdk_entries")


def upgrade() -> None:
    pg = op.get_bind().dialect.name == "postgresql"
    owner = sa.text("current_user") if pg else sa.text("'local'")
    op.create_table(
        "agent_sdk_keys",
        sa.Column("id", BigInt, autoincrement=True, nullable=False),
        sa.Column("owner", OWNER_TYPE, nullable=False, server_default=owner),
        sa.Column("project_key", sa.Text(), nullable=False),
        sa.Column("sdk_session_id", sa.Text(), nullable=False),
        sa.Column("subpath", sa.Text(), nullable=False, server_default=""),
        sa.Column("mtime_ms", BigInt, nullable=False),
        sa.Column("entry_count", BigInt, nullable=False, server_default="0"),
        sa.Column("summary_json", sa.Text(), nullable=True),
        sa.Column("linked_session", sa.String(36), nullable=True),
        sa.Column("import_note", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_agent_sdk_keys"),
        sa.UniqueConstraint("owner", "project_key", "sdk_session_id", "subpath", name="uq_agent_sdk_keys_owner_key"),
    )
    op.create_index("ix_agent_sdk_keys_linked_session", "agent_sdk_keys", ["linked_session"])
    op.create_table(
        "agent_sdk_entries",
        sa.Column("key_id", BigInt, nullable=False),
        sa.Column("n", BigInt, nullable=False),
        sa.Column("owner", OWNER_TYPE, nullable=False, server_default=owner),
        sa.Column("uuid", sa.Text(), nullable=True),
        sa.Column("entry", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"], ["agent_sdk_keys.id"], name="fk_agent_sdk_entries_key_id", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("key_id", "n", name="pk_agent_sdk_entries"),
    )
    op.create_index("uq_agent_sdk_entries_uuid", "agent_sdk_entries", ["key_id", "uuid"], unique=True)
    if pg:
        for table in TABLES:
            op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
            op.execute(
                f"CREATE POLICY {table}_own ON {table} FOR ALL "
                "USING (owner = current_user) WITH CHECK (owner = current_user)"
            )


def downgrade() -> None:
    op.drop_index("uq_agent_sdk_entries_uuid", table_name="agent_sdk_entries")
    op.drop_table("agent_sdk_entries")
    op.drop_index("ix_agent_sdk_keys_linked_session", table_name="agent_sdk_keys")
    op.drop_table("agent_sdk_keys")
