"""A new, empty store on an engine the tests run on: a SQLite file, or a PostgreSQL schema dropped afterwards.

Fixtures that fill a store of their own (a corpus, a hostile store, a round trip's target) pick its URL
the same way on both engines, so they skip the same way when PostgreSQL is not configured.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import PG_URL, _pg_schema_url


def engine_of(url: str) -> str:
    """The engine a store URL names, as the ENGINES parameters spell it."""
    return "sqlite" if url.startswith("sqlite") else "postgresql"


@contextmanager
def new_store_url(engine: str, sqlite_file: Path, pg_url: str | None = PG_URL) -> Iterator[str]:
    """The URL of a new, empty store: `sqlite_file` on SQLite, a fresh schema of `pg_url` (dropped on exit) on PostgreSQL."""
    if engine == "sqlite":
        yield f"sqlite:///{sqlite_file}"
        return
    if not pg_url:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    yield from _pg_schema_url(pg_url)
