"""Import locks a person takes only for their own files: a row per owner and file name, not an advisory key.

Importers of one file (on every machine: the lock is named by the file's name, which a synced copy
keeps) were serialized by `pg_advisory_xact_lock(sha256(source, name))`. Any role that may connect can
compute that key and hold it, and every member's `import` / `watch` of that file then waits on it.

* import_locks: (owner, source, name), the primary key. An import inserts its row (ON CONFLICT DO
  NOTHING) and locks it FOR UPDATE in its own transaction. owner is the role (`current_user`; 'local'
  on SQLite, where the table is never locked: write transactions are serialized already).
* PostgreSQL: row-level security, enabled and forced (it binds the tables' owner role too, and holds on
  a store whose tables a superuser owns): a role sees, inserts and locks its own rows only, so nobody
  takes or waits on another's lock; one person's machines still take the same row.
* Privileges: none for PUBLIC; the roles granted so far (`db grant` gives the same from now on) get
  SELECT and INSERT, and UPDATE of `owner` alone, which SELECT ... FOR UPDATE needs and which the policy
  lets take no other value than the one it has. No DELETE: a row is kept for the next import.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCAL_OWNER = "local"
OWNER_TYPE = sa.String(63)
TABLE = "import_locks"


def upgrade() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    op.create_table(
        TABLE,
        sa.Column(
            "owner",
            OWNER_TYPE,
            nullable=False,
            server_default=sa.text("current_user") if pg else sa.text(f"'{LOCAL_OWNER}'"),
        ),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "source", "name", name="pk_import_locks"),
    )
    if not pg:
        return
    op.execute(f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY")
    op.execute(f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY {TABLE}_own ON {TABLE} FOR ALL USING (owner = current_user) WITH CHECK (owner = current_user)"
    )
    op.execute(f"REVOKE ALL ON {TABLE} FROM PUBLIC")
    for role in _store_roles(bind):
        _grant(f'"{role}"')


def _store_roles(bind: sa.engine.Connection) -> list[str]:
    """The roles granted the store so far: those holding a privilege on `sessions` besides its owner."""
    rows = bind.execute(
        sa.text(
            "SELECT DISTINCT r.rolname FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE c.oid = 'sessions'::regclass AND a.grantee <> c.relowner"
        )
    ).fetchall()
    return sorted(str(r[0]).replace('"', '""') for r in rows)


def _grant(role: str) -> None:
    """What `db grant` gives on import_locks: rows in and locked, never deleted."""
    op.execute(f"GRANT SELECT, INSERT ON {TABLE} TO {role}")
    op.execute(f"GRANT UPDATE (owner) ON {TABLE} TO {role}")


def downgrade() -> None:
    op.drop_table(TABLE)
