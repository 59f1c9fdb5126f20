"""The SQLite search index keeps no copy of the text of its own (revision 0014).

`search_fts` is an FTS5 external-content table over the view `search_text`, which unpacks
the packed texts (zstd, with a dictionary trained on the search texts; in `search_texts`, one
a distinct text, since 0017: tests/test_search_shared_texts.py). Checked here: no
FTS5 content table exists and the view is what FTS5 reads; a deleted session leaves no term
in the index (FTS5's integrity check agrees); 0014 converts a filled, indexed 0013 store with
the same search results, and its downgrade gives the old table back; a kill at each point of
the indexing write leaves either no index of the session or all of it, never a broken one.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sessionstore import SessionStore
from sessionstore.storage.upkeep import doctor
from sessionstore.storage.core import faults
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import downgrade, head_revision, upgrade
from sessionstore.storage.derived.search import index_problems, indexed_body, rebuild, search_role
from sessionstore.storage.codecs.searchpack import COLUMN, TABLE
from tests.support.faultcases import case_for

#: Long enough to be packed, varied enough that a dictionary is trained on 300 of them.
TOPICS = ("parser", "socket", "migration", "renderer", "scheduler", "tokenizer")


def _text(i: int, tag: str) -> str:
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"message {i} of {tag}: the {topic} fails on line {i * 7} of src/{topic}.py with "
        f"TypeError: cannot read {topic}_{i % 11}; retried {i % 5} times, exit code {i % 3}"
    )


def _session(store: SessionStore, tag: str, n: int) -> str:
    s = store.create_session(title=tag, cwd=f"/work/{tag}")
    s.append_many([{"role": "user" if i % 2 == 0 else "assistant", "content": _text(i, tag)} for i in range(n)])
    return s.id


def _hits(store: SessionStore, query: str, **filters: Any) -> list[tuple[str, int, str]]:
    return [(h.session, h.seq, h.snippet) for h in store.search(query, limit=1000, **filters)]


def _fts_check(store: SessionStore) -> None:
    """FTS5's own check of the index against the texts it reads (raises on a mismatch)."""
    store.db.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)").close()


# ------------------------------------------------------------------ no copy


