"""A team store that holds against its own members (issue 36). PostgreSQL, except one column.

* blobs.writer, replacements.writer: the role that wrote the row (`current_user`, checked by the
  policies; 'local' on SQLite, and the owner for rows written before this revision). A blob is
  readable by its owner, or through a replacement in a session the role may read that the blob's
  owner wrote, or that the blob's own writer wrote (a share writer's spill: the writer held its
  bytes). A share writer's blob must hold what its key says (stored as written, `sha256(data)`
  checked), so a spill of the owner's is never named, and never poisoned, by its hash alone.
* sessionstore_search_window() (revision 0011) again: still SECURITY DEFINER (the trigram index is
  unusable under policies), now with `search_path = pg_catalog, <schema>, pg_temp` and every name
  schema-qualified (a temporary view could shadow `session_shares` and run SQL as the tables' owner),
  and EXECUTE revoked from PUBLIC, like every function of the store: granted to the store's roles.
  It keeps only the rows the connected role owns or was shared, in its own SQL, so it holds on a
  store whose tables a superuser owns too.
* Policies: a write share reads and appends; for compaction and the derived rows it may update view
  rows, replacement decisions, session notes, pipeline state, pins, the search index and usage
  counts, and delete pins, search and usage rows. Nobody but the owner updates or deletes the record:
  messages, compactions, source lines, imports, import files, forks; a share writer's update of a
  session row leaves its identity (title, cwd, model, window, host, parent, metadata, creation time)
  as it was (trigger `sessions_identity_fixed`).
* Privileges of the roles granted so far (`db grant` gives the same from now on): USAGE on the
  sequences, never UPDATE (setval) or SELECT (last_value); no UPDATE on messages, compactions, blobs,
  source lines, forks; UPDATE of replacements only on kind and replacement text; EXECUTE on
  the store's functions.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOCAL_OWNER = "local"
#: The record: only the owner updates or deletes these rows.
RECORD = ("messages", "compactions", "source_lines", "imports", "import_files", "session_forks")
#: Derived rows a share writer may delete (what a rebuild or a recount clears).
DERIVED_DELETABLE = (
    "pins",
    "search_docs",
    "search_marks",
    "usage_marks",
    "usage_state",
    "usage_responses",
    "usage_rollup",
)
#: Tables no person updates at all (the owner role's maintenance still may).
NOT_UPDATED = ("messages", "compactions", "blobs", "source_lines", "session_forks", "alembic_version")
#: A caller with more index rows than this (by the statistics) is searched through the trigram index, not row by row.
MANY_ROWS = 5000
#: Columns of a session row only its owner changes.
IDENTITY = ("id", "title", "cwd", "model", "context_window", "created_at", "parent_id", "metadata_json", "host")

SEARCH_WINDOW = r"""
CREATE OR REPLACE FUNCTION {schema}.sessionstore_search_window(
    terms text[], newest integer, enough integer, in_session varchar, in_kind varchar, since varchar)
