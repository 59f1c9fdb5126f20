"""Every table's rows as one digest per table: compared before and after, it names the tables a command wrote.

A read-only path (a search, the MCP server) may write its derived index and nothing else; the tests
digest every other table around it and compare.
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa


def table_digests(url: str, skip: tuple[str, ...]) -> dict[str, str]:
    """Table name -> a digest of its whole rows in a stable order, for each table whose name starts with none of `skip`."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    digests = {}
    try:
        with engine.connect() as conn:
            for name in sorted(sa.inspect(conn).get_table_names()):
                if name.startswith(skip):
                    continue
                rows = conn.execute(sa.text(f'SELECT * FROM "{name}"')).all()
                digests[name] = hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()
    finally:
        engine.dispose()
    return digests
