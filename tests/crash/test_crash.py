"""Crash harness: SIGKILL a writer at random moments; after each kill nothing committed is lost
and the view is the old one or the new one, never a mix.

The writer loops over a random mix of append, append_many, every compaction kind,
prepare with spills, and imports; 100 kills per engine (SESSIONSTORE_CRASH_TRIALS).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.storage import doctor
from sessionstore.storage.history import boundaries, view_at
from sessionstore.storage.view import to_api_messages
from tests.support.validity import check_messages

ROOT = Path(__file__).resolve().parent.parent.parent
TRIALS = int(os.environ.get("SESSIONSTORE_CRASH_TRIALS", "100"))


def _wait_for_dead_backends(url: str, timeout: float = 3.0) -> None:
    """On PostgreSQL, wait until the killed child's server backend has finished its last command.

    SIGKILL ends the client at once, but a COMMIT the server already received still
    lands a moment later; checking before it does would compare two reads that
    straddle that commit. SQLite has no server side: its commits are done when the
    process dies.
    """
    if not url.startswith("postgresql"):
        return
    deadline = time.monotonic() + timeout
    with SessionStore.open(url) as st:
        while time.monotonic() < deadline:
            busy = st.db.one(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction', "
                "'idle in transaction (aborted)')"
            )[0]
            if busy == 0:
                return
            time.sleep(0.05)


def _check_after_kill(url: str, sid: str, log: Path, seen: int) -> dict[str, int]:
    """Everything the child logged as committed is there, and the view is whole.

    Work per kill stays small as the store grows: uuids are read without content, and
    spills, imports and doctor's session checks look at what this trial added (doctor's
    database-wide checks run every time).
    """
    lines = log.read_text().splitlines() if log.exists() else []
    logged = [ln.split(" ", 1) for ln in lines if ln.strip()]
    fresh = logged[seen:]
    with SessionStore.open(url) as st:
        s = st.get(sid)
        rows = st.db.all("SELECT uuid, subtype FROM messages WHERE session_id = :id", {"id": sid})
        uuids = {u for u, _ in rows}
        missing = [v for k, v in logged if k in ("msg", "boundary") and v not in uuids]
        assert not missing, f"committed but lost: {missing[:5]}"
        imported = [v.split()[0] for k, v in fresh if k == "import"]
        problems = doctor.check_database(st)
        for session_id in [sid, *imported]:
            problems += doctor.check(st, session_id).problems
        assert problems == [], f"doctor after a kill: {problems[:3]}"
        _check_spills(s, [v for k, v in fresh if k == "prepared"])
        _check_imports(st, [v for k, v in fresh if k == "import"])
        found = boundaries(s)
        assert sum(1 for _, sub in rows if sub == "compact_boundary") == len(found), \
            "a boundary without its compactions row (or the reverse)"
        state = s.refresh_state()
        entries = s.active_entries()
        assert sum(e.tokens for e in entries) == state.view_tokens, "token total out of step with the view"
        assert [e.seq for e in view_at(s, state.view_version)] == [e.seq for e in entries]
        view = to_api_messages(entries)
        problems = [p for p in check_messages(view) if "not answered" not in p or not view or
                    not p.startswith(f"messages[{len(view) - 2}]")]
        assert problems == [], problems
        if found:
            last = found[-1]
            assert entries[0].uuid == last.boundary_uuid, "the latest compaction's view is in force"
        return {"messages": len(uuids), "boundaries": len(found), "logged": len(logged)}


def _check_spills(s, prepared_ids: list[str]) -> None:
    """Every spill decision is whole: its replacement, its blob, and the original bytes behind it."""
    from sessionstore.storage.spill import spill_original

    rows = s.db.all("SELECT tool_use_id, kind FROM replacements WHERE session_id = :id", {"id": s.id})
    decided = {r[0]: r[1] for r in rows}
    for tool_use_id in prepared_ids:
        if decided.get(tool_use_id) == "spilled":
            assert spill_original(s, tool_use_id).startswith(tool_use_id.encode())


def _check_imports(store, logged: list[str]) -> None:
    """Each import the child saw commit is complete; no session is half imported."""
    for line in logged:
        session_id, count = line.split()
        assert len(list(store.get(session_id).transcript())) == int(count)
    rows = store.db.all("SELECT s.id, COUNT(m.seq) FROM sessions s LEFT JOIN messages m "
                        "ON m.session_id = s.id GROUP BY s.id")
    for session_id, count in rows:
        # last_seq as the session reads it (the session row, or its last appended message's figures)
        last_seq = store.get(session_id).refresh_state().last_seq
        assert last_seq == int(count), f"session {session_id} is half written"
    orphans = store.db.one("SELECT COUNT(*) FROM sessions s WHERE s.id NOT IN (SELECT session_id FROM imports) "
                           "AND s.title IS NOT NULL AND s.title <> 'crash'")[0]
    assert orphans == 0, "an import left a session without its imports row"


def test_sigkill_during_appends_and_compactions(store_url: str, tmp_path: Path) -> None:
    rng = random.Random(1234)
    with SessionStore.open(store_url) as st:
        sid = st.create_session(title="crash").id
    log = tmp_path / "committed.log"
    stats = {"logged": 0}
    for trial in range(TRIALS):
        child = subprocess.Popen([sys.executable, "-m", "tests.crash.worker", store_url, sid, str(log), str(trial)],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env={**os.environ, "CRASH_TMP": str(tmp_path)})
        time.sleep(rng.uniform(0.6, 1.6))
        if child.poll() is not None:
            pytest.fail(f"worker exited early: {child.stderr.read().decode()}")
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stderr.close()
        _wait_for_dead_backends(store_url)
        stats = _check_after_kill(store_url, sid, log, stats["logged"])
    assert stats["boundaries"] >= 5, f"the kills should land across compactions too: {stats}"
    with SessionStore.open(store_url) as st:
        assert doctor.check(st).problems == [], "the whole store is clean at the end"


pytestmark = pytest.mark.slow
