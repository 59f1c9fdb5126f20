"""Crash harness: SIGKILL a writer at random moments; after each kill nothing committed is lost
and the view is the old one or the new one, never a mix.

The writer loops over a random mix of append, append_many, every compaction kind,
prepare with spills, and imports; 100 kills per engine (SESSIONSTORE_CRASH_TRIALS),
each at a random time after the writer has opened the store. Before each operation
the writer logs the view it starts from (version, last seq, digest) and the batch it
will write; after each kill the view must be that one (plus the whole batch or none
of it) or a newer version whose history holds it exactly. Which operation each kill
landed in, and whether it had committed, is printed at the end. The deterministic
proof for every commit point is tests/test_fault_points.py; this harness adds
timing nobody chose.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.storage.upkeep import doctor
from sessionstore.storage.read.history import boundaries, view_at
from sessionstore.storage.records.view import to_api_messages
from tests.crash.worker import content_digest, view_digest
from tests.support.faultcases import child_url
from tests.support.validity import check_messages

ROOT = Path(__file__).resolve().parent.parent.parent
TRIALS = int(os.environ.get("SESSIONSTORE_CRASH_TRIALS", "100"))


def _wait_for_dead_backends(url: str, name: str, timeout: float = 5.0) -> None:
    """On PostgreSQL, wait until the killed child's server backend has finished its last command.

    SIGKILL ends the client at once, but a COMMIT the server already received still
    lands a moment later; checking before it does would compare two reads that
    straddle that commit. The child connects with its own application_name, so only
    its backend is waited for (other test runs may share the server). SQLite has no
    server side: its commits are done when the process dies.
    """
    if not url.startswith("postgresql"):
        return
    deadline = time.monotonic() + timeout
    with SessionStore.open(url) as st:
        while time.monotonic() < deadline:
            alive = st.db.one("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = :name", {"name": name})[0]
            if alive == 0:
                return
            time.sleep(0.02)
    raise AssertionError(f"the killed worker's backend {name} is still there after {timeout}s")


def _line(zygote: subprocess.Popen, errors: Path, timeout: float = 120.0) -> str:
    """The next line the worker process prints, or a failure showing its stderr."""
    ready, _, _ = select.select([zygote.stdout], [], [], timeout)
    line = zygote.stdout.readline().decode() if ready else ""
    if not line:
        zygote.kill()
        pytest.fail(f"the crash worker stopped: {errors.read_text()[-3000:]}")
    return line.strip()


def _kill_one_writer(zygote: subprocess.Popen, errors: Path, url: str, trial: int, delay: float) -> None:
    """Have the worker fork writer `trial`, let it write for `delay` seconds once ready, SIGKILL it."""
    zygote.stdin.write(f"{trial} {url}\n".encode())
    zygote.stdin.flush()
    word, pid = _line(zygote, errors).split()
    assert word == "ready", word
    time.sleep(delay)
    early, _, _ = select.select([zygote.stdout], [], [], 0)
    if not early:
        os.kill(int(pid), signal.SIGKILL)
    word, status = _line(zygote, errors).split()
    if not (os.WIFSIGNALED(int(status)) and os.WTERMSIG(int(status)) == signal.SIGKILL):
        pytest.fail(f"writer {trial} exited early: {errors.read_text()[-3000:]}")


def _check_after_kill(url: str, sid: str, log: Path, seen: int) -> dict[str, Any]:
    """Everything the child logged as committed is there, and the view is the old one or the new one.

    The old view is the one the child recorded just before the operation in flight
    (its digest, version and last seq); the new one is a later version whose history
    still holds the old view exactly. Work per kill stays small as the store grows:
    only this trial's messages are read with their content, and spills, imports and
    doctor's session checks look at what this trial added (doctor's database-wide
    checks run every time).
    """
    lines = log.read_text().splitlines() if log.exists() else []
    logged = [ln.split(" ") for ln in lines if ln.strip()]
    fresh = logged[seen:]
    since_start = logged[max((i for i, p in enumerate(logged) if p[0] == "start"), default=0) :]
    befores = [parts for parts in since_start if parts[0] == "before"]
    with SessionStore.open(url) as st:
        s = st.get(sid)
        rows = st.db.all("SELECT uuid, subtype FROM messages WHERE session_id = :id", {"id": sid})
        uuids = {u for u, _ in rows}
        missing = [p[1] for p in logged if p[0] in ("msg", "boundary") and p[1] not in uuids]
        assert not missing, f"committed but lost: {missing[:5]}"
        _check_fresh_messages(st, sid, [p for p in fresh if p[0] == "msg"])
        imported = [p[1] for p in fresh if p[0] == "import"]
        problems = doctor.check_database(st)
        for session_id in [sid, *imported]:
            problems += doctor.check(st, session_id).problems
        assert problems == [], f"doctor after a kill: {problems[:3]}"
        spilled = _check_spills(s, [(p[1], int(p[2])) for p in fresh if p[0] == "prepared"])
        _check_imports(st, [p[1:] for p in fresh if p[0] == "import"])
        found = boundaries(s)
        assert sum(1 for _, sub in rows if sub == "compact_boundary") == len(found), (
            "a boundary without its compactions row (or the reverse)"
        )
        state = s.refresh_state()
        entries = s.active_entries()
        assert sum(e.tokens for e in entries) == state.view_tokens, "token total out of step with the view"
        phase = _check_old_or_new(s, state, entries, befores[-1], uuids) if befores else "startup: no operation"
        view = to_api_messages(entries)
        if rows:  # a kill before the first append committed leaves a session with no message, and so no view
            assert check_messages(view) == [], check_messages(view)
        else:
            assert entries == [], "a view of a session with no message"
        if found:
            last = found[-1]
            assert entries[0].uuid == last.boundary_uuid, "the latest compaction's view is in force"
        return {
            "messages": len(uuids),
            "boundaries": len(found),
            "logged": len(logged),
            "phase": phase,
            "spills": spilled,
        }


def _check_old_or_new(s, state, entries, before: list[str], uuids: set[str]) -> str:
    """The view is the recorded old one (plus the whole batch, or none of it) or a newer version
    whose history holds the old one exactly; returns where the kill landed."""
    _, op, version, last_seq, digest, batch_text = before
    version, last_seq = int(version), int(last_seq)
    batch = [] if batch_text == "-" else batch_text.split(",")
    present = [u for u in batch if u in uuids]
    assert present in ([], batch), f"{op}: batch half written: {len(present)} of {len(batch)}"
    if state.view_version == version:
        old = [e for e in entries if e.seq <= last_seq]
        assert view_digest(old) == digest, f"{op}: the view before the operation changed without a rewrite"
        added = [e.uuid for e in entries if e.seq > last_seq]
        assert added in ([], batch), f"{op}: the view gained {added}, not the batch {batch}"
        return f"{op}: {'committed' if added else 'not committed' if batch else 'view unchanged'}"
    assert state.view_version > version, f"{op}: the view version went back"
    assert view_digest(view_at(s, version)) == digest, f"{op}: the old view is not kept exactly in the history"
    return f"{op}: committed"


def _check_fresh_messages(st, sid: str, logged: list[list[str]]) -> None:
    """This trial's committed messages: identical content, and in the transcript in the order logged."""
    if not logged:
        return
    wanted = {p[1]: p[2] for p in logged}
    rows = st.db.all(
        "SELECT uuid, seq, content_json FROM messages WHERE session_id = :id AND uuid IN ("
        + ",".join(f":u{i}" for i in range(len(wanted)))
        + ")",
        {"id": sid, **{f"u{i}": u for i, u in enumerate(wanted)}},
    )
    by_uuid = {u: (int(seq), content_digest(json.loads(cj))) for u, seq, cj in rows}
    changed = [u for u, sha in wanted.items() if by_uuid[u][1] != sha]
    assert not changed, f"stored content differs from what was committed: {changed[:3]}"
    seqs = [by_uuid[p[1]][0] for p in logged]
    assert seqs == sorted(seqs), "committed messages are out of their order in the transcript"


