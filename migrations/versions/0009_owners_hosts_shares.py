"""Owners, hosts and shares: one database for many people and machines.

* sessions.owner: whose session it is (PostgreSQL: the role that created it, `current_user`;
  SQLite: the single implicit owner 'local'); sessions.host: the machine it was captured on.
* owner on every session-scoped table (every table with a session_id column, found at upgrade
  time so tables added by other revisions are covered) and on blobs; unique keys scoped by it:
  imports (owner, source, source_key), blobs (owner, sha256), import_files (owner, source, path).
  The tables of revisions 0005-0008 (session_forks, pins, import_files, usage_*) are session-scoped
  like the others; the usage and search tables a reader derives are written by its own role (as
  the session owner's rows, for a session it may write).
* session_shares: a session shared with a role, read-only or not.
* PostgreSQL: row-level security enabled on every one of those tables, with policies by owner and
  share, and forced (binding the tables' owner too) on all but search_docs and session_shares, which
  sessionstore_search_keys() reads as the owner so that substring search keeps its trigram index;
  a trigger keeps a session's owner fixed. A row of a session-scoped table
  takes its owner from `sessionstore_writer()`: the session's owner when the writing transaction
  named it (a role writing a session shared with it), else current_user.

Existing rows are owned by the role running the upgrade (PostgreSQL) or by 'local' (SQLite).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCAL_OWNER = "local"
#: Tables whose row-level security binds every role but their owner: sessionstore_search_keys() reads
#: them as the owner, applying the policies' rule itself (see SEARCH_KEYS).
UNFORCED = ("search_docs", "session_shares")
OWNER_TYPE = sa.String(63)
WRITER = (
    "CREATE OR REPLACE FUNCTION sessionstore_writer() RETURNS varchar LANGUAGE sql STABLE AS "
    "$$ SELECT COALESCE(NULLIF(current_setting('sessionstore.owner', true), ''), current_user)::varchar $$"
)
#: Substring search under row-level security. PostgreSQL will not use an index for a condition that is
#: not leakproof (ILIKE) on a table with policies, so the trigram index would go unused and every search
#: would scan the whole index table. This function runs as the tables' owner (for whom search_docs and
#: session_shares do not force row-level security), uses the trigram index, and keeps only the rows the
#: connected role (session_user) owns or has been shared: the same rule as the policies. ROWS 50 (the
#: planner's default guess is 1000) has the caller's query fetch each candidate by its key instead of
#: hashing the whole index table; enable_seqscan off because the planner prices an ILIKE over long,
#: TOASTed bodies far below its cost and would scan a table of few rows rather than use the index.
SEARCH_KEYS = """
CREATE OR REPLACE FUNCTION sessionstore_search_keys(patterns text[])
RETURNS TABLE (session_id varchar, seq bigint) LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 50
SET search_path = {schema} SET enable_seqscan = off AS $fn$
DECLARE
    matches text := '';
BEGIN
    FOR i IN 1 .. coalesce(array_length(patterns, 1), 0) LOOP
        -- A literal (quoted by %L), not a parameter: the planner must see the pattern to use the index.
        matches := matches || format(' AND d.body ILIKE %L', patterns[i]);
    END LOOP;
    RETURN QUERY EXECUTE 'SELECT d.session_id, d.seq FROM search_docs d WHERE (d.owner = session_user '
        'OR EXISTS (SELECT 1 FROM session_shares h WHERE h.session_id = d.session_id AND h.owner = d.owner '
        'AND h.grantee = session_user))' || matches;
END
$fn$"""
OWNER_FIXED = (
    "CREATE OR REPLACE FUNCTION sessionstore_owner_fixed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.owner IS DISTINCT FROM OLD.owner THEN "
    "RAISE EXCEPTION 'a session''s owner cannot change' USING ERRCODE = '42501'; END IF; RETURN NEW; END $$"
)


def _shared(table: str, writable: bool) -> str:
    """A share of this row's session, by its owner, to the current role (writable: not read-only)."""
    ro = " AND NOT h.read_only" if writable else ""
    return (
        f"EXISTS (SELECT 1 FROM session_shares h WHERE h.session_id = {table}.session_id "
        f"AND h.owner = {table}.owner AND h.grantee = current_user{ro})"
    )


def _may_write(table: str) -> str:
    """A row may be written by its session's owner (into their own session) or by a writable share."""
    own = f"EXISTS (SELECT 1 FROM sessions s WHERE s.id = {table}.session_id AND s.owner = current_user)"
    return f"(owner = current_user AND {own}) OR {_shared(table, True)}"


