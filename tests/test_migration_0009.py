"""Revision 0009 (owners, hosts, shares) on a filled database: existing rows get an owner, and a
downgrade gives back every row (a batch copy of `sessions` on SQLite would have emptied its children)."""

from __future__ import annotations

from sessionstore import SessionStore
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import downgrade, upgrade
from tests.test_migration_safety import A, _build, _snapshot


def test_0009_owns_existing_rows_and_downgrades_keeping_every_row(empty_store_url: str) -> None:
    before = _build(empty_store_url, "0004")
    engine = make_engine(empty_store_url)
    try:
        upgrade(engine, "0009")
        with SessionStore.open(empty_store_url) as store:
            owner = "local" if store.db.is_sqlite else str(store.db.one("SELECT current_user")[0])
            session = store.get(A)
            assert (session.owner, session.host) == (owner, None)
            assert {r["owner"] for r in store.list()} == {owner}
            assert store.db.all("SELECT DISTINCT owner FROM messages") == [(owner,)]
        downgrade(engine, "0004")
        assert _snapshot(engine) == before
    finally:
        engine.dispose()
