"""`spill list` marks a spilled result a compaction summarized as `compacted` (no longer in the view), on both engines.

It listed it as `spilled` (what the view would show) after the compaction took it out;
`stats` counts from the same listing, so the two agree.
"""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.storage.write.spill import list_spills, spill_original
from tests.support.cli import run_cli
from tests.support.messages import conversation

LOG = "line of the log\n" * 20_000


def _spilled_session(store: SessionStore) -> str:
    s = store.create_session(title="spills")
    s.append({"role": "user", "content": "look at the log"})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/tmp/log"}}],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": LOG}]})
    s.append({"role": "assistant", "content": "the disk is full"})
    Pipeline(store).prepare(s)
    return s.id


def _listed(capsys: pytest.CaptureFixture[str], sid: str, url: str) -> tuple[list[dict[str, object]], str, dict]:
    as_json = run_cli(capsys, "spill", "list", sid, "--json", "--db", url)
    table = run_cli(capsys, "spill", "list", sid, "--db", url)
    stats = run_cli(capsys, "stats", sid, "--json", "--db", url)
    assert as_json.code == table.code == stats.code == 0, as_json.err + table.err + stats.err
    return json.loads(as_json.out), table.out, json.loads(stats.out)


def test_spill_list_marks_what_a_compaction_took_out_of_the_view(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    sid = _spilled_session(store)
    before, table, stats = _listed(capsys, sid, store_url)
    assert [(s["tool_use_id"], s["now"], s["in_view"]) for s in before] == [("t1", "spilled", True)]
    assert "compacted" not in table and stats["spilled_now"] == 1

    session = store.get(sid)
    session.append_many(list(conversation(12, seed=8)))
    assert run_cli(capsys, "compact", sid, "--db", store_url).code == 0
    after, table, stats = _listed(capsys, sid, store_url)
    assert [(s["tool_use_id"], s["now"], s["in_view"]) for s in after] == [("t1", "compacted", False)]
    assert "compacted" in table and "1 compacted out of the view" in " ".join(table.split())
    assert (stats["spilled_now"], stats["spilled_ever"]) == (0, 1)
    assert [s.in_view for s in list_spills(store.get(sid))] == [False]
    assert spill_original(store.get(sid), "t1") == LOG.encode(), "the original stays readable"