def _session_scoped(bind: sa.engine.Connection) -> list[str]:
    """Every table with a session_id column (tables added later by other revisions included)."""
    inspector = sa.inspect(bind)
    names = [t for t in inspector.get_table_names() if t not in ("sessions", "session_shares")]
    return sorted(t for t in names if any(c["name"] == "session_id" for c in inspector.get_columns(t)))


def upgrade() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    scoped = _session_scoped(bind)
    if pg:
        op.execute(WRITER)
        op.execute(OWNER_FIXED)
    default = sa.text("current_user") if pg else sa.text(f"'{LOCAL_OWNER}'")
    writer = sa.text("sessionstore_writer()") if pg else sa.text(f"'{LOCAL_OWNER}'")
    op.add_column("sessions", sa.Column("owner", OWNER_TYPE, nullable=False, server_default=default))
    op.add_column("sessions", sa.Column("host", sa.String(255), nullable=True))
    op.create_index("uq_sessions_id_owner", "sessions", ["id", "owner"], unique=True)
    op.create_index("ix_sessions_owner_host", "sessions", ["owner", "host"])
    for table in scoped + ["blobs"]:
        op.add_column(table, sa.Column("owner", OWNER_TYPE, nullable=False, server_default=writer))
    op.create_table(
        "session_shares",
        sa.Column("session_id", sa.String(36), nullable=False),
        sa.Column("grantee", OWNER_TYPE, nullable=False),
        sa.Column("owner", OWNER_TYPE, nullable=False, server_default=default),
        sa.Column("read_only", sa.Boolean(), nullable=False, server_default=sa.text("false")),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id", "owner"],
            ["sessions.id", "sessions.owner"],
            name="fk_session_shares_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "grantee", name="pk_session_shares"),
    )
    op.create_index("ix_session_shares_grantee", "session_shares", ["grantee"])
    with op.batch_alter_table("imports") as batch:
        batch.drop_constraint("uq_imports_source_source_key", type_="unique")
        batch.create_unique_constraint("uq_imports_owner_source_source_key", ["owner", "source", "source_key"])
    with op.batch_alter_table("import_files") as batch:
        batch.drop_constraint("pk_import_files", type_="primary")
        batch.create_primary_key("pk_import_files", ["owner", "source", "path"])
    with op.batch_alter_table("replacements") as batch:
        batch.drop_constraint("fk_replacements_blob_sha256_blobs", type_="foreignkey")
    with op.batch_alter_table("blobs") as batch:
        batch.drop_constraint("pk_blobs", type_="primary")
        batch.create_primary_key("pk_blobs", ["owner", "sha256"])
    with op.batch_alter_table("replacements") as batch:
        batch.create_foreign_key("fk_replacements_owner_blobs", "blobs", ["owner", "blob_sha256"], ["owner", "sha256"])
    if pg:
        _policies(scoped)
        if "search_docs" in scoped:
            schema = bind.execute(sa.text("SELECT quote_ident(current_schema())")).scalar()
            op.execute(SEARCH_KEYS.format(schema=schema))


