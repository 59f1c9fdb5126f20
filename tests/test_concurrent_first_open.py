"""Two processes opening one new database at once: both end at the schema head, neither fails.

CI caught it: the second of two `watch` processes read "no schema" just before the first one's
migration committed, then saw the first one's `sessions` table and called it another program's.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from sessionstore import SessionStore
from sessionstore.storage.migrate import SCHEMA_HEAD, current_revision, ensure_current


def test_a_schema_committed_after_the_first_read_is_ours(store_url: str) -> None:
    """The exact interleaving: read 'empty', then another process migrates, then we upgrade."""
    SessionStore.open(store_url).close()
    engine = create_engine(store_url)
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


@pytest.mark.parametrize("round_", range(3))
def test_processes_racing_to_open_a_new_database_all_succeed(store_url: str, round_: int,
                                                             tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_open_and_append, args=(store_url, start, out)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == ["ok"] * 4, results
    with SessionStore.open(store_url) as store:
        assert len(store.list()) == 4
