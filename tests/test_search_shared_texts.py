"""Each distinct search text stored and indexed once (SQLite, revision 0017).

A resumed or forked session repeats its predecessor's messages; the index keeps one packed copy of
each text (`search_texts`, keyed by hash) and one FTS5 entry for it, and every message holding the
text names it. Checked here: repeated texts are stored once and found in every session holding them;
deleting a session frees exactly the texts no other message holds (FTS5's integrity check agrees);
0017 converts a filled 0016 store (real transcripts, a resumed copy included) with the same hits,
its downgrade gives each row its copy back, and a kill anywhere in the upgrade loses nothing.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path


from sessionstore import SessionStore
from sessionstore.interchange.importing import import_file
from sessionstore.storage.upkeep import doctor
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import downgrade, head_revision
from sessionstore.storage.derived.search import index_problems, rebuild, reindex_session
from sessionstore.storage.codecs.searchpack import text_hash

TOOL_OUTPUT = "PASSED tests/test_parser.py::test_quotes\n" * 20 + "142 passed in 3.21s"


def _texts(i: int) -> str:
    return f"step {i}: the scheduler retried job {i % 7} after TimeoutError in worker-{i % 3}"


def _sessions(store: SessionStore, tags: tuple[str, ...], shared: int, own: bool = False) -> list[str]:
    """One session a tag, each holding the same `shared` texts, then (`own`) one text of its own."""
    ids = []
    for tag in tags:
        s = store.create_session(title=tag)
        s.append_many([{"role": "user", "content": _texts(i)} for i in range(shared)])
        if own:
            s.append({"role": "assistant", "content": f"the {tag} session's own words about TimeoutError"})
        ids.append(s.id)
    return ids


def _hits(store: SessionStore, query: str, **filters: object) -> list[tuple[str, int, str]]:
    return sorted((h.session, h.seq, h.snippet) for h in store.search(query, limit=10_000, **filters))


def _fts_check(db_path: Path) -> None:
    """FTS5's own check of the index against the texts it reads, through a store connection."""
    with SessionStore.open(f"sqlite:///{db_path}") as store:
        store.db.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)").close()


def _count(store: SessionStore, sql: str) -> int:
    return int(store.db.one(sql)[0])


def test_a_text_repeated_across_sessions_is_stored_and_indexed_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{path}") as store:
        sessions = []
        for tag in ("first", "resumed", "forked"):
            s = store.create_session(title=tag)
            s.append_many([{"role": "user", "content": _texts(i)} for i in range(50)])
            s.append({"role": "assistant", "content": f"only in {tag}: {TOOL_OUTPUT}"})
            s.append({"role": "user", "content": TOOL_OUTPUT})
            s.append({"role": "user", "content": TOOL_OUTPUT})  # the same output twice in one session
            sessions.append(s.id)
        hits = _hits(store, "TimeoutError")
        assert [(sid, seq) for sid, seq, _ in hits] == sorted((sid, q) for sid in sessions for q in range(1, 51))
        assert len(_hits(store, '"142 passed"')) == 3 * 3
        assert [(s, q) for s, q, _ in _hits(store, "only in resumed")] == [(sessions[1], 51)]
        assert _count(store, "SELECT COUNT(*) FROM search_rows") == 3 * 53
        assert _count(store, "SELECT COUNT(*) FROM search_texts") == 50 + 3 + 1
        assert _count(store, "SELECT COUNT(*) FROM search_fts_docsize") == 50 + 3 + 1, "one FTS5 entry a text"
        key = text_hash(TOOL_OUTPUT)
        named = (
            f"SELECT COUNT(*) FROM search_rows r JOIN search_texts t ON t.id = r.text_id WHERE t.hash = x'{key.hex()}'"
        )
        assert _count(store, named) == 6
        assert index_problems(store.index_db) == []
    _fts_check(path)


