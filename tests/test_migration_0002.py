"""Revision 0002 (the search index) upgrades a filled 0001 database, on both engines, and comes back down."""

from __future__ import annotations

from sqlalchemy import inspect

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.upkeep.doctor import check
from sessionstore.storage.engine.migrate import SCHEMA_HEAD, current_revision, downgrade

#: Filler that makes a conversation worth compacting (a summary must shrink the view).
PAD = "The long explanation goes on with more detail than any summary keeps. " * 12


def _fill_at_0001(url: str) -> tuple[str, list[tuple[int, str]]]:
    """A database at 0001 holding a compacted session; (id, transcript).

    The session is written through today's API, then the database is taken down to 0001
    (later revisions add columns the API writes, so it cannot write a 0001 schema directly).
    """
    with SessionStore.open(url) as store:
        s = store.create_session(title="old", cwd="/old/project")
        for i in range(6):
            s.append({"role": "user", "content": f"old question {i} about quinceword"})
            s.append({"role": "assistant", "content": f"old answer {i}" + " " + PAD})
        compact(s)
        s.append({"role": "user", "content": "after the compaction: quinceword again"})
        transcript = [(m.seq, m.role) for m in s.transcript()]
        sid = s.id
    engine = make_engine(url)
    try:
        downgrade(engine, "0001")
        with engine.connect() as conn:
            assert current_revision(conn) == "0001"
    finally:
        engine.dispose()
    return sid, transcript


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_0001_database_upgrades_and_is_searchable(empty_store_url: str) -> None:
    sid, transcript = _fill_at_0001(empty_store_url)
    assert "search_marks" not in _tables(empty_store_url)
    with SessionStore.open(empty_store_url) as store:
        with store.db.engine.connect() as conn:
            assert current_revision(conn) == SCHEMA_HEAD
        assert [(m.seq, m.role) for m in store.get(sid).transcript()] == transcript
        hits = store.search("quinceword", role="user", limit=50)
        assert len(hits) == 7
        assert {h.boundary for h in hits if h.seq <= 12} == {1}
        summary = store.search("quinceword", role="summary")
        assert len(summary) == 1 and summary[0].boundary is None
        assert [h.boundary for h in hits if h.seq == transcript[-1][0]] == [None]
        assert check(store).ok, [str(p) for p in check(store).problems]
        if not store.db.is_sqlite:
            index = store.db.one(  # this store's schema only: other workers' schemas are dropped meanwhile
                "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                "AND indexname = 'ix_search_docs_body_trgm'"
            )
            assert index is not None and "gin_trgm_ops" in index[0]


def test_0002_downgrades_to_0001_keeping_every_message(empty_store_url: str) -> None:
    sid, transcript = _fill_at_0001(empty_store_url)
    with SessionStore.open(empty_store_url) as store:
        assert store.search("quinceword")
        engine = store.db.engine
        downgrade(engine, "0001")
        with engine.connect() as conn:
            assert current_revision(conn) == "0001"
    assert not {"search_marks", "search_rows", "search_fts", "search_docs"} & _tables(empty_store_url)
    with SessionStore.open(empty_store_url) as store:
        assert [(m.seq, m.role) for m in store.get(sid).transcript()] == transcript
        assert len(store.search("quinceword", role="user", limit=50)) == 7
