"""Search dictionaries (SQLite): the zstd dictionaries of the index's texts become a table of the index.

Since 0014 the search index keeps its texts packed (`search_texts.packed` since 0017) with a
dictionary trained on them, and kept that dictionary in `text_dictionaries` (column name
`search_body`), beside the dictionaries of the transcript's own columns. The index is derived
data that any reader brings up to date: a store opened read-only (`search`, the MCP server)
builds it through a connection that may write the derived tables only (`search_*`, `usage_*`),
so the first search of a store whose index had no dictionary yet failed to store the one it
trained ("not authorized"). From this revision the search texts' dictionaries are rows of
`search_dictionaries`, a table of the index, of the same shape as `text_dictionaries` (id:
zstd's dictionary id, the column name, when it was trained, its bytes); they are trained where
the index is built, still never changed or deleted, and a reader meeting an unknown id looks
in both tables.

The upgrade moves the existing `search_body` rows over as they are (the texts keep naming
the same ids); the downgrade moves them back and drops the table. PostgreSQL: nothing (its
index keeps `search_docs` bodies as TEXT, compressed by TOAST).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from typing import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMN = "search_body"
ROW = "id, column_name, created_at, data"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(
        "CREATE TABLE search_dictionaries (id INTEGER NOT NULL PRIMARY KEY, column_name VARCHAR(32) NOT NULL, "
        "created_at FLOAT NOT NULL, data BLOB NOT NULL)"
    )
    op.execute(
        f"INSERT INTO search_dictionaries ({ROW}) SELECT {ROW} FROM text_dictionaries WHERE column_name = '{COLUMN}'"
    )
    op.execute(f"DELETE FROM text_dictionaries WHERE column_name = '{COLUMN}'")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(f"INSERT INTO text_dictionaries ({ROW}) SELECT {ROW} FROM search_dictionaries")
    op.execute("DROP TABLE search_dictionaries")
