"""`show` says a message is in the view exactly when `view` lists it (issue #35), on both engines.

Messages appended since the last rewrite belong to the active view implicitly (no view row of their
own): a session never rewritten, and what is appended after a compaction. `show` must say `in view:
yes` for each of them, as `view` lists them, and `no` for what the compaction summarized.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.outside import private_env, sessionstore


def _turns(start: int, count: int) -> str:
    """JSONL of `count` user/assistant rounds, long enough for a compaction to summarize some."""
    lines = []
    for i in range(start, start + count):
        lines.append(json.dumps({"role": "user", "content": f"question {i}: " + "why does it fail " * 30}))
        lines.append(json.dumps({"role": "assistant", "content": [{"type": "text", "text": f"answer {i} " * 40}]}))
    return "\n".join(lines) + "\n"


def _in_view(url: str, env: dict[str, str], sid: str, seqs: list[int]) -> dict[int, bool]:
    """What `show SEQ --json` says of each seq, checked against the seqs `view --json` lists."""
    view = sessionstore(url, env, "view", sid, "--json")
    assert view.code == 0, view.err
    listed = {e["seq"] for e in json.loads(view.out)["entries"]}
    said = {}
    for seq in seqs:
        shown = sessionstore(url, env, "show", sid, str(seq), "--json")
        assert shown.code == 0 and not shown.traceback, shown.err
        said[seq] = json.loads(shown.out)["in_view"]
    assert said == {seq: seq in listed for seq in seqs}, "show and view disagree"
    return said


def test_show_says_in_view_for_what_view_lists(store_url: str, tmp_path: Path) -> None:
    env = private_env(tmp_path / "home")
    made = sessionstore(store_url, env, "new", "--title", "plain", "--json")
    assert made.code == 0, made.err
    sid = json.loads(made.out)["id"]
    assert sessionstore(store_url, env, "append", sid, "-", stdin=_turns(1, 6)).code == 0

    said = _in_view(store_url, env, sid, [1, 2, 12])
    assert all(said.values()), "a session never rewritten: every message is in its view"
    plain = sessionstore(store_url, env, "show", sid, "1")
    assert "in view  yes" in plain.out

    assert sessionstore(store_url, env, "compact", sid).code == 0
    assert sessionstore(store_url, env, "append", sid, "-", stdin=_turns(7, 2)).code == 0
    said = _in_view(store_url, env, sid, [1, 16, 17, 18])
    assert said[17] and said[18], "appended after the compaction: in the view"
    assert not said[1], "summarized by the compaction: not in the view"
