"""`sessionstore show S UUID|SEQ`: one message with envelope, usage, spills and boundaries (both engines)."""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from tests.support.cli import run_cli

USAGE = {"input_tokens": 1200, "output_tokens": 80}


def built(store: SessionStore) -> tuple[str, dict[str, int]]:
    """A session whose big tool result is spilled and whose early messages a compaction summarized."""
    s = store.create_session(title="show")
    s.append({"role": "user", "content": "look at the log"})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/tmp/log"}}],
            "usage": USAGE,
        }
    )
    s.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "line of the log\n" * 20_000}],
        }
    )
    s.append({"role": "assistant", "content": "the log says the disk is full"})
    Pipeline(store).prepare(s)
    for i in range(6):
        s.append({"role": "user", "content": f"question {i} about the disk"})
        s.append({"role": "assistant", "content": f"answer {i}: free some space"})
    compact(s)
    seqs = {m.uuid: m.seq for m in s.transcript()}
    return s.id, seqs


def test_show_names_envelope_usage_spills_and_boundaries(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    sid, seqs = built(store)
    by_seq = {seq: uuid for uuid, seq in seqs.items()}
    result = run_cli(capsys, "show", sid, "2", "--json", "--db", store_url)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["message"]["uuid"] == by_seq[2] and doc["message"]["usage"] == USAGE
    assert doc["in_view"] is False
    assert {"boundary": 1, "as": "summarized", "kind": "full"} in doc["boundaries"]
    # a unique start of its uuid: uuids made in one millisecond share their first 15 characters
    start = next(by_seq[3][:n] for n in range(16, 37) if sum(u.startswith(by_seq[3][:n]) for u in by_seq.values()) == 1)
    spilled = json.loads(run_cli(capsys, "show", sid, start, "--json", "--db", store_url).out)
    assert spilled["message"]["seq"] == 3
    assert [(s["tool_use_id"], s["kind"]) for s in spilled["spills"]] == [("t1", "spilled")]
    text = run_cli(capsys, "show", sid, start, "--db", store_url)
    assert text.code == 0 and "spill" in text.out and "t1" in text.out and "line of the log" in text.out


def test_show_a_boundary_and_its_summary(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    sid, _ = built(store)
    boundary = store.get(sid).active_entries()[0]
    doc = json.loads(run_cli(capsys, "show", sid, boundary.uuid, "--json", "--db", store_url).out)
    assert doc["in_view"] is True and doc["boundaries"] == [{"boundary": 1, "as": "boundary", "kind": "full"}]


def test_a_search_hit_opens_with_show(capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str) -> None:
    sid, seqs = built(store)
    [hit] = store.search('"the disk is full"')
    assert hit.open == f"sessionstore show {sid} {hit.uuid}"
    args = hit.open.split()[1:]
    shown = run_cli(capsys, *args, "--db", store_url)
    assert shown.code == 0 and "the log says the disk is full" in shown.out


def test_show_refuses_what_names_no_message_in_one_line(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    sid, _ = built(store)
    for ref in ("zzzz", "999999", ""):
        result = run_cli(capsys, "show", sid, ref, "--db", store_url)
        assert result.code == 2 and result.err.count("\n") == 1, (ref, result)