RETURNS TABLE (session_id varchar, seq bigint) LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 500
SET search_path = pg_catalog, {schema}, pg_temp SET enable_seqscan = off SET enable_indexscan = on AS $fn$
DECLARE
    shared varchar[] := ARRAY(SELECT h.session_id FROM {schema}.session_shares h
        WHERE h.grantee OPERATOR(pg_catalog.=) session_user);
    -- The rows the caller may read, as two branches (its own, by the (owner, id) index newest first; the
    -- sessions shared with it), each ending in @COND@ (the conditions) and @NEWEST@ (newest first): the cost of a
    -- search follows the caller's rows, never the other owners' matches.
    -- The caller's rows by the statistics (most common owners and their shares of the table): a caller
    -- holding few is searched by its own rows (the (owner, id) index); one holding many by the trigram
    -- index, as before this revision (reading its rows one by one would read most of the table).
    own_rows real := coalesce((SELECT f.freq FROM pg_catalog.pg_stats s, ROWS FROM (pg_catalog.unnest(
        s.most_common_vals::text::text[]), pg_catalog.unnest(s.most_common_freqs)) AS f(val, freq) WHERE s.attname = 'owner'
        AND s.tablename = 'search_docs' AND s.schemaname = (SELECT n.nspname FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = '{schema}.search_docs'::regclass)
        AND f.val = session_user), 0) * (SELECT GREATEST(c.reltuples, 0) FROM pg_catalog.pg_class c
        WHERE c.oid = '{schema}.search_docs'::regclass);
    own text := CASE WHEN own_rows > {many} THEN 'pg_catalog.concat(d.owner)' ELSE 'd.owner' END;
    visible text := '(SELECT d.id, d.session_id, d.seq, d.timestamp, d.tsv FROM {schema}.search_docs d '
        || pg_catalog.format('WHERE %s OPERATOR(pg_catalog.=) %L', own, session_user) || '@COND@@NEWEST@)'
        || CASE WHEN pg_catalog.cardinality(shared) = 0 THEN '' ELSE
            ' UNION ALL (SELECT d.id, d.session_id, d.seq, d.timestamp, d.tsv FROM {schema}.search_docs d '
            || pg_catalog.format('WHERE d.session_id OPERATOR(pg_catalog.=) ANY (%L::varchar[]) ', shared)
            || pg_catalog.format('AND d.owner OPERATOR(pg_catalog.<>) %L', session_user) || '@COND@@NEWEST@)' END;
    filters text := '';
    matches text := '';
    newest_first text := ' ORDER BY d.id DESC' || CASE WHEN newest IS NULL THEN '' ELSE pg_catalog.format(' LIMIT %s', newest) END;
    words tsquery := pg_catalog.plainto_tsquery('simple', pg_catalog.array_to_string(terms, ' '));
    found bigint := 0;
