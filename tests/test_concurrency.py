"""Several processes appending to one session at once: nothing lost, no lock error surfaces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sessionstore import SessionStore

ROOT = Path(__file__).resolve().parent.parent


def test_two_processes_append_500_each(store_url: str) -> None:
    with SessionStore.open(store_url) as st:
        sid = st.create_session(title="race").id
    procs = [
        subprocess.Popen([sys.executable, "-m", "tests.support.appender", store_url, sid, tag, "500"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for tag in ("A", "B")
    ]
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
        assert [m.seq for m in s.transcript()] == list(range(1, 1001)), "seq stays dense"
        assert len(s.active_entries()) == 1000
        assert s.view_tokens == sum(m.tokens for m in s.transcript())
