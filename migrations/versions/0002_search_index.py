"""Full-text search index: derived rows per message, a per-session high-water mark, and an index of open view rows by seq.

SQLite: `search_rows` (one row per indexed message, integer id) and the FTS5
table `search_fts` (trigram tokenizer: substrings and CJK) keyed by that id;
deleting a `search_rows` row (also by cascade from `messages`) deletes its
FTS row. PostgreSQL: `search_docs` with the text, a `simple` tsvector
(ranking) and a pg_trgm GIN index (substrings). Both: `search_marks`, how far
each session is indexed, and `ix_view_entries_open_seq` so a hit can tell
whether its message is in the active view.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 14:30:00
"""
from __future__ import annotations

import logging
from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("sessionstore.migrate")

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_index("ix_view_entries_open_seq", "view_entries", ["session_id", "seq"], unique=False,
                    sqlite_where=sa.text("valid_to IS NULL"), postgresql_where=sa.text("valid_to IS NULL"))
    op.create_table(
        "search_marks",
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("indexed_seq", BigInt, nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_search_marks_session_id_sessions",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id", name="pk_search_marks"),
    )
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_upgrade()
    else:
        _postgres_upgrade()


def _sqlite_upgrade() -> None:
    op.execute(
        "CREATE TABLE search_rows (id INTEGER PRIMARY KEY, session_id VARCHAR(36) NOT NULL, seq INTEGER NOT NULL, "
        "kind VARCHAR(16) NOT NULL, timestamp VARCHAR(40), "
        "CONSTRAINT uq_search_rows_session_id_seq UNIQUE (session_id, seq), "
        "CONSTRAINT fk_search_rows_messages FOREIGN KEY (session_id, seq) "
        "REFERENCES messages (session_id, seq) ON DELETE CASCADE)"
    )
    op.execute("CREATE VIRTUAL TABLE search_fts USING fts5(body, tokenize='trigram', detail=full)")
    op.execute("CREATE TRIGGER search_rows_ad AFTER DELETE ON search_rows BEGIN "
               "DELETE FROM search_fts WHERE rowid = old.id; END")


def _postgres_upgrade() -> None:
    op.execute(
        "CREATE TABLE search_docs (session_id VARCHAR(36) NOT NULL, seq BIGINT NOT NULL, kind VARCHAR(16) NOT NULL, "
        "timestamp VARCHAR(40), body TEXT NOT NULL, "
        "tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', left(body, 100000))) STORED, "
        "CONSTRAINT pk_search_docs PRIMARY KEY (session_id, seq), "
        "CONSTRAINT fk_search_docs_messages FOREIGN KEY (session_id, seq) "
        "REFERENCES messages (session_id, seq) ON DELETE CASCADE)"
    )
    op.execute("CREATE INDEX ix_search_docs_tsv ON search_docs USING gin (tsv)")
    schema = _trgm_schema()
    if schema is None:
        log.warning("sessionstore: pg_trgm could not be created; substring search scans the index table instead "
                    "(ask an administrator to run CREATE EXTENSION pg_trgm, then `sessionstore doctor --repair`)")
        return
    op.execute(f'CREATE INDEX ix_search_docs_body_trgm ON search_docs USING gin (body "{schema}".gin_trgm_ops)')


def _trgm_schema() -> str | None:
    """The schema holding pg_trgm, creating it in `public` when absent (None if that is not allowed)."""
    bind = op.get_bind()
    found = bind.execute(sa.text(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'")).scalar()
    if found:
        return str(found)
    bind.execute(sa.text("SAVEPOINT sessionstore_trgm"))
    try:
        bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public"))
    except sa.exc.DBAPIError:
        bind.execute(sa.text("ROLLBACK TO SAVEPOINT sessionstore_trgm"))
        return None
    bind.execute(sa.text("RELEASE SAVEPOINT sessionstore_trgm"))
    return "public"


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS search_rows_ad")
        op.execute("DROP TABLE IF EXISTS search_fts")
        op.execute("DROP TABLE IF EXISTS search_rows")
    else:
        op.execute("DROP TABLE IF EXISTS search_docs")
    op.drop_table("search_marks")
    op.drop_index("ix_view_entries_open_seq", table_name="view_entries", sqlite_where=sa.text("valid_to IS NULL"),
                  postgresql_where=sa.text("valid_to IS NULL"))
