"""The local Messages API server speaks the API's compaction (issue 38, part 5).

Every answer is parsed by the real SDK's beta types: on-demand and threshold compaction
(plain and streamed with `compaction_delta`), context-editing reports, usage iterations,
a failed compaction and a block type no SDK knows yet. The last test drives a store with them.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import anthropic
import pytest
from anthropic.types.beta import (
    BetaClearToolUses20250919EditResponse,
    BetaCompactionBlock,
    BetaCompactionIterationUsage,
    BetaMessage,
    BetaMessageIterationUsage,
    BetaTextBlock,
)

from sessionstore import SessionStore
from sessionstore.storage.read.history import boundaries
from tests.support.fakeapi import FakeAPI, Reply, start_fake_api

MODEL = "claude-opus-4-7"
ON_DEMAND = ["compact-2026-09-04"]
THRESHOLD = ["compact-2026-01-12", "context-management-2025-06-27"]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "please read the zanzibar notes"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "z"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "zanzibar: 3 ports"}]},
    {"role": "assistant", "content": "The notes list three ports."},
    {"role": "user", "content": "and now summarize"},
]


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = start_fake_api()
    try:
        yield server
    finally:
        server.close()


def _client(api: FakeAPI) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=api.base_url, api_key="sk-ant-test-compaction", max_retries=0)


def test_on_demand_compaction_plain_and_streamed(api: FakeAPI) -> None:
    """`compaction=` answers one signed block, stop_reason "compaction", billed as a compaction iteration
    left out of the top-level usage; the stream rebuilds the same block from its compaction_delta."""
    client = _client(api)
    config: Any = {"type": "summarize", "instructions": "keep the port count"}
    plain = client.beta.messages.create(
        model=MODEL, max_tokens=1024, messages=CONVERSATION, compaction=config, betas=ON_DEMAND
    )
    assert plain.stop_reason == "compaction"
    [block] = plain.content
    assert isinstance(block, BetaCompactionBlock)
    assert block.content is not None and "zanzibar" in block.content and "keep the port count" in block.content
    assert block.signature and block.encrypted_content
    assert plain.usage.input_tokens == 0 and plain.usage.output_tokens == 0
    assert plain.usage.iterations is not None
    [iteration] = plain.usage.iterations
    assert isinstance(iteration, BetaCompactionIterationUsage) and iteration.input_tokens > 0
    deltas = []
    with client.beta.messages.stream(
        model=MODEL, max_tokens=1024, messages=CONVERSATION, compaction=config, betas=ON_DEMAND
    ) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                deltas.append(event.delta.type)
        streamed = stream.get_final_message()
    assert deltas == ["compaction_delta"]
    [again] = streamed.content
    assert isinstance(again, BetaCompactionBlock) and again.content == block.content
    assert again.encrypted_content and again.signature
    assert streamed.usage.iterations is not None and streamed.stop_reason == "compaction"


def test_threshold_compaction_puts_the_block_before_the_reply(api: FakeAPI) -> None:
    """A `compact_20260112` edit the prompt reaches: [compaction, reply], iterations [compaction, message];
    paused, the block alone; below the trigger, no compaction."""
    client = _client(api)
    edit: Any = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50}}
    api.script("Here is the summary you asked for.", "unused", "Below the trigger.")
    reply = client.beta.messages.create(
        model=MODEL, max_tokens=1024, messages=CONVERSATION, context_management={"edits": [edit]}, betas=THRESHOLD
    )
    assert [type(b) for b in reply.content] == [BetaCompactionBlock, BetaTextBlock]
    assert reply.usage.iterations is not None
    assert [type(i) for i in reply.usage.iterations] == [BetaCompactionIterationUsage, BetaMessageIterationUsage]
    paused_edit: Any = dict(edit, pause_after_compaction=True)
    with client.beta.messages.stream(
        model=MODEL,
        max_tokens=1024,
        messages=CONVERSATION,
        context_management={"edits": [paused_edit]},
        betas=THRESHOLD,
    ) as stream:
        paused = stream.get_final_message()
    assert paused.stop_reason == "compaction" and [b.type for b in paused.content] == ["compaction"]
    high: Any = dict(edit, trigger={"type": "input_tokens", "value": 10**6})
    calm = client.beta.messages.create(
        model=MODEL, max_tokens=1024, messages=CONVERSATION, context_management={"edits": [high]}, betas=THRESHOLD
    )
    assert [b.type for b in calm.content] == ["text"]


def test_context_editing_reports_and_failed_compaction(api: FakeAPI) -> None:
    """clear_tool_uses reports what it cleared (streamed too); a failing compaction returns null content."""
    client = _client(api)
    clear: Any = {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 0}}
    api.script("ok", "ok again")
    reply = client.beta.messages.create(
        model=MODEL, max_tokens=64, messages=CONVERSATION, context_management={"edits": [clear]}, betas=THRESHOLD
    )
    assert reply.context_management is not None
    [edit] = reply.context_management.applied_edits
    assert isinstance(edit, BetaClearToolUses20250919EditResponse) and edit.cleared_tool_uses == 1
    with client.beta.messages.stream(
        model=MODEL, max_tokens=64, messages=CONVERSATION, context_management={"edits": [clear]}, betas=THRESHOLD
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.context_management is not None and streamed.context_management.applied_edits
    api.failing_compactions = 1
    failed = client.beta.messages.create(
        model=MODEL, max_tokens=64, messages=CONVERSATION, compaction={"type": "summarize"}, betas=ON_DEMAND
    )
    [block] = failed.content
    assert isinstance(block, BetaCompactionBlock) and block.content is None


def test_unknown_future_block_reaches_the_store_verbatim(api: FakeAPI, store: SessionStore) -> None:
    """A block no SDK knows, streamed and plain: the SDK keeps its fields, the store keeps and sends it back."""
    future = {"type": "hologram_2027", "frames": [1, 2, 3]}
    api.script(Reply.blocks([future, {"type": "text", "text": "see above"}]), Reply.blocks([future]))
    client = _client(api)
    session = store.create_session(title="future")
    session.append(CONVERSATION[0])
    plain = client.beta.messages.create(model=MODEL, max_tokens=64, messages=session.active_view())
    session.append(plain)
    assert session.active_view()[-1]["content"][0] == future
    session.append({"role": "user", "content": "again"})
    with client.beta.messages.stream(model=MODEL, max_tokens=64, messages=session.active_view()) as stream:
        streamed = stream.get_final_message()
    session.append(streamed)
    assert session.active_view()[-1] == {"role": "assistant", "content": [future]}


def test_store_records_server_compactions_from_the_sdk(api: FakeAPI, store: SessionStore) -> None:
    """Threshold and on-demand replies, appended as the SDK returned them, become boundaries; the next request
    built from the view opens with the compaction message, and the server accepts it."""
    client = _client(api)
    edit: Any = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 60}}
    api.script("first answer", "second answer")
    session = store.create_session(title="threshold")
    session.append(CONVERSATION[0])
    for _ in range(2):
        reply = client.beta.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=session.active_view(),
            context_management={"edits": [edit]},
            betas=THRESHOLD,
        )
        session.append(reply)
        session.append({"role": "user", "content": "more about zanzibar please, with every detail you have"})
    on_demand = client.beta.messages.create(
        model=MODEL, max_tokens=64, messages=session.active_view(), compaction={"type": "summarize"}, betas=ON_DEMAND
    )
    session.append(on_demand)
    kinds = [b.kind for b in boundaries(session)]
    assert kinds[-1] == "api-on-demand" and "api-threshold" in kinds
    view = session.active_view()
    assert view[0] == {"role": "assistant", "content": json.loads(on_demand.to_json())["content"]}
    assert isinstance(BetaMessage.model_validate(json.loads(on_demand.to_json())), BetaMessage)