def test_the_fts_table_keeps_no_text_and_reads_the_packed_copy(sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as store:
        sid = _session(store, "alpha", 300)
        assert len(_hits(store, "TypeError", session=sid)) == 300
        tables = {n for (n,) in store.db.all("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "search_fts_content" not in tables and "search_fts_data" in tables
        fts_sql = store.db.one("SELECT sql FROM sqlite_master WHERE name = 'search_fts'")[0]
        assert "content='search_text'" in fts_sql and "content_rowid='id'" in fts_sql
        assert store.db.one("SELECT type FROM sqlite_master WHERE name = 'search_text'")[0] == "view"
        types = dict(store.db.all("SELECT typeof(packed), COUNT(*) FROM search_texts GROUP BY 1"))
        assert types == {"blob": 300}, types
        dictionaries = store.db.one(f"SELECT COUNT(*) FROM {TABLE} WHERE column_name = :c", {"c": COLUMN})
        assert dictionaries[0] == 1, "the first catch-up batch trains the search dictionary"
        stored = sum(len(v) for (v,) in store.db.all("SELECT packed FROM search_texts"))
        texts = store.db.all(
            "SELECT r.seq, t.body, f.body FROM search_rows r JOIN search_text t ON t.id = r.text_id "
            "JOIN search_fts f ON f.rowid = r.text_id ORDER BY r.seq"
        )
        assert texts == [(i + 1, _text(i, "alpha"), _text(i, "alpha")) for i in range(300)]
        assert stored < sum(len(b.encode()) for _, b, _ in texts) / 2
        hit = _hits(store, '"line 84 of src/parser.py"')
        assert [(s, q) for s, q, _ in hit] == [(sid, 13)] and "«line 84 of src/parser.py»" in hit[0][2]
        assert _hits(store, "zq") == []
        # short terms are checked on the packed text (alone: a scan of it)
        with_84 = {i + 1 for i in range(300) if "84" in _text(i, "alpha")}
        assert {q for _, q, _ in _hits(store, "TypeError 84")} == with_84
        assert {q for _, q, _ in _hits(store, "84")} == with_84 and len(with_84) > 5
        _fts_check(store)
        assert index_problems(store.index_db) == []


# ------------------------------------------------------------------ deletes


def test_deleting_a_session_leaves_no_index_entry(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        gone = _session(store, "gone", 40)
        kept = _session(store, "kept", 40)
        assert len(_hits(store, "of gone")) == 40
        store.delete(gone)
        assert _hits(store, "of gone") == []
        assert len(_hits(store, "of kept")) == 40
        table = "search_rows" if store.db.is_sqlite else "search_docs"
        assert store.db.one(f"SELECT COUNT(*) FROM {table} WHERE session_id = :s", {"s": gone})[0] == 0
        if store.db.is_sqlite:
            # MATCH reads the index alone: a term of the deleted session left behind would show here.
            assert store.db.all("SELECT rowid FROM search_fts WHERE search_fts MATCH '\"of gone\"'") == []
            _fts_check(store)
        assert index_problems(store.index_db) == []
        assert doctor.check(store).problems == []
        store.delete(kept)
        assert _hits(store, "TypeError") == []


def test_rebuild_and_reindex_leave_the_same_results(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        a = _session(store, "alpha", 120)
        _session(store, "beta", 60)
        before = _hits(store, "TypeError") + _hits(store, '"exit code 1"') + _hits(store, "src/socket.py")
        assert rebuild(store) == 180
        assert _hits(store, "TypeError") + _hits(store, '"exit code 1"') + _hits(store, "src/socket.py") == before
        from sessionstore.storage.derived.search import reindex_session

        assert reindex_session(store, a) == 120
        assert _hits(store, "TypeError") + _hits(store, '"exit code 1"') + _hits(store, "src/socket.py") == before
        if store.db.is_sqlite:
            store.db.run_write(lambda d: d.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')").close())
            _fts_check(store)
        assert doctor.check(store).problems == []


def test_doctor_finds_an_index_row_that_disagrees_with_its_kept_text(sqlite_url: str) -> None:
    """The terms of a row changed behind the kept text (a hand edit of the FTS table) are reported and repaired."""
    with SessionStore.open(sqlite_url) as store:
        sid = _session(store, "alpha", 20)
        assert len(_hits(store, "TypeError")) == 20
        store.db.run_write(
            lambda d: d.execute(
                "UPDATE search_fts SET body = 'tampered' WHERE rowid = "
                "(SELECT text_id FROM search_rows WHERE session_id = :s AND seq = 4)",
                {"s": sid},
            ).close()
        )
        found = index_problems(store.index_db)
        assert {code for code, _, _ in found} == {"search-stale", "search-corrupt"}
        assert ("search-stale", "message seq 4 indexed with other text or role than the transcript holds", sid) in found
        report = doctor.repair(store)
        assert report.problems == [], report.problems
        assert len(_hits(store, "TypeError")) == 20 and _hits(store, "tampered") == []
        _fts_check(store)


# ------------------------------------------------------------------ migration


def _fill_0013(url: str, n: int) -> None:
    """A store at 0013 with two sessions and their search index as 0013 kept it (FTS5 holding the text)."""
    engine = make_engine(url)
    try:
        upgrade(engine, "0013")
        with engine.begin() as conn:
            for k, sid in enumerate(("s-one", "s-two")):
                conn.execute(
                    sa.text(
                        "INSERT INTO sessions (id, title, context_window, created_at, updated_at, metadata_json, "
                        "last_seq) VALUES (:s, :s, 200000, 0, 0, '{}', :n)"
                    ),
                    {"s": sid, "n": n},
                )
                for i in range(1, n + 1):
                    role = "user" if i % 2 else "assistant"
                    content = f'"{_text(i + k, sid)}"'
                    conn.execute(
                        sa.text(
                            "INSERT INTO messages (session_id, seq, uuid, role, type, is_meta, is_compact_summary, "
                            "content_json, tokens, timestamp) VALUES (:s, :q, :u, :r, :r, 0, 0, :c, 10, :t)"
                        ),
                        {
                            "s": sid,
                            "q": i,
                            "u": f"{sid}-{i}",
                            "r": role,
                            "c": content,
                            "t": f"2026-01-01T00:{i % 60:02d}:00",
                        },
                    )
                    rowid = conn.execute(
                        sa.text(
                            "INSERT INTO search_rows (session_id, seq, kind, timestamp) VALUES (:s, :q, :k, :t) RETURNING id"
                        ),
                        {"s": sid, "q": i, "k": search_role(role, False, None), "t": f"2026-01-01T00:{i % 60:02d}:00"},
                    ).scalar()
                    conn.execute(
                        sa.text("INSERT INTO search_fts (rowid, body) VALUES (:r, :b)"),
                        {"r": rowid, "b": indexed_body(content, 16_000_000)},
                    )
                conn.execute(
                    sa.text("INSERT INTO search_marks (session_id, indexed_seq) VALUES (:s, :n)"), {"s": sid, "n": n}
                )
            # an index row whose search row was lost: the conversion drops it
            conn.execute(sa.text("INSERT INTO search_fts (rowid, body) VALUES (999999, 'orphaned TypeError text')"))
    finally:
        engine.dispose()


QUERIES = ("TypeError", '"exit code 2"', "src/parser.py", "scheduler retried", "ok", "s-two")


def _ranked(path: Path) -> list[list[int]]:
    """Each query's FTS5 ranking (rowids by bm25), read straight from the index."""
    with sqlite3.connect(path) as conn:
        return [
            [
                r
                for (r,) in conn.execute(
                    "SELECT rowid FROM search_fts WHERE search_fts MATCH ? ORDER BY rank, rowid", (q,)
                )
            ]
            for q in ('"TypeError"', '"exit code 2"', '"src/parser.py"')
        ]


def _old_bodies(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return list(
            conn.execute("SELECT f.rowid, f.body FROM search_fts f JOIN search_rows r ON r.id = f.rowid ORDER BY 1")
        )


def test_0014_converts_an_indexed_0013_store_with_the_same_results(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    _fill_0013(url, 400)
    ranked, bodies = _ranked(path), _old_bodies(path)
    assert 999999 in ranked[0] and 999999 not in dict(bodies)
    with SessionStore.open(url) as store:  # upgrades to head
        assert store.db.one("SELECT version_num FROM alembic_version")[0] == head_revision()
        migrated = {q: _hits(store, q) for q in QUERIES}
        assert store.db.one(f"SELECT COUNT(*) FROM {TABLE} WHERE column_name = :c", {"c": COLUMN})[0] == 1
        assert dict(store.db.all("SELECT typeof(packed), COUNT(*) FROM search_texts GROUP BY 1")) == {"blob": 800}
        _fts_check(store)
        assert index_problems(store.index_db) == []  # every message indexed with the text it holds
        assert all(migrated[q] for q in QUERIES if q != "ok")
    assert _ranked(path) == [[r for r in rank if r != 999999] for rank in ranked]
    with SessionStore.open(url) as store:
        assert rebuild(store) == 800
        assert {q: _hits(store, q) for q in QUERIES} == migrated
    engine = make_engine(url)
    try:
        downgrade(engine, "0013")
    finally:
        engine.dispose()
    assert _old_bodies(path) == bodies
    with sqlite3.connect(path) as conn:  # a plain connection: no sessionstore function is needed any more
        assert "packed" not in {c[1] for c in conn.execute("PRAGMA table_info(search_rows)")}
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'search_fts_content'").fetchone() == (1,)
        assert conn.execute("SELECT COUNT(*) FROM text_dictionaries WHERE column_name = ?", (COLUMN,)).fetchone() == (
            0,
        )
        conn.execute("DELETE FROM search_rows WHERE session_id = 's-one'")
        conn.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("SELECT COUNT(*) FROM search_fts").fetchone() == (400,)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # a PostgreSQL catalogue check
def test_0014_is_a_no_op_on_postgresql(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        sid = _session(store, "alpha", 10)
        assert len(_hits(store, "TypeError")) == 10
        columns = {
            r[0]
            for r in store.db.all(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'search_docs' "
                "AND table_schema = current_schema()"
            )
        }
        assert "body" in columns and "packed" not in columns
        assert store.db.one("SELECT COUNT(*) FROM search_docs WHERE session_id = :s", {"s": sid})[0] == 10


# ------------------------------------------------------------------ fault points


def _search_points() -> list[str]:
    return [p for p in faults.POINTS if case_for(p) == "search.index"]


def test_the_indexing_write_has_its_points_listed() -> None:
    assert _search_points() == [
        "search.index.begin",
        "search.index.after_dictionary",
        "search.index.after_docs",
        "search.index.before_commit",
        "search.index.after_commit",
    ]


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_every_point_of_the_indexing_write_leaves_no_index_of_the_session_or_all_of_it(
    engine: str, tmp_path: Path
) -> None:
    from tests.support.newstore import new_store_url
    from tests.test_fault_points import _assert_killed_at, _fork

    points = [p for p in _search_points() if engine == "sqlite" or not p.endswith("after_dictionary")]
    for n, point in enumerate(points):
        with new_store_url(engine, tmp_path / f"migrate-{n}.db") as url:
            with SessionStore.open(url) as store:
                sid = _session(store, f"fault{n}", 300)
            _assert_killed_at(_fork(url, point, lambda st: st.search("TypeError")), point, url)
            committed = point.endswith(".after_commit")
            with SessionStore.open(url) as store:
                table = "search_rows" if store.db.is_sqlite else "search_docs"
                rows = store.db.one(f"SELECT COUNT(*) FROM {table} WHERE session_id = :s", {"s": sid})[0]
                mark = store.db.one("SELECT indexed_seq FROM search_marks WHERE session_id = :s", {"s": sid})
                assert (rows, mark[0] if mark else None) == ((300, 300) if committed else (0, None)), point
                if store.db.is_sqlite:
                    trained = store.db.one(f"SELECT COUNT(*) FROM {TABLE} WHERE column_name = :c", {"c": COLUMN})
                    assert trained[0] == int(committed), point
                    _fts_check(store)
                assert doctor.check(store).problems == [], point
                assert doctor.check_database(store) == [], point
                # the next search finishes the job
                assert sorted(q for _, q, _ in _hits(store, "TypeError")) == list(range(1, 301)), point
                if store.db.is_sqlite:
                    _fts_check(store)


def test_every_point_of_the_0014_upgrade_keeps_the_index_whole(tmp_path: Path) -> None:
    """A filled, indexed 0013 store upgraded through 0014: killed before COMMIT it is exactly as it was (FTS5
    holding its text); after COMMIT it is converted; either way the next open gives the same search results."""
    from tests.test_fault_points import _assert_killed_at, _fork, _points
    from tests.test_migration_safety import _backups

    expected: dict[str, list[tuple[str, int, str]]] | None = None
    for n, point in enumerate(_points("migration")):
        path = tmp_path / f"m{n}.db"
        url = f"sqlite:///{path}"
        _fill_0013(url, 300)
        ranked, bodies = _ranked(path), _old_bodies(path)
        _assert_killed_at(_fork(url, point, lambda st: None), point, url)
        committed = point.endswith(".after_commit")
        with sqlite3.connect(path) as conn:
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
            tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert revision == (head_revision() if committed else "0013"), point
        assert ("search_fts_content" in tables) != committed, point
        if not committed:
            assert _old_bodies(path) == bodies and _ranked(path) == ranked, point
        assert len(_backups(url)) == 1, point
        with SessionStore.open(url) as store:  # the next open finishes the job
            found = {q: _hits(store, q) for q in QUERIES}
            _fts_check(store)
            assert index_problems(store.index_db) == [], point
        assert _ranked(path) == [[r for r in rank if r != 999999] for rank in ranked], point
        expected = expected or found
        assert found == expected, point