BEGIN
    FOR i IN 1 .. coalesce(pg_catalog.array_length(terms, 1), 0) LOOP
        IF pg_catalog.octet_length(terms[i]) = pg_catalog.char_length(terms[i]) THEN
            matches := matches || pg_catalog.format(' AND d.body OPERATOR(pg_catalog.~*) %L', '***=' || terms[i]);
        ELSE
            matches := matches || pg_catalog.format(' AND d.body OPERATOR(pg_catalog.~~*) %L', '%' || pg_catalog.replace(
                pg_catalog.replace(pg_catalog.replace(terms[i], '\', '\\'), '%', '\%'), '_', '\_') || '%');
        END IF;
    END LOOP;
    IF in_session IS NOT NULL THEN
        filters := filters || pg_catalog.format(' AND d.session_id OPERATOR(pg_catalog.=) %L', in_session);
    END IF;
    IF in_kind IS NOT NULL THEN
        filters := filters || pg_catalog.format(' AND d.kind OPERATOR(pg_catalog.=) %L', in_kind);
    END IF;
    IF since IS NOT NULL THEN
        filters := filters || pg_catalog.format(' AND d.timestamp OPERATOR(pg_catalog.>=) %L', since);
    END IF;
    IF pg_catalog.numnode(words) = 0 THEN
        PERFORM pg_catalog.set_config('enable_indexscan', 'off', true);
        RETURN QUERY EXECUTE 'SELECT d.session_id, d.seq FROM (SELECT * FROM ('
            || pg_catalog.replace(pg_catalog.replace(visible, '@NEWEST@', newest_first), '@COND@', matches || filters) || ') d' || newest_first || ') d';
        RETURN;
    END IF;
    RETURN QUERY EXECUTE 'SELECT r.session_id, r.seq FROM (SELECT w.id, w.session_id, w.seq, w.timestamp, '
        'pg_catalog.ts_rank(w.tsv, $1) AS score FROM (SELECT d.id, d.session_id, d.seq, d.timestamp, d.tsv FROM ('
        || pg_catalog.replace(pg_catalog.replace(visible, '@NEWEST@', newest_first), '@COND@',
            ' AND d.tsv OPERATOR(pg_catalog.@@) $1' || filters)
        || ') d' || newest_first || ') w '
        'ORDER BY score DESC, w.timestamp DESC NULLS LAST, w.seq DESC) r '
        'WHERE EXISTS (SELECT 1 FROM {schema}.search_docs d WHERE d.id OPERATOR(pg_catalog.=) r.id' || matches
        || ' OFFSET 0)' || CASE WHEN enough IS NULL THEN '' ELSE pg_catalog.format(' LIMIT %s', enough) END USING words;
    GET DIAGNOSTICS found = ROW_COUNT;
    IF enough IS NULL OR found < enough THEN
        PERFORM pg_catalog.set_config('enable_indexscan', 'off', true);
        RETURN QUERY EXECUTE 'SELECT d.session_id, d.seq FROM (SELECT * FROM (' || pg_catalog.replace(
            pg_catalog.replace(visible, '@NEWEST@', newest_first), '@COND@',
            ' AND NOT d.tsv OPERATOR(pg_catalog.@@) $1' || matches || filters) || ') d'
            || newest_first || ') d' USING words;
    END IF;
END
$fn$"""

IDENTITY_FIXED = (
    "CREATE OR REPLACE FUNCTION {schema}.sessionstore_identity_fixed() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path = pg_catalog, {schema}, pg_temp AS $$ BEGIN "
    "IF ({new}) IS DISTINCT FROM ({old}) THEN "
    "RAISE EXCEPTION 'only the owner of a session changes its title, cwd, model or origin' USING ERRCODE = '42501'; "
    "END IF; RETURN NEW; END $$"
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


def _policy(table: str, name: str, command: str, clause: str) -> None:
    op.execute(f"DROP POLICY IF EXISTS {table}_{name} ON {table}")
    op.execute(f"CREATE POLICY {table}_{name} ON {table} FOR {command} {clause}")


def _store_roles(bind: sa.engine.Connection) -> list[str]:
    """The roles granted the store so far: those holding a privilege on `sessions` besides its owner."""
    rows = bind.execute(
        sa.text(
            "SELECT DISTINCT r.rolname FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE c.oid = 'sessions'::regclass AND a.grantee <> c.relowner"
        )
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def upgrade() -> None:
    bind = op.get_bind()
    pg = bind.dialect.name == "postgresql"
    if not pg:
        # One owner, 'local', who wrote every row (no batch copy: `blobs` is the parent of `replacements`).
        for table in ("blobs", "replacements"):
            op.add_column(table, sa.Column("writer", sa.String(63), nullable=False, server_default=LOCAL_OWNER))
        return
    for table in ("blobs", "replacements"):
        op.add_column(table, sa.Column("writer", sa.String(63), nullable=True))
        op.execute(f"UPDATE {table} SET writer = owner")
        op.execute(
            f"ALTER TABLE {table} ALTER COLUMN writer SET NOT NULL, ALTER COLUMN writer SET DEFAULT current_user"
        )
    schema = str(bind.execute(sa.text("SELECT quote_ident(current_schema())")).scalar())
    op.execute(SEARCH_WINDOW.format(schema=schema, many=MANY_ROWS))
    op.execute("CREATE INDEX ix_search_docs_owner_id ON search_docs (owner, id)")
    op.execute(
        IDENTITY_FIXED.format(
            schema=schema,
            new=", ".join(f"NEW.{c}" for c in IDENTITY),
            old=", ".join(f"OLD.{c}" for c in IDENTITY),
        )
    )
    op.execute(
        "CREATE TRIGGER sessions_identity_fixed BEFORE UPDATE ON sessions FOR EACH ROW "
        "WHEN (OLD.owner IS DISTINCT FROM current_user) EXECUTE FUNCTION sessionstore_identity_fixed()"
    )
    _policies(_session_scoped(bind))
    functions = _functions(bind)
    for function in functions:
        op.execute(f"REVOKE EXECUTE ON FUNCTION {function} FROM PUBLIC")
    for role in _store_roles(bind):
        _regrant(schema, f'"{role}"', functions)


def _functions(bind: sa.engine.Connection) -> list[str]:
    """The store's functions in this schema, as `name(argtypes)`."""
    rows = bind.execute(
        sa.text(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace "
            "AND p.proname LIKE 'sessionstore%'"
        )
    ).fetchall()
    return [str(r[0]) for r in rows]


def _regrant(schema: str, role: str, functions: list[str]) -> None:
    """A role granted before this revision gets what `db grant` gives from now on."""
    op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}")
    op.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
    for table in NOT_UPDATED:
        op.execute(f"REVOKE UPDATE ON {table} FROM {role}")
    op.execute(f"REVOKE UPDATE ON replacements FROM {role}")
    op.execute(f"GRANT UPDATE (kind, replacement) ON replacements TO {role}")
    for function in functions:
        op.execute(f"GRANT EXECUTE ON FUNCTION {function} TO {role}")


def _policies(scoped: list[str]) -> None:
    """Shares as the README says; blobs readable only through a session the role may read."""
    for table in scoped:
        record = table in RECORD
        writable = "owner = current_user" if record else f"owner = current_user OR {_shared(table, True)}"
        check = f"({_may_write(table)})" + (" AND writer = current_user" if table == "replacements" else "")
        _policy(table, "write", "UPDATE", f"USING ({writable}) WITH CHECK ({check})")
        removable = (
            f"owner = current_user OR {_shared(table, True)}" if table in DERIVED_DELETABLE else "owner = current_user"
        )
        _policy(table, "remove", "DELETE", f"USING ({removable})")
        if table == "replacements":
            _policy(table, "create", "INSERT", f"WITH CHECK ({check})")
    _policy(
        "blobs",
        "read",
        "SELECT",
        "USING (owner = current_user OR EXISTS (SELECT 1 FROM replacements r WHERE r.blob_sha256 = blobs.sha256 "
        "AND r.owner = blobs.owner AND (r.writer = blobs.owner OR r.writer = blobs.writer)))",
    )
    _policy(
        "blobs",
        "create",
        "INSERT",
        "WITH CHECK (writer = current_user AND (owner = current_user OR (EXISTS (SELECT 1 FROM session_shares h "
        "WHERE h.owner = blobs.owner AND h.grantee = current_user AND NOT h.read_only) AND compression = 'none' "
        "AND sha256 = encode(sha256(data), 'hex'))))",
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _downgrade_postgres(bind)
    for table in ("blobs", "replacements"):
        op.execute(f"ALTER TABLE {table} DROP COLUMN writer")


def _downgrade_postgres(bind: sa.engine.Connection) -> None:
    """Revision 0017's policies, grants and function settings (the search function keeps its qualified names)."""
    schema = str(bind.execute(sa.text("SELECT quote_ident(current_schema())")).scalar())
    op.execute("DROP INDEX IF EXISTS ix_search_docs_owner_id")
    op.execute("DROP TRIGGER IF EXISTS sessions_identity_fixed ON sessions")
    op.execute("DROP FUNCTION IF EXISTS sessionstore_identity_fixed()")
    op.execute(
        "ALTER FUNCTION sessionstore_search_window(text[], integer, integer, varchar, varchar, varchar) "
        f"SET search_path = {schema}"
    )
    for table in _session_scoped(bind):
        _policy(
            table,
            "write",
            "UPDATE",
            f"USING (owner = current_user OR {_shared(table, True)}) WITH CHECK ({_may_write(table)})",
        )
        _policy(table, "remove", "DELETE", f"USING (owner = current_user OR {_shared(table, True)})")
    _policy("replacements", "create", "INSERT", f"WITH CHECK ({_may_write('replacements')})")
    _policy(
        "blobs",
        "read",
        "SELECT",
        "USING (owner = current_user OR EXISTS (SELECT 1 FROM replacements r "
        "WHERE r.blob_sha256 = blobs.sha256 AND r.owner = blobs.owner))",
    )
    _policy(
        "blobs",
        "create",
        "INSERT",
        "WITH CHECK (owner = current_user OR EXISTS (SELECT 1 FROM session_shares h "
        "WHERE h.owner = blobs.owner AND h.grantee = current_user AND NOT h.read_only))",
    )
    functions = _functions(bind)
    for function in functions:
        op.execute(f"GRANT EXECUTE ON FUNCTION {function} TO PUBLIC")
    for role in _store_roles(bind):
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO "{role}"')
        op.execute(f'REVOKE INSERT, UPDATE, DELETE ON alembic_version FROM "{role}"')
        op.execute(f'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {schema} TO "{role}"')
