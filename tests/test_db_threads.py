"""Threads sharing one store's connection take turns: one thread's statements never run inside another's write.

An Agent SDK adapter imports on a background thread while `asyncio.to_thread` runs its appends and
reads on others, all on one connection. A write in progress belongs to the thread that opened it: a
second thread's write waits and commits on its own, and its reads never see (nor get rolled back
with) another thread's uncommitted rows.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sessionstore import SessionStore

#: How long the first write holds its transaction open for the second thread to get in, if it could.
HOLD = 1.0


def _write_then_fail(store: SessionStore, inside: threading.Event, other_done: threading.Event) -> None:
    """A write that creates a session, holds its transaction open while the other thread runs, then rolls back."""

    def body(db: Any) -> None:
        store.create_session(title="rolled back", session_id="rolled-back")
        inside.set()
        other_done.wait(HOLD)  # with the bug, the other thread finishes inside this transaction
        raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        store.db.run_write(body)


def _run_beside(store: SessionStore, work: Any) -> Any:
    """Run `work()` on a second thread while this thread's write is open; its result once both are done."""
    inside, done, result = threading.Event(), threading.Event(), []

    def other() -> None:
        inside.wait(10)
        try:
            result.append(work())
        finally:
            done.set()

    thread = threading.Thread(target=other)
    thread.start()
    _write_then_fail(store, inside, done)
    thread.join(30)
    assert not thread.is_alive()
    return result[0]


def test_a_second_threads_write_commits_on_its_own(store: SessionStore) -> None:
    _run_beside(store, lambda: store.create_session(title="kept", session_id="kept"))
    ids = {row["id"] for row in store.list()}
    assert "kept" in ids  # the bug ran it inside the first write, and rolled it back with it
    assert "rolled-back" not in ids


def test_a_second_threads_read_never_sees_an_uncommitted_row(store: SessionStore) -> None:
    seen = _run_beside(store, lambda: store.db.one("SELECT count(*) FROM sessions WHERE id = 'rolled-back'")[0])
    assert seen == 0
