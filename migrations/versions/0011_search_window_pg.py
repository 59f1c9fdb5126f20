"""PostgreSQL search at a bounded cost: index rows numbered in indexing order, matching by literal regex.

PostgreSQL only (SQLite: nothing to do; its FTS5 index already ranks a common query among its
RANK_WINDOW most recently indexed matches, by rowid).

* search_docs.id: an identity, numbered in the order rows are indexed, with a btree index, so a
  query matching thousands of messages can take its newest matches by walking that index
  backwards and stop, instead of reading every match's text (what made a common word cost
  hundreds of milliseconds).
* sessionstore_search_window(): replaces sessionstore_search_keys() (revision 0009). Same rule
  (runs as the tables' owner so the trigram index is usable under row-level security, and keeps
  only rows the connected role owns or was shared), and also: the session, role and time filters
  that are columns of the index table, and at most `newest` keys, the newest first. Each term is
  matched case-insensitively as a literal (`~* '***=term'`), which pg_trgm's index serves like
  ILIKE, and which does not lowercase a whole body before looking into it (ILIKE does): about
  three times less work per row read. A term with non-ASCII letters keeps ILIKE (pg_trgm finds no
  trigram in such a regex and would read its whole index).
* search_docs' text and tsvector compressed with lz4 when the server has it (rows indexed from now
  on): a search decompresses each candidate's text, lz4 several times faster than pglz.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEARCH_WINDOW = r"""
CREATE OR REPLACE FUNCTION sessionstore_search_window(
    terms text[], newest integer, enough integer, in_session varchar, in_kind varchar, since varchar)
RETURNS TABLE (session_id varchar, seq bigint) LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 500
SET search_path = {schema} SET enable_seqscan = off SET enable_indexscan = on AS $fn$
DECLARE
    visible text := 'SELECT d.id, d.session_id, d.seq, d.timestamp, d.tsv FROM search_docs d '
        'WHERE (d.owner = session_user OR EXISTS (SELECT 1 FROM session_shares h '
        'WHERE h.session_id = d.session_id AND h.owner = d.owner AND h.grantee = session_user))';
    filters text := '';
    matches text := '';
    newest_first text := ' ORDER BY d.id DESC' || CASE WHEN newest IS NULL THEN '' ELSE format(' LIMIT %s', newest) END;
    words tsquery := plainto_tsquery('simple', array_to_string(terms, ' '));
    found bigint := 0;
