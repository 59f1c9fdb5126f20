"""Layer 3: microcompact clears old results of compactable tools (count and time triggers)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sessionstore.compaction.microcompact import CLEARED_TEXT
from sessionstore.compaction.pipeline import Pipeline
from sessionstore import SessionStore
from sessionstore.storage.write.replacements import load_replacements
from sessionstore.storage.write.spill import list_spills, spill_original
from tests.support.layers import (
    T0,
    assert_transcript_kept,
    assert_valid_view,
    result_contents,
    tool_round,
    transcript,
    user,
)

SOON = T0 + timedelta(minutes=30)


@pytest.fixture
def pipeline(store: SessionStore) -> Pipeline:
    return Pipeline(store)


def _rounds(s, ids: list[str], *, name: str = "Read", when: float = 0.0) -> None:
    s.append_many([m for tid in ids for m in tool_round(tid, f"contents of {tid}\n" * 40, name=name, when=when)])


def _cleared(s) -> list[str]:
    return [tid for tid, c in result_contents(s).items() if c == CLEARED_TEXT]


def _boundaries(s) -> list:
    return [e for e in s.active_entries() if e.subtype == "microcompact_boundary"]


def test_count_trigger_at_12_keeps_the_3_most_recent(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    ids = [f"r{i:02d}" for i in range(12)]
    s.append(user("Read the whole package"))
    _rounds(s, ids[:11])
    _rounds(s, ["todo1", "todo2"], name="TodoWrite")
    below = pipeline.prepare(s, now=SOON)
    assert not below.report["microcompact"].acted
    assert below.report["microcompact"].details["registered"] == 11
    before = transcript(s)
    _rounds(s, ids[11:])
    prepared = pipeline.prepare(s, now=SOON)
    mc = prepared.report["microcompact"]
    assert mc.acted and mc.items == 9 and mc.details["trigger"] == "count"
    assert _cleared(s) == ids[:9]
    shown = result_contents(s)
    assert all(shown[t].startswith("contents of") for t in ids[9:] + ["todo1", "todo2"])
    (boundary,) = _boundaries(s)
    meta = boundary.message.metadata
    assert meta["trigger"] == "count" and meta["cleared_tool_use_ids"] == ids[:9] and meta["kept"] == 3
    assert meta["tokens_saved"] == mc.details["tokens_saved"] > 0
    assert mc.tokens_before - mc.tokens_after == meta["tokens_saved"] - boundary.tokens
    assert prepared.messages == s.active_view()
    assert_valid_view(prepared.messages)
    assert [m["subtype"] for m in assert_transcript_kept(s, before)[2:]] == ["microcompact_boundary"]
    decisions = load_replacements(store.db, s.id)
    assert sorted(decisions) == ids[:9]
    assert {(d.kind, d.text) for d in decisions.values()} == {("cleared", CLEARED_TEXT)}


def test_count_starts_over_from_the_kept_results(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append(user("go"))
    _rounds(s, [f"a{i}" for i in range(12)])
    pipeline.prepare(s, now=SOON)
    _rounds(s, [f"b{i}" for i in range(8)])
    assert not pipeline.prepare(s, now=SOON).report["microcompact"].acted
    _rounds(s, ["b8"])
    prepared = pipeline.prepare(s, now=SOON)
    assert prepared.report["microcompact"].details["cleared_tool_use_ids"] == ["a9", "a10", "a11"] + [
        f"b{i}" for i in range(6)
    ]
    assert len(_boundaries(s)) == 2
    assert_valid_view(prepared.messages)


@pytest.mark.parametrize(
    "idle, fires",
    [
        (timedelta(minutes=59, seconds=59), False),
        (timedelta(minutes=60), False),
        (timedelta(minutes=60, seconds=1), True),
    ],
)
def test_time_trigger_after_60_minutes_keeps_5(
    store: SessionStore, pipeline: Pipeline, idle: timedelta, fires: bool
) -> None:
    s = store.create_session()
    s.append(user("go"))
    _rounds(s, [f"r{i}" for i in range(7)], when=10)
    prepared = pipeline.prepare(s, now=T0 + timedelta(minutes=10) + idle)
    mc = prepared.report["microcompact"]
    assert mc.acted is fires
    if fires:
        assert mc.details["trigger"] == "time" and mc.details["kept"] == 5
        assert _cleared(s) == ["r0", "r1"]
        assert_valid_view(prepared.messages)
    else:
        assert _cleared(s) == []


def test_time_trigger_resets_the_count(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append(user("go"))
    _rounds(s, [f"a{i}" for i in range(9)], when=0)
    late = T0 + timedelta(hours=2)
    assert pipeline.prepare(s, now=late).report["microcompact"].details["trigger"] == "time"
    assert len(_cleared(s)) == 4
    _rounds(s, [f"b{i}" for i in range(6)], when=120)
    assert not pipeline.prepare(s, now=late).report["microcompact"].acted
    _rounds(s, ["b6"], when=120)
    prepared = pipeline.prepare(s, now=late)
    assert prepared.report["microcompact"].details["trigger"] == "count"
    assert len(_cleared(s)) == 4 + 9


def test_time_trigger_does_nothing_with_5_or_fewer(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append(user("go"))
    _rounds(s, [f"r{i}" for i in range(5)])
    assert not pipeline.prepare(s, now=T0 + timedelta(days=1)).report["microcompact"].acted


def test_only_the_main_thread(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append(user("go"))
    _rounds(s, [f"r{i}" for i in range(14)])
    prepared = pipeline.prepare(s, now=SOON, query_source="agent:explore")
    assert not prepared.report["microcompact"].acted
    assert "skipped" in prepared.report["microcompact"].details
    assert _cleared(s) == []
    assert pipeline.prepare(s, now=SOON).report["microcompact"].acted


def test_cleared_content_is_idempotent_across_reopen(store: SessionStore, store_url: str, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append(user("go"))
    _rounds(s, [f"r{i}" for i in range(12)])
    pipeline.prepare(s, now=SOON)
    shown = result_contents(s)
    version = s.view_version
    assert not pipeline.prepare(s, now=SOON).report["microcompact"].acted
    with SessionStore.open(store_url) as reopened:
        s2 = reopened.get(s.id)
        prepared = Pipeline(reopened).prepare(s2, now=SOON)
        assert not prepared.acted
        assert result_contents(s2) == shown
        assert s2.view_version == version


def test_a_spilled_result_can_be_cleared_and_still_read(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append(user("go"))
    s.append_many(tool_round("big", "B" * 60_000))
    pipeline.prepare(s, now=SOON)
    _rounds(s, [f"r{i}" for i in range(11)])
    pipeline.prepare(s, now=SOON)
    assert "big" in _cleared(s)
    assert spill_original(s, "big") == b"B" * 60_000
    assert [(x.tool_use_id, x.kind) for x in list_spills(s)] == [("big", "cleared")]


def test_server_mode_returns_context_management(store: SessionStore) -> None:
    config = store.config.replace(microcompact_mode="server")
    s = store.create_session(context_window=200_000)
    s.append(user("go"))
    _rounds(s, [f"r{i}" for i in range(14)])
    _rounds(s, ["t1"], name="TodoWrite")
    _rounds(s, ["t2"], name="Task")
    prepared = Pipeline(store, config=config).prepare(s, now=SOON)
    assert prepared.context_management == {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 160_000},
                "keep": {"type": "tool_uses", "value": 3},
                "exclude_tools": ["Task", "TodoWrite"],
            }
        ]
    }
    assert prepared.betas == ["context-management-2025-06-27"]
    assert _cleared(s) == [] and not prepared.report["microcompact"].acted
    sub = Pipeline(store, config=config).prepare(s, now=SOON, query_source="agent:x")
    assert sub.context_management is None and sub.betas == []
