"""Several processes appending to one session at once: nothing lost, no lock error surfaces."""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from pathlib import Path

from sessionstore import SessionStore

ROOT = Path(__file__).resolve().parent.parent


def _switches(tags: list[str]) -> int:
    """How often the writer changes between consecutive messages of the transcript."""
    return sum(1 for a, b in pairwise(tags) if a != b)


def test_two_processes_append_500_each_interleaved(store_url: str) -> None:
    """Both writers start at a barrier and meet again every 50 appends, so they run side by side to the end.

    (500 appends take a few tens of milliseconds: without the checkpoints, a loaded machine
    sometimes ran one writer to its end before scheduling the other.) Their appends interleave
    in the transcript, none is lost, none is duplicated, and each writer's order is kept.
    """
    with SessionStore.open(store_url) as st:
        sid = st.create_session(title="race").id
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.appender", store_url, sid, tag, "500", "50", "2"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for tag in ("A", "B")
    ]
    for p in procs:
        assert p.stdout.readline().strip() == b"ready", p.stderr.read().decode()
    for p in procs:  # the barrier: both have opened the store before either appends
        p.stdin.write(b"go\n")
        p.stdin.flush()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        assert b"locked" not in err
    with SessionStore.open(store_url) as st:
        s = st.get(sid)
        contents = [m.content for m in s.transcript()]
        assert len(contents) == 1000
        for tag in ("A", "B"):
            mine = [c for c in contents if c.startswith(tag + ":")]
            assert mine == [f"{tag}:{i}" for i in range(500)], "each process's order is kept"
        switches = _switches([c.split(":")[0] for c in contents])
        assert switches >= 10, f"the writers ran one after the other ({switches} switches), not side by side"
        assert [m.seq for m in s.transcript()] == list(range(1, 1001)), "seq stays dense"
        assert len(s.active_entries()) == 1000
        assert s.view_tokens == sum(m.tokens for m in s.transcript())


def test_switch_count_tells_sequential_from_interleaved() -> None:
    assert _switches(["A"] * 500 + ["B"] * 500) == 1
    assert _switches(["A", "B", "A", "B"]) == 3
