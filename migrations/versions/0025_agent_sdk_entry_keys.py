"""An Agent SDK entry goes only into a key of its own role's.

Revision 0020's policy on `agent_sdk_entries` checked the row's owner only. A foreign key is checked
without row-level security, so a member could insert entries of their own into another role's key
(any key id, by counting): those rows took the key's `(key_id, n)` and `(key_id, uuid)` slots, and the
key's owner's next appends and imports failed on them. The policy now checks the key too: the row's
key must be one the current role owns, on INSERT and on any UPDATE.

* PostgreSQL: `agent_sdk_entries_own` is recreated with that check. SQLite has one owner and no policies.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

from typing import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OWN_ROW = "owner = current_user"
OWN_KEY = "EXISTS (SELECT 1 FROM agent_sdk_keys k WHERE k.id = key_id AND k.owner = current_user)"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP POLICY IF EXISTS agent_sdk_entries_own ON agent_sdk_entries")
    op.execute(
        f"CREATE POLICY agent_sdk_entries_own ON agent_sdk_entries FOR ALL "
        f"USING ({OWN_ROW}) WITH CHECK ({OWN_ROW} AND {OWN_KEY})"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP POLICY IF EXISTS agent_sdk_entries_own ON agent_sdk_entries")
    op.execute(
        f"CREATE POLICY agent_sdk_entries_own ON agent_sdk_entries FOR ALL USING ({OWN_ROW}) WITH CHECK ({OWN_ROW})"
    )
