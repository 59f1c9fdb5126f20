"""A SQLite store gives the pages it no longer uses back to the file system without a VACUUM.

Stores are created with auto_vacuum INCREMENTAL; deleting a session and building the search index (whose
segment merges leave the replaced segments free) end with `Database.give_back_free_pages`, which drops the
free pages from the file's end once there are FREE_PAGES_KEPT of them. A store made before that gets the
mode at its next `db vacuum`.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_file
from sessionstore.storage.derived import search
from sessionstore.storage.engine.db import FREE_PAGES_KEPT
from sessionstore.storage.upkeep.vacuum import vacuum


def _pragma(path: Path, name: str) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def _big_session(store: SessionStore) -> str:
    session = store.create_session(title="big")
    session.append_many(
        {"role": "user", "content": f"{i}: {random.Random(i).getrandbits(24_000):x}"} for i in range(400)
    )
    return session.id


def test_a_new_store_gives_a_deleted_sessions_pages_back(sqlite_url: str) -> None:
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    with SessionStore.open(sqlite_url) as store:
        assert _pragma(path, "auto_vacuum") == 2  # INCREMENTAL
        keep = store.create_session(title="kept")
        keep.append({"role": "user", "content": "still here"})
        sid = _big_session(store)
        grown = _pragma(path, "page_count")
        store.delete(sid)
        assert _pragma(path, "freelist_count") < FREE_PAGES_KEPT
        assert _pragma(path, "page_count") < grown / 4, grown
        assert [m.content for m in store.get(keep.id).transcript()] == ["still here"]


def test_building_the_search_index_leaves_no_merged_segments_behind(sqlite_url: str, transcripts_dir: Path) -> None:
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    with SessionStore.open(sqlite_url) as store:
        for source in sorted((transcripts_dir / "claude-code").rglob("*.jsonl")):
            import_file(store, source)
        assert search.catch_up(store.index_db, batch_chars=20_000) > 0
        assert _pragma(path, "freelist_count") < FREE_PAGES_KEPT
        assert store.search("session_live", limit=5)


def test_db_vacuum_gives_an_older_store_the_mode(sqlite_url: str) -> None:
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    with SessionStore.open(sqlite_url) as store:
        store.create_session(title="old").append({"role": "user", "content": "hi"})
    with sqlite3.connect(path, isolation_level=None) as conn:  # as stores made before the mode are
        conn.execute("PRAGMA auto_vacuum = NONE")
        conn.execute("VACUUM")
    assert _pragma(path, "auto_vacuum") == 0
    with SessionStore.open(sqlite_url) as store:
        vacuum(store)
    assert _pragma(path, "auto_vacuum") == 2
