"""The Agent SDK tables for the roles granted before them: what `db grant` gives on every other table.

Revision 0020 made `agent_sdk_keys` and `agent_sdk_entries` (row-level security: a role sees its own
rows only) and granted nothing on them: a role `db grant`ed before that revision could not read them.
Since every command asks `agent_sdk_keys` whether an adapter left entries to import (revision 0022),
such a member's every command failed with `permission denied` on a store upgraded past 0020.

* PostgreSQL: the roles granted so far (those holding a privilege on `sessions` besides its owner)
  get what `db grant` gives on all tables, SELECT, INSERT, UPDATE and DELETE on both (their own
  rows, by the policies of 0020), and USAGE on the keys' id sequence. SQLite has no roles.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("agent_sdk_keys", "agent_sdk_entries")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    sequence = bind.execute(sa.text("SELECT pg_get_serial_sequence('agent_sdk_keys', 'id')")).scalar()
    for role in _store_roles(bind):
        for table in TABLES:
            op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role}")
        if sequence:
            op.execute(f"GRANT USAGE ON SEQUENCE {sequence} TO {role}")


def _store_roles(bind: sa.engine.Connection) -> list[str]:
    """The roles granted the store so far, quoted: those holding a privilege on `sessions` besides its owner."""
    rows = bind.execute(
        sa.text(
            "SELECT DISTINCT r.rolname FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE c.oid = 'sessions'::regclass AND a.grantee <> c.relowner"
        )
    ).fetchall()
    return ['"' + str(r[0]).replace('"', '""') + '"' for r in sorted(rows)]


def downgrade() -> None:
    """Nothing: the tables go with revision 0020's downgrade, and their grants with them."""
