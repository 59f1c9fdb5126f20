"""Layer 4: context collapse folds the oldest rounds at 90% and blocks at 95%."""

from __future__ import annotations

import pytest

from sessionstore.compaction.errors import ContextFull
from sessionstore.compaction.pipeline import Pipeline
from sessionstore import SessionStore, SessionStoreError
from tests.support.cli import run_cli
from tests.support.layers import assert_transcript_kept, assert_valid_view, assistant, tool_round, transcript, user

WINDOW = 60_000  # effective 40,000: collapse starts at 36,000 and blocks at 38,000
START, BLOCK = 36_000, 38_000


@pytest.fixture
def pipeline(store: SessionStore) -> Pipeline:
    config = store.config.replace(collapse_enabled=True, microcompact_enabled=False)
    return Pipeline(store, config=config)


def _session(store: SessionStore, rounds: int, usage: int):
    """A request, `rounds` tool rounds, a final answer whose usage says `usage` tokens."""
    s = store.create_session(context_window=WINDOW)
    s.append(user("Audit every module of the package"))
    for i in range(rounds):
        s.append_many(tool_round(f"t{i}", f"module {i} line\n" * 300))
    s.append(assistant("Audit finished.", usage={"input_tokens": usage, "output_tokens": 0}))
    return s


def _collapse_entries(s) -> list:
    return [e for e in s.active_entries() if e.message.metadata.get("collapse")]


def test_thresholds_are_90_and_95_percent_of_the_effective_window(store: SessionStore, pipeline: Pipeline) -> None:
    s = _session(store, 3, 100)
    details = pipeline.prepare(s).report["collapse"].details
    assert (details["start_at"], details["block_at"]) == (START, BLOCK)


def test_just_below_90_percent_nothing_folds(store: SessionStore, pipeline: Pipeline) -> None:
    s = _session(store, 10, START - 1)
    prepared = pipeline.prepare(s)
    assert not prepared.report["collapse"].acted
    assert prepared.tokens == START - 1
    assert _collapse_entries(s) == []


def test_at_90_percent_the_oldest_rounds_fold(store: SessionStore, pipeline: Pipeline) -> None:
    s = _session(store, 10, START)
    before = transcript(s)
    first_uuid = before[0]["uuid"]
    prepared = pipeline.prepare(s)
    layer = prepared.report["collapse"]
    assert layer.acted and layer.items == 1
    (entry,) = _collapse_entries(s)
    meta = entry.message.metadata
    assert entry.role == "user" and meta["collapse"] is True
    assert meta["span"][0] == first_uuid
    assert "Audit every module" in entry.content and "Tool Read" in entry.content
    commit = [e for e in s.active_entries() if e.subtype == "collapse_commit"]
    assert len(commit) == 1
    assert commit[0].message.metadata["collapse_uuid"] == entry.uuid
    assert commit[0].message.metadata["folded_uuids"][0] == first_uuid
    assert prepared.tokens < START
    assert prepared.messages == s.active_view()
    assert prepared.messages[0]["role"] == "user"
    assert_valid_view(prepared.messages)
    added = assert_transcript_kept(s, before)
    assert [m["subtype"] for m in added] == [None, "collapse_commit"]
    assert store.db.one("SELECT COUNT(*) FROM compactions")[0] == 0
    assert prepared.report["autocompact"].details["suppressed_by_collapse"] is True


def test_more_pressure_folds_more_but_never_the_last_two_rounds(store: SessionStore, pipeline: Pipeline) -> None:
    s = _session(store, 10, BLOCK - 1)
    prepared = pipeline.prepare(s)
    folded = prepared.report["collapse"].details["commits"][0]["messages"]
    assert folded > 3
    s2 = _session(store, 10, 1_000_000)
    with pytest.raises(ContextFull):
        pipeline.prepare(s2)
    view = s2.active_view()
    assert_valid_view(view)
    kept_ids = [
        b["tool_use_id"]
        for m in view
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert kept_ids == ["t9"]
    assert view[-1]["content"] == [{"type": "text", "text": "Audit finished."}]
    assert view[0]["role"] == "user" and "[Collapsed" in str(view[0]["content"])


def test_successive_folds_stack_after_earlier_collapse_entries(store: SessionStore, pipeline: Pipeline) -> None:
    s = _session(store, 12, START)
    pipeline.prepare(s)
    for i in range(12, 14):
        s.append_many([user(f"Also check module {i}"), *tool_round(f"t{i}", f"module {i} line\n" * 300)])
    s.append(assistant("Checked.", usage={"input_tokens": START + 500, "output_tokens": 0}))
    prepared = pipeline.prepare(s)
    entries = _collapse_entries(s)
    assert [e.message.metadata["commit"] for e in entries] == [1, 2]
    assert s.active_entries()[0].uuid == entries[0].uuid
    assert_valid_view(prepared.messages)


def test_at_95_percent_with_nothing_to_fold_prepare_raises(store: SessionStore, pipeline: Pipeline) -> None:
    just_below = _session(store, 1, BLOCK - 1)
    prepared = pipeline.prepare(just_below)
    assert not prepared.report["collapse"].acted
    at_block = _session(store, 1, BLOCK)
    with pytest.raises(ContextFull) as info:
        pipeline.prepare(at_block)
    assert isinstance(info.value, SessionStoreError)
    assert info.value.tokens == BLOCK and info.value.limit == BLOCK
    dry = pipeline.prepare(at_block, dry_run=True)
    assert dry.report["collapse"].details["blocked"] is True


def test_dry_run_folds_nothing(store: SessionStore, pipeline: Pipeline) -> None:
    s = _session(store, 10, START + 1_000)
    before = transcript(s)
    version = s.view_version
    prepared = pipeline.prepare(s, dry_run=True)
    assert prepared.report["collapse"].acted
    assert "[Collapsed" in str(prepared.messages[0]["content"])
    assert_valid_view(prepared.messages)
    assert s.view_version == version and transcript(s) == before


def test_collapse_is_off_by_default(store: SessionStore) -> None:
    s = _session(store, 10, 1_000_000)
    prepared = Pipeline(store).prepare(s)
    assert prepared.report["collapse"].details["enabled"] is False and not prepared.report["collapse"].acted
    assert prepared.report["autocompact"].details["enabled"] is True
    assert prepared.above_threshold


def test_cli_reports_a_full_context_in_one_line(
    store: SessionStore, store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _session(store, 1, BLOCK)
    monkeypatch.setenv("SESSIONSTORE_COLLAPSE_ENABLED", "1")
    result = run_cli(capsys, "prepare", s.id, "--db", store_url)
    assert result.code == 2
    assert result.err.startswith("error: context full") and result.err.count("\n") == 1