def _check_spills(s, prepared: list[tuple[str, int]]) -> int:
    """Every prepare the child saw commit spilled its big result, and the blob holds its original bytes.

    A later microcompact may clear a spilled result (kind "cleared"); the decision keeps its blob
    reference, so the spill must still be there and still be the original.
    """
    from sessionstore.storage.write.spill import spill_original

    rows = s.db.all("SELECT tool_use_id, kind, blob_sha256 FROM replacements WHERE session_id = :id", {"id": s.id})
    decided = {r[0]: (r[1], r[2]) for r in rows}
    for tool_use_id, seq in prepared:
        kind, blob = decided.get(tool_use_id, (None, None))
        assert kind in ("spilled", "cleared") and blob, f"the big result {tool_use_id} was not spilled: {kind}"
        (block,) = _blocks_at(s, seq)
        assert block["tool_use_id"] == tool_use_id
        assert spill_original(s, tool_use_id) == block["content"].encode(), "the spilled blob is not the original"
    return len(prepared)


def _blocks_at(s, seq: int) -> list[dict]:
    """The content blocks of transcript message `seq`."""
    row = s.db.one("SELECT content_json FROM messages WHERE session_id = :id AND seq = :seq", {"id": s.id, "seq": seq})
    return json.loads(row[0])