def _policies(scoped: list[str]) -> None:
    """Row-level security, enabled and forced, on sessions, shares, blobs and every session-scoped table."""
    op.execute(
        "CREATE TRIGGER sessions_owner_fixed BEFORE UPDATE OF owner ON sessions "
        "FOR EACH ROW EXECUTE FUNCTION sessionstore_owner_fixed()"
    )
    share_of_session = (
        "EXISTS (SELECT 1 FROM session_shares h WHERE h.session_id = sessions.id "
        "AND h.owner = sessions.owner AND h.grantee = current_user{ro})"
    )
    read, write = share_of_session.format(ro=""), share_of_session.format(ro=" AND NOT h.read_only")
    statements = {
        "sessions": [
            ("read", "SELECT", f"USING (owner = current_user OR {read})"),
            ("create", "INSERT", "WITH CHECK (owner = current_user)"),
            (
                "write",
                "UPDATE",
                f"USING (owner = current_user OR {write}) WITH CHECK (owner = current_user OR {write})",
            ),
            ("remove", "DELETE", "USING (owner = current_user)"),
        ],
        "session_shares": [
            ("read", "SELECT", "USING (owner = current_user OR grantee = current_user)"),
            ("create", "INSERT", "WITH CHECK (owner = current_user)"),
            ("write", "UPDATE", "USING (owner = current_user) WITH CHECK (owner = current_user)"),
            ("remove", "DELETE", "USING (owner = current_user)"),
        ],
        "blobs": [
            (
                "read",
                "SELECT",
                "USING (owner = current_user OR EXISTS (SELECT 1 FROM replacements r "
                "WHERE r.blob_sha256 = blobs.sha256 AND r.owner = blobs.owner))",
            ),
            (
                "create",
                "INSERT",
                "WITH CHECK (owner = current_user OR EXISTS (SELECT 1 FROM session_shares h "
                "WHERE h.owner = blobs.owner AND h.grantee = current_user AND NOT h.read_only))",
            ),
            ("write", "UPDATE", "USING (owner = current_user) WITH CHECK (owner = current_user)"),
            ("remove", "DELETE", "USING (owner = current_user)"),
        ],
    }
    for table in scoped:
        statements[table] = [
            ("read", "SELECT", f"USING (owner = current_user OR {_shared(table, False)})"),
            ("create", "INSERT", f"WITH CHECK ({_may_write(table)})"),
            (
                "write",
                "UPDATE",
                f"USING (owner = current_user OR {_shared(table, True)}) WITH CHECK ({_may_write(table)})",
            ),
            ("remove", "DELETE", f"USING (owner = current_user OR {_shared(table, True)})"),
        ]
    for table, policies in statements.items():
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        if table not in UNFORCED:
            op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        for name, command, clause in policies:
            op.execute(f"CREATE POLICY {table}_{name} ON {table} FOR {command} {clause}")


def downgrade() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    scoped = _session_scoped(bind)
    if pg:
        for table in scoped + ["sessions", "session_shares", "blobs"]:
            for name in ("read", "create", "write", "remove"):
                op.execute(f"DROP POLICY IF EXISTS {table}_{name} ON {table}")
            op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
            op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        op.execute("DROP TRIGGER IF EXISTS sessions_owner_fixed ON sessions")
    with op.batch_alter_table("replacements") as batch:
        batch.drop_constraint("fk_replacements_owner_blobs", type_="foreignkey")
    # Blobs stored once per owner become one row per digest again (same digest, same bytes).
    op.execute("DELETE FROM blobs WHERE owner <> (SELECT MIN(b.owner) FROM blobs b WHERE b.sha256 = blobs.sha256)")
    with op.batch_alter_table("blobs") as batch:
        batch.drop_constraint("pk_blobs", type_="primary")
        batch.create_primary_key("pk_blobs", ["sha256"])
    with op.batch_alter_table("replacements") as batch:
        batch.create_foreign_key("fk_replacements_blob_sha256_blobs", "blobs", ["blob_sha256"], ["sha256"])
    # A path read by several owners becomes one row again (the one that read furthest).
    op.execute(
        "DELETE FROM import_files WHERE EXISTS (SELECT 1 FROM import_files f WHERE f.source = "
        "import_files.source AND f.path = import_files.path AND (f.bytes_done > import_files.bytes_done "
        "OR (f.bytes_done = import_files.bytes_done AND f.owner < import_files.owner)))"
    )
    with op.batch_alter_table("import_files") as batch:
        batch.drop_constraint("pk_import_files", type_="primary")
        batch.create_primary_key("pk_import_files", ["source", "path"])
    with op.batch_alter_table("imports") as batch:
        batch.drop_constraint("uq_imports_owner_source_source_key", type_="unique")
        batch.create_unique_constraint("uq_imports_source_source_key", ["source", "source_key"])
    op.drop_index("ix_session_shares_grantee", table_name="session_shares")
    op.drop_table("session_shares")
    op.drop_index("ix_sessions_owner_host", table_name="sessions")
    op.drop_index("uq_sessions_id_owner", table_name="sessions")
    for table, column in [(t, "owner") for t in scoped + ["blobs"]] + [("sessions", "host"), ("sessions", "owner")]:
        # A plain DROP COLUMN on both engines: a batch copy of `sessions` on SQLite would drop the
        # table under its children, and ON DELETE CASCADE would empty them.
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    if pg:
        op.execute("DROP FUNCTION IF EXISTS sessionstore_search_keys(text[])")
        op.execute("DROP FUNCTION IF EXISTS sessionstore_owner_fixed()")
        op.execute("DROP FUNCTION IF EXISTS sessionstore_writer()")
