"""Two processes opening one new database at once: both end at the schema head, neither fails.

CI caught it: the second of two `watch` processes read "no schema" just before the first one's
migration committed, then saw the first one's `sessions` table and called it another program's.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from sessionstore import SessionStore
from sessionstore.storage.engine.db import enable_wal
from sessionstore.storage.engine.migrate import SCHEMA_HEAD, current_revision, ensure_current


def test_a_schema_committed_after_the_first_read_is_ours(empty_store_url: str) -> None:
    """The exact interleaving: read 'empty', then another process migrates, then we upgrade."""
    SessionStore.open(empty_store_url).close()
    engine = create_engine(empty_store_url)
    try:
        assert ensure_current(engine, None, known=True) is False
        with engine.connect() as conn:
            assert current_revision(conn) == SCHEMA_HEAD
    finally:
        engine.dispose()


def _open_and_append(url: str, start: "multiprocessing.synchronize.Event", out: "multiprocessing.Queue[str]") -> None:
    start.wait()
    try:
        with SessionStore.open(url) as store:
            session = store.create_session()
            session.append({"role": "user", "content": "hello"})
        out.put("ok")
    except Exception as exc:  # the report is the assertion's message
        out.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("round_", range(6))
def test_processes_racing_to_open_a_new_database_all_succeed(empty_store_url: str, round_: int, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_open_and_append, args=(empty_store_url, start, out)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == ["ok"] * 4, results
    with SessionStore.open(empty_store_url) as store:
        assert len(store.list()) == 4


class _LockedCursor:
    """SQLite's deadlock-breaking answer: "database is locked" at once, `times` times, then the switch."""

    def __init__(self, times: int) -> None:
        self.times, self.calls = times, 0

    def execute(self, statement: str) -> None:
        assert statement == "PRAGMA journal_mode = WAL"
        self.calls += 1
        if self.calls <= self.times:
            raise sqlite3.OperationalError("database is locked")


def test_switching_to_wal_tries_again_while_another_opener_holds_the_lock() -> None:
    """CI: a second `watch` failed to open a new database with "database is locked" (no busy wait)."""
    cur = _LockedCursor(times=3)
    enable_wal(cur, busy_timeout_ms=5_000)
    assert cur.calls == 4


def test_switching_to_wal_gives_up_at_the_busy_timeout() -> None:
    cur = _LockedCursor(times=10**9)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enable_wal(cur, busy_timeout_ms=50)
    assert cur.calls > 1