BEGIN
    FOR i IN 1 .. coalesce(array_length(terms, 1), 0) LOOP
        -- A literal (quoted by %L), not a parameter: the planner must see the pattern to use the index.
        -- pg_trgm finds no trigram in a case-insensitive regex of non-ASCII letters (it would read the
        -- whole index), so such a term keeps ILIKE.
        IF octet_length(terms[i]) = char_length(terms[i]) THEN
            matches := matches || format(' AND d.body ~* %L', '***=' || terms[i]);
        ELSE
            matches := matches || format(' AND d.body ILIKE %L', '%' || replace(replace(replace(
                terms[i], '\', '\\'), '%', '\%'), '_', '\_') || '%');
        END IF;
    END LOOP;
    IF in_session IS NOT NULL THEN
        filters := filters || format(' AND d.session_id = %L', in_session);
    END IF;
    IF in_kind IS NOT NULL THEN
        filters := filters || format(' AND d.kind = %L', in_kind);
    END IF;
    IF since IS NOT NULL THEN
        filters := filters || format(' AND d.timestamp >= %L', since);
    END IF;
    IF numnode(words) = 0 THEN
        PERFORM set_config('enable_indexscan', 'off', true);
        RETURN QUERY EXECUTE 'SELECT d.session_id, d.seq FROM (' || visible || matches || filters
            || newest_first || ') d';
        RETURN;
    END IF;
    -- First the rows holding every word (the tsvector index finds them without reading a text): they
    -- rank above the rows matching only inside longer words. Ranked (reading their tsvectors only),
    -- then their texts read in rank order only until `enough` hold the terms as written (OFFSET 0
    -- keeps that test a per-row subplan: as a semi-join the planner would read every candidate).
    RETURN QUERY EXECUTE 'SELECT r.session_id, r.seq FROM (SELECT w.id, w.session_id, w.seq, w.timestamp, '
        'ts_rank(w.tsv, $1) AS score FROM (SELECT d.id, d.session_id, d.seq, d.timestamp, d.tsv FROM ('
        || visible || ' AND d.tsv @@ $1' || filters || newest_first || ') d) w '
        'ORDER BY score DESC, w.timestamp DESC NULLS LAST, w.seq DESC) r '
        'WHERE EXISTS (SELECT 1 FROM search_docs d WHERE d.id = r.id' || matches || ' OFFSET 0)'
        || CASE WHEN enough IS NULL THEN '' ELSE format(' LIMIT %s', enough) END USING words;
    GET DIAGNOSTICS found = ROW_COUNT;
    IF enough IS NULL OR found < enough THEN
        -- Then the rest, reading every candidate's text (fewer word matches than a page: a rarer query).
        -- From the trigram index, never by walking the rows newest first: the planner's guess of how
        -- many texts hold a substring is rough, and a walk past a rare one reads the whole table.
        -- (The function's SET clause restores the setting when it returns.)
        PERFORM set_config('enable_indexscan', 'off', true);
        RETURN QUERY EXECUTE 'SELECT d.session_id, d.seq FROM (' || visible || ' AND NOT d.tsv @@ $1'
            || matches || filters || newest_first || ') d' USING words;
    END IF;
END
$fn$"""

#: True when the server was built with lz4 (PostgreSQL 14 and later, --with-lz4).
LZ4 = "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"

#: Revision 0009's function, as it was, for the downgrade.
SEARCH_KEYS_0009 = """
CREATE OR REPLACE FUNCTION sessionstore_search_keys(patterns text[])
RETURNS TABLE (session_id varchar, seq bigint) LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 50
SET search_path = {schema} SET enable_seqscan = off AS $fn$
DECLARE
    matches text := '';
BEGIN
    FOR i IN 1 .. coalesce(array_length(patterns, 1), 0) LOOP
        matches := matches || format(' AND d.body ILIKE %L', patterns[i]);
    END LOOP;
    RETURN QUERY EXECUTE 'SELECT d.session_id, d.seq FROM search_docs d WHERE (d.owner = session_user '
        'OR EXISTS (SELECT 1 FROM session_shares h WHERE h.session_id = d.session_id AND h.owner = d.owner '
        'AND h.grantee = session_user))' || matches;
END
$fn$"""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE search_docs ADD COLUMN id bigint GENERATED BY DEFAULT AS IDENTITY")
    op.execute("CREATE INDEX ix_search_docs_id ON search_docs (id)")
    if bind.execute(sa.text(LZ4)).scalar():
        # Rows indexed from now on: a text lz4 decompresses several times faster than pglz, and a
        # search decompresses every candidate's text to check it (and its tsvector to rank it).
        op.execute(
            "ALTER TABLE search_docs ALTER COLUMN body SET COMPRESSION lz4, ALTER COLUMN tsv SET COMPRESSION lz4"
        )
    schema = bind.execute(sa.text("SELECT quote_ident(current_schema())")).scalar()
    op.execute(SEARCH_WINDOW.format(schema=schema))
    op.execute("DROP FUNCTION IF EXISTS sessionstore_search_keys(text[])")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    schema = bind.execute(sa.text("SELECT quote_ident(current_schema())")).scalar()
    op.execute(SEARCH_KEYS_0009.format(schema=schema))
    op.execute(
        "DROP FUNCTION IF EXISTS sessionstore_search_window(text[], integer, integer, varchar, varchar, varchar)"
    )
    if bind.execute(sa.text(LZ4)).scalar():
        op.execute(
            "ALTER TABLE search_docs ALTER COLUMN body SET COMPRESSION default, "
            "ALTER COLUMN tsv SET COMPRESSION default"
        )
    op.execute("DROP INDEX IF EXISTS ix_search_docs_id")
    op.execute("ALTER TABLE search_docs DROP COLUMN IF EXISTS id")
