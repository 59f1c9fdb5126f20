"""Layer 5 and reactive compaction: when they fire, what they try first, and the circuit breaker."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from sessionstore.compaction.circuit import compact_failures
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.compaction.summarizers.base import SummarizerError, SummaryResult
from sessionstore import SessionStore
from sessionstore.storage.read.history import boundaries
from sessionstore.storage.write.memory import save_memory
from sessionstore.storage.core.types import ViewEntry
from tests.support.fakeapi import estimate_prompt_tokens, start_fake_api
from tests.support.messages import conversation
from tests.support.validity import check_messages

WINDOW = 40_000  # effective 20,000; threshold 7,000; warning 0


class Failing:
    """A summarizer that always fails (the API is down, say)."""

    name = "failing"
    calls = 0

    def summarize(
        self, entries: Sequence[ViewEntry], *, custom_instructions: str | None = None, truncated: bool = False
    ) -> SummaryResult:
        Failing.calls += 1
        raise SummarizerError("summary service unavailable")


def _pipe(store: SessionStore, **kwargs: Any) -> Pipeline:
    """A pipeline with microcompact off, so the view stays over the threshold for layer 5."""
    return Pipeline(store, config=store.config.replace(microcompact_enabled=False), **kwargs)


def _over(store: SessionStore, n: int = 120) -> Any:
    s = store.create_session(context_window=WINDOW)
    msgs = [{k: v for k, v in m.items() if k != "usage"} for m in conversation(n, seed=11)]
    while msgs[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in msgs[-1]["content"]):
        msgs.pop()
    s.append_many(msgs)
    s.append({"role": "user", "content": "continue"})
    assert s.view_tokens > 7_000
    return s


def test_fires_above_threshold_with_full_compaction(store: SessionStore) -> None:
    s = _over(store)
    prepared = _pipe(store).prepare(s)
    layer = prepared.report["autocompact"]
    assert layer.acted and layer.details["compaction"]["kind"] == "full"
    assert boundaries(s)[0].trigger == "auto"
    assert prepared.tokens < 7_000
    assert check_messages(prepared.messages) == []
    assert prepared.messages == s.active_view()


def test_session_memory_is_tried_first(store: SessionStore) -> None:
    s = _over(store, 400)
    entries = s.active_entries()
    covered = entries[-30]
    save_memory(
        s,
        "# Learnings\nhalf way through request 12\n",
        covers_seq=covered.seq,
        covers_uuid=covered.uuid,
        tokens=0,
        tool_calls=0,
    )
    config = store.config.replace(
        microcompact_enabled=False, memory_keep_min_tokens=2_000, memory_keep_max_tokens=5_000
    )
    prepared = Pipeline(store, config=config).prepare(s)
    assert prepared.report["autocompact"].details["compaction"]["kind"] == "session-memory"
    assert "half way through request 12" in (boundaries(s)[0].summary or "")


def test_a_cheaper_layer_that_relieves_the_pressure_stops_auto_compact(store: SessionStore) -> None:
    s = _over(store)
    prepared = Pipeline(store).prepare(s)
    assert prepared.report["microcompact"].acted
    assert not prepared.report["autocompact"].acted and boundaries(s) == []
    assert prepared.tokens < 7_000


def test_never_from_a_compactions_own_call(store: SessionStore) -> None:
    s = _over(store)
    for source in ("compact", "session_memory"):
        prepared = _pipe(store).prepare(s, query_source=source)
        assert prepared.above_threshold and not prepared.report["autocompact"].acted
    assert boundaries(s) == []


def test_circuit_breaker_opens_after_3_failures_and_survives_restarts(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        s = _over(store)
        sid = s.id
        Failing.calls = 0
        for expected in (1, 2, 3):
            prepared = _pipe(store, summarizer=Failing()).prepare(s)
            assert prepared.report["autocompact"].details["consecutive_failures"] == expected
        assert Failing.calls == 3
    with SessionStore.open(store_url) as store:
        s = store.get(sid)
        prepared = _pipe(store, summarizer=Failing()).prepare(s)
        assert "circuit breaker open" in prepared.report["autocompact"].details["skipped"]
        assert Failing.calls == 3, "no fourth attempt, even after a restart"
        compact(s)
        assert compact_failures(s) == 0, "a manual compaction closes the breaker"
        _refill(s)
        prepared = _pipe(store, summarizer=Failing()).prepare(s)
        assert Failing.calls == 4, "auto-compact is tried again once the breaker is closed"
        assert prepared.report["autocompact"].details["consecutive_failures"] == 1, "the count starts over"


def test_a_successful_auto_compaction_resets_the_failure_count(store: SessionStore) -> None:
    s = _over(store)
    Failing.calls = 0
    for expected in (1, 2):
        prepared = _pipe(store, summarizer=Failing()).prepare(s)
        assert prepared.report["autocompact"].details["consecutive_failures"] == expected
    prepared = _pipe(store).prepare(s)
    assert prepared.report["autocompact"].acted and prepared.report["autocompact"].details["consecutive_failures"] == 2
    assert compact_failures(s) == 0, "success resets the count"
    _refill(s)
    prepared = _pipe(store, summarizer=Failing()).prepare(s)
    assert prepared.report["autocompact"].details["consecutive_failures"] == 1, "two more failures would not open it"


def _refill(s: Any) -> None:
    """Append a finished conversation until the view is over the threshold again."""
    s.append_many(_complete(120))
    s.append({"role": "user", "content": "continue"})
    assert s.view_tokens > 7_000


def test_below_threshold_nothing_happens_and_dry_run_only_reports(store: SessionStore) -> None:
    s = _over(store)
    prepared = _pipe(store).prepare(s, dry_run=True)
    assert prepared.report["autocompact"].details["would_compact"] is True
    assert boundaries(s) == []


def test_reactive_recovery_after_the_apis_real_prompt_too_long(store: SessionStore) -> None:
    """The SDK's own BadRequestError from the local server's window check; after recovery the call succeeds."""
    import anthropic

    s = store.create_session(context_window=1_000_000)
    s.append_many(_complete(200))
    s.append({"role": "user", "content": "go on"})
    pipeline = Pipeline(store)
    prepared = pipeline.prepare(s)
    limit = estimate_prompt_tokens({"messages": prepared.messages}) * 3 // 4
    with start_fake_api(max_prompt_tokens=limit) as api:
        api.script("Going on.")
        client = anthropic.Anthropic(base_url=api.base_url, api_key="sk-ant-test-reactive", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model="claude-sonnet-4-6", max_tokens=256, messages=prepared.messages)
        assert "prompt is too long" in str(caught.value)
        assert boundaries(s) == []
        recovered = pipeline.recover_from_prompt_too_long(s, caught.value)
        reply = client.messages.create(model="claude-sonnet-4-6", max_tokens=256, messages=recovered.messages)
        assert reply.content[0].text == "Going on."
        assert [r.estimated_tokens <= limit for r in api.message_requests] == [False, True]
    assert boundaries(s)[0].trigger == "reactive"
    assert recovered.tokens < prepared.tokens
    assert check_messages(recovered.messages) == []


def _complete(n: int) -> list[dict[str, Any]]:
    msgs = [{k: v for k, v in m.items() if k != "usage"} for m in conversation(n, seed=5)]
    while msgs[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in msgs[-1]["content"]):
        msgs.pop()
    return msgs


@pytest.mark.parametrize("tokens_below", [True, False])
def test_memory_notes_update_on_the_trigger(store: SessionStore, tokens_below: bool) -> None:
    from sessionstore.storage.write.memory import load_memory

    s = store.create_session(context_window=1_000_000)
    msgs = _complete(30 if tokens_below else 300)
    s.append_many(msgs)
    _pipe(store).prepare(s)
    memory = load_memory(s)
    if tokens_below:
        assert s.view_tokens < 10_000 and memory is None
    else:
        assert s.view_tokens >= 10_000 and memory is not None and memory.covers_seq == s.active_entries()[-1].seq
