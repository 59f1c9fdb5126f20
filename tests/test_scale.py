"""100,000 messages: append_many, resume in a fresh process, stream the transcript in flat memory."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

from sessionstore import SessionStore
from tests.support.messages import conversation

ROOT = Path(__file__).resolve().parent.parent
N = 100_000

CHILD = """
import hashlib, json, sys
from sessionstore import SessionStore
with SessionStore.open(sys.argv[1]) as st:
    s = st.get(sys.argv[2])
    entries = s.active_entries()
    view = s.active_view()
print(json.dumps({
    "entries": hashlib.sha256(json.dumps([e.content for e in entries]).encode()).hexdigest(),
    "count": len(entries),
    "view": hashlib.sha256(json.dumps(view).encode()).hexdigest(),
}))
"""


def _merge_roles(messages: list[dict]) -> list[dict]:
    """What the API expects, computed here independently: consecutive same-role contents joined."""
    out: list[dict] = []
    for m in messages:
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        if out and out[-1]["role"] == m["role"]:
            out[-1]["content"] = out[-1]["content"] + blocks
            out[-1]["merged"] = True
        else:
            out.append({"role": m["role"], "content": blocks, "merged": False, "orig": m["content"]})
    final = []
    for m in out:
        content = m["content"] if m["merged"] else m["orig"]
        if m["role"] == "user" and isinstance(content, list):
            content = [b for b in content if b["type"] == "tool_result"] + [
                b for b in content if b["type"] != "tool_result"
            ]
        final.append({"role": m["role"], "content": content})
    return final


def test_100k_messages_resume_in_a_new_process(store_url: str) -> None:
    messages = list(conversation(N, seed=42))
    with SessionStore.open(store_url) as st:
        s = st.create_session(title="big")
        for start in range(0, N, 20_000):
            s.append_many(messages[start : start + 20_000])
        sid = s.id
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, store_url, sid], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["count"] == N
    contents = [m["content"] for m in messages]
    assert got["entries"] == hashlib.sha256(json.dumps(contents).encode()).hexdigest()
    assert got["view"] == hashlib.sha256(json.dumps(_merge_roles(messages)).encode()).hexdigest()

    with SessionStore.open(store_url) as st:
        s = st.get(sid)
        tracemalloc.start()
        count = 0
        for count, m in enumerate(s.transcript(), 1):
            assert m.content == contents[count - 1]
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert count == N
    total = sum(len(json.dumps(c)) for c in contents)
    assert peak < total / 20, f"transcript() held {peak:,} bytes at once for {total:,} bytes of content"