def test_deleting_a_session_frees_only_the_texts_no_other_message_holds(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{path}") as store:
        ids = _sessions(store, ("one", "two"), 30, own=True)
        assert len(_hits(store, "TimeoutError")) == 62
        store.delete(ids[0])
        assert [(s, q) for s, q, _ in _hits(store, "TimeoutError")] == [(ids[1], q) for q in range(1, 32)]
        assert _count(store, "SELECT COUNT(*) FROM search_texts") == 31, "the shared texts stay for session two"
        assert store.db.all("SELECT rowid FROM search_fts WHERE search_fts MATCH '\"session''s own\"'") == [
            (_count(store, "SELECT text_id FROM search_rows WHERE seq = 31"),)
        ], "the deleted session's own text left the index"
        assert doctor.check(store).problems == []
        store.delete(ids[1])
        assert _count(store, "SELECT COUNT(*) FROM search_texts") == 0
        assert _count(store, "SELECT COUNT(*) FROM search_fts_docsize") == 0
        assert store.db.all("SELECT rowid FROM search_fts WHERE search_fts MATCH 'TimeoutError'") == []
    _fts_check(path)


def test_reindexing_and_rebuilding_keep_shared_texts_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{path}") as store:
        ids = _sessions(store, ("one", "two"), 40)
        before = _hits(store, "TimeoutError")
        assert reindex_session(store, ids[0]) == 40
        assert _hits(store, "TimeoutError") == before
        assert _count(store, "SELECT COUNT(*) FROM search_texts") == 40
        assert rebuild(store) == 80
        assert _hits(store, "TimeoutError") == before
        assert _count(store, "SELECT COUNT(*) FROM search_texts") == 40
        assert doctor.check(store).problems == []
    _fts_check(path)


def test_doctor_finds_a_text_no_message_names_and_repair_frees_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{path}") as store:
        _sessions(store, ("one",), 10)
        assert len(_hits(store, "TimeoutError")) == 10
        # a row pointed elsewhere by hand: its old text is left named by nobody
        store.db.run_write(lambda d: d.execute("UPDATE search_rows SET text_id = 1 WHERE seq = 2").close())
        found = index_problems(store.index_db)
        assert ("search-unnamed-text", "1 stored search texts are named by no message", None) in found
        assert doctor.repair(store).problems == []
        assert index_problems(store.index_db) == []
        assert _count(store, "SELECT COUNT(*) FROM search_texts") == 10
        assert len(_hits(store, "TimeoutError")) == 10
    _fts_check(path)


# ------------------------------------------------------------------ migration


def _real_store(path: Path, transcripts: Path) -> list[str]:
    """A head store holding two real Claude Code transcripts and a resumed copy of the first, indexed."""
    files = sorted((transcripts / "claude-code").rglob("*.jsonl"), key=lambda p: p.stat().st_size)[-2:]
    first = files[0].read_bytes()
    old_id = next(json.loads(line)["sessionId"] for line in first.splitlines() if b'"sessionId"' in line)
    resumed = tmp = path.parent / "resumed.jsonl"
    tmp.write_bytes(first.replace(old_id.encode(), b"0f0f0f0f-0000-4000-8000-000000000001"))
    with SessionStore.open(f"sqlite:///{path}") as store:
        ids = [import_file(store, str(f), source="claude-code").session_id for f in (*files, resumed)]
        store.search("the")
    return ids


QUERIES = ("the", "error", "import", '"def "', "README", "json", "zzqx")


def _all_hits(path: Path) -> dict[str, list[tuple[str, int, str]]]:
    with SessionStore.open(f"sqlite:///{path}") as store:
        return {q: _hits(store, q) for q in QUERIES}


def _downgrade(path: Path, revision: str) -> None:
    engine = make_engine(f"sqlite:///{path}")
    try:
        downgrade(engine, revision)
    finally:
        engine.dispose()


def test_0017_shares_the_texts_of_a_filled_0016_store_and_its_downgrade_gives_them_back(
    tmp_path: Path, transcripts_dir: Path
) -> None:
    path = tmp_path / "s.db"
    ids = _real_store(path, transcripts_dir)
    expected = _all_hits(path)
    assert {sid for sid, _, _ in expected["the"]} == set(ids)
    _downgrade(path, "0016")
    with sqlite3.connect(path) as conn:
        columns = {c[1] for c in conn.execute("PRAGMA table_info(search_rows)")}
        assert "packed" in columns and "text_id" not in columns
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'search_texts'").fetchone() == (0,)
        rows = conn.execute("SELECT COUNT(*), COUNT(packed) FROM search_rows").fetchone()
        assert rows[0] == rows[1] > 0, "every row has its own copy again"
        docs = conn.execute("SELECT COUNT(*) FROM search_fts_docsize").fetchone()[0]
        assert docs == rows[0], "0016 indexes every row"
    with SessionStore.open(f"sqlite:///{path}") as store:  # upgrades to head again
        assert store.db.one("SELECT version_num FROM alembic_version")[0] == head_revision()
        texts = _count(store, "SELECT COUNT(*) FROM search_texts")
        resumed = _count(store, f"SELECT COUNT(*) FROM search_rows WHERE session_id = '{ids[2]}'")
        assert texts <= rows[0] - resumed, "the resumed copy's texts are the first session's"
        assert _count(store, "SELECT COUNT(*) FROM search_fts_docsize") == texts
        assert index_problems(store.index_db) == []
        assert doctor.check(store).problems == []
    assert _all_hits(path) == expected
    _fts_check(path)


def test_every_point_of_the_0017_upgrade_keeps_the_index_whole(tmp_path: Path, transcripts_dir: Path) -> None:
    """A filled, indexed 0016 store upgraded through 0017: killed before COMMIT it is as it was; after, it is
    converted; either way the next open gives the hits the store gave before."""
    from tests.test_fault_points import _assert_killed_at, _fork, _points

    source = tmp_path / "source.db"
    _real_store(source, transcripts_dir)
    expected = _all_hits(source)
    _downgrade(source, "0016")
    for n, point in enumerate(_points("migration")):
        path = tmp_path / f"m{n}.db"
        path.write_bytes(source.read_bytes())
        _assert_killed_at(_fork(f"sqlite:///{path}", point, lambda st: None), point, f"sqlite:///{path}")
        with sqlite3.connect(path) as conn:
            revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
            tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        committed = point.endswith(".after_commit")
        assert revision == (head_revision() if committed else "0016"), point
        assert ("search_texts" in tables) == committed, point
        assert _all_hits(path) == expected, point
        with SessionStore.open(f"sqlite:///{path}") as store:
            assert index_problems(store.index_db) == [], point
        _fts_check(path)