def _check_imports(store, logged: list[list[str]]) -> None:
    """Each import the child saw commit is complete; no session is half imported."""
    for session_id, count in logged:
        assert len(list(store.get(session_id).transcript())) == int(count)
    rows = store.db.all(
        "SELECT s.id, COUNT(m.seq) FROM sessions s LEFT JOIN messages m ON m.session_id = s.id GROUP BY s.id"
    )
    for session_id, count in rows:
        # last_seq as the session reads it (the session row, or its last appended message's figures)
        last_seq = store.get(session_id).refresh_state().last_seq
        assert last_seq == int(count), f"session {session_id} is half written"
    orphans = store.db.one(
        "SELECT COUNT(*) FROM sessions s WHERE s.id NOT IN (SELECT session_id FROM imports) "
        "AND s.title IS NOT NULL AND s.title <> 'crash'"
    )[0]
    assert orphans == 0, "an import left a session without its imports row"


def test_sigkill_during_appends_and_compactions(store_url: str, tmp_path: Path) -> None:
    rng = random.Random(1234)
    with SessionStore.open(store_url) as st:
        sid = st.create_session(title="crash").id
    log = tmp_path / "committed.log"
    stats: dict[str, Any] = {"logged": 0}
    phases: Counter[str] = Counter()
    spills = 0
    errors = tmp_path / "worker.stderr"
    with open(errors, "wb") as err:
        zygote = subprocess.Popen(
            [sys.executable, "-m", "tests.crash.worker", sid, str(log)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**os.environ, "CRASH_TMP": str(tmp_path)},
        )
    try:
        for trial in range(TRIALS):
            name = f"crash{os.getpid()}t{trial}"
            _kill_one_writer(zygote, errors, child_url(store_url, name), trial, rng.uniform(0.05, 0.6))
            _wait_for_dead_backends(store_url, name)
            stats = _check_after_kill(store_url, sid, log, stats["logged"])
            phases[stats["phase"]] += 1
            spills += stats["spills"]
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=60)
        zygote.stdout.close()
    print(f"\ncrash kills by the operation in flight ({store_url.split(':')[0]}): {dict(sorted(phases.items()))}")
    ops = {phase.split(":")[0] for phase in phases}
    assert len(ops) >= 4 and ops & {"full", "from", "up_to", "memory", "prepare"}, (
        f"the kills should land in several kinds of operation, compactions among them: {dict(phases)}"
    )
    assert spills > 0, "no prepare committed a spill, so no spill was checked"
    with SessionStore.open(store_url) as st:
        assert doctor.check(st).problems == [], "the whole store is clean at the end"


pytestmark = pytest.mark.slow
