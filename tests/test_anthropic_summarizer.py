"""AnthropicSummarizer and summarize_with_retry against the local fake Messages API.

The real anthropic SDK runs in every test: streaming, retries and error
mapping are the SDK's own; only the server is local.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from sessionstore.compaction.prompt import compact_prompt
from sessionstore.compaction.rounds import group_rounds
from sessionstore.compaction.summarize import CompactionFailed, rounds_to_drop, summarize_with_retry
from sessionstore.compaction.summarizers.anthropic import (
    DEFAULT_MODEL,
    MODEL_ENV,
    OMITTED_START,
    AnthropicSummarizer,
    parse_token_counts,
)
from sessionstore.compaction.summarizers.base import PromptTooLong, Summarizer, SummarizerError
from sessionstore.storage.core.types import ViewEntry
from tests.support.factory import (
    assistant_text,
    assistant_tool_use,
    attachment,
    boundary,
    conversation,
    document_block,
    entries_from,
    image_block,
    message,
    tool_result,
    user,
    user_blocks,
)
from tests.support.fakeapi import (
    FakeAPI,
    RecordedRequest,
    Reply,
    estimate_prompt_tokens,
    start_fake_api,
)
from tests.support.validity import assert_valid

KEY = "sk-ant-test-SECRET-12345"

RAW_SUMMARY = (
    "<analysis>The user asked to fix a bug; I read two files.</analysis>\n"
    "<summary>\n1. Primary Request and Intent: fix the bug in a.py\n"
    "8. Current Work: editing a.py\n</summary>"
)


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """A fresh fake API server for one test."""
    with start_fake_api() as server:
        yield server


@pytest.fixture
def summarizer(api: FakeAPI) -> Iterator[AnthropicSummarizer]:
    """A summarizer on the fake server with a fake key and quick SDK retries."""
    s = AnthropicSummarizer("claude-test", api_key=KEY, base_url=api.base_url, max_retries=2, timeout=5)
    yield s
    s.client.close()


def all_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every block of `messages`, tool_result contents included."""
    found: list[dict[str, Any]] = []
    for msg in messages:
        content = msg["content"]
        for block in [] if isinstance(content, str) else content:
            found.append(block)
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                found.extend(block["content"])
    return found


def all_text(request: RecordedRequest) -> str:
    """The request's messages as one searchable string."""
    return repr(request.messages)


def rich_conversation() -> list[ViewEntry]:
    """A view with an image, a document, a re-injected attachment, a boundary and tool rounds."""
    return entries_from(
        [
            boundary(),
            user_blocks([{"type": "text", "text": "What is wrong in this screenshot?"}, image_block()]),
            assistant_tool_use("Read", {"path": "a.py"}, "toolu_1", text="Let me read a.py."),
            user_blocks(
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "def f(): pass"}, image_block()],
                    }
                ]
            ),
            attachment("REINJECTED FILE CONTENT of b.py", reinjected=True),
            attachment("a plan the user attached"),
            user_blocks([document_block(), {"type": "text", "text": "also see the spec"}]),
            assistant_text("The bug is in f."),
        ]
    )


def test_is_a_summarizer() -> None:
    """AnthropicSummarizer satisfies the Summarizer protocol."""
    assert isinstance(AnthropicSummarizer(api_key=KEY), Summarizer)


def test_streamed_summary_and_the_request_sent(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """The summary streams back without analysis; the request: no tools, placeholders, prompt last."""
    api.script(RAW_SUMMARY)
    result = summarizer.summarize(rich_conversation())

    assert result.raw == RAW_SUMMARY
    assert result.text.startswith("1. Primary Request and Intent: fix the bug in a.py")
    assert "<analysis>" not in result.text and "read two files" not in result.text
    (request,) = api.requests
    assert result.input_tokens == request.estimated_tokens
    assert result.output_tokens and result.output_tokens > 1

    assert request.stream and "tools" not in request.body and "tool_choice" not in request.body
    assert request.body["model"] == "claude-test" and request.body["max_tokens"] == 20_000
    assert_valid(request.messages, allow_pending_last=False)
    last = request.messages[-1]
    assert last["role"] == "user" and last["content"][-1] == {"type": "text", "text": compact_prompt()}
    blocks = all_blocks(request.messages)
    assert not [b for b in blocks if b["type"] in ("image", "document")]
    assert sum(1 for b in blocks if b == {"type": "text", "text": "[image]"}) == 2
    assert {"type": "text", "text": "[document]"} in blocks
    assert "REINJECTED FILE CONTENT" not in all_text(request)
    assert "a plan the user attached" in all_text(request)
    assert "Conversation compacted" not in all_text(request)


def test_custom_instructions_and_truncated_note(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """Custom instructions and the truncated note reach the prompt."""
    api.script("<summary>short</summary>")
    entries = entries_from([user("hello"), assistant_text("hi")])
    result = summarizer.summarize(entries, custom_instructions="Focus on tests.", truncated=True)
    assert result.text == "short"
    prompt = api.requests[0].messages[-1]["content"][-1]["text"]
    assert prompt == compact_prompt("Focus on tests.", truncated=True)
    assert "Focus on tests." in prompt


def test_trailing_user_message_is_merged_with_the_prompt(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """A trailing user message is merged with the prompt, tool results first."""
    api.script("<summary>ok</summary>")
    entries = entries_from(
        [
            user("start"),
            assistant_tool_use("Bash", {"command": "ls"}, "toolu_9"),
            tool_result("toolu_9", "a.py b.py"),
            user("now summarize please"),
        ]
    )
    summarizer.summarize(entries)
    messages = api.requests[0].messages
    assert_valid(messages, allow_pending_last=False)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    kinds = [b["type"] for b in messages[-1]["content"]]
    assert kinds == ["tool_result", "text", "text"]
    assert messages[-1]["content"][1]["text"] == "now summarize please"
    assert messages[-1]["content"][2]["text"] == compact_prompt()


def test_pending_tool_use_is_left_out(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """Pending tool_use blocks of the last assistant message are dropped from the request."""
    api.script("<summary>a</summary>", "<summary>b</summary>")
    with_text = entries_from([user("go"), assistant_tool_use("Read", {"path": "x"}, "toolu_p", text="Reading x.")])
    summarizer.summarize(with_text)
    only_tool = entries_from(
        [user("go"), assistant_text("ok"), user("more"), assistant_tool_use("Read", {}, "toolu_q")]
    )
    summarizer.summarize(only_tool)

    first, second = (r.messages for r in api.requests)
    assert_valid(first, allow_pending_last=False)
    assert first[1] == {"role": "assistant", "content": [{"type": "text", "text": "Reading x."}]}
    assert "toolu_p" not in repr(first)
    assert_valid(second, allow_pending_last=False)
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert "toolu_q" not in repr(second)


def test_thinking_blocks_are_not_replayed(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """Thinking blocks are left out; a message left empty disappears and roles still alternate."""
    api.script("<summary>ok</summary>")
    thinking = {"type": "thinking", "thinking": "SECRET REASONING", "signature": "sig"}
    entries = entries_from(
        [
            user("q"),
            message("assistant", [thinking], api_message_id="msg_2"),
            assistant_tool_use("Read", {"path": "a"}, "toolu_u", api_message_id="msg_2"),
            tool_result("toolu_u", "data"),
            message("assistant", [thinking], api_message_id="msg_3"),
            user("and then?"),
        ]
    )
    summarizer.summarize(entries)
    request = api.requests[0]
    assert "SECRET REASONING" not in all_text(request)
    assert_valid(request.messages, allow_pending_last=False)
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]


def test_model_defaults_from_env(monkeypatch: pytest.MonkeyPatch, api: FakeAPI) -> None:
    """Model, key and base URL come from the environment when not given."""
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert AnthropicSummarizer(api_key=KEY).model == DEFAULT_MODEL
    monkeypatch.setenv(MODEL_ENV, "claude-from-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
    api.script("<summary>env</summary>")
    s = AnthropicSummarizer(max_retries=0)
    assert s.summarize(entries_from([user("hi")])).text == "env"
    request = api.requests[0]
    assert request.body["model"] == "claude-from-env"
    assert KEY in request.headers.get("authorization", "") + request.headers.get("x-api-key", "")


def test_overloaded_is_retried_then_succeeds(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """529s are retried by the SDK inside one summarize call."""
    api.overload(2).script(RAW_SUMMARY)
    result = summarizer.summarize(entries_from([user("hi"), assistant_text("hello")]))
    assert result.text.startswith("1. Primary Request")
    assert len(api.requests) == 3
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1", "2"]


def test_overloaded_beyond_sdk_retries_is_a_summarizer_error(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """Exhausted SDK retries become a SummarizerError naming the status."""
    api.overload(3)
    with pytest.raises(SummarizerError) as info:
        summarizer.summarize(entries_from([user("hi")]))
    assert not isinstance(info.value, PromptTooLong)
    assert "529" in str(info.value) and "overloaded_error" in str(info.value)
    assert len(api.requests) == 3


def test_prompt_too_long_is_recognized(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """The API's too-long 400 becomes PromptTooLong with both counts parsed."""
    api.max_prompt_tokens = 20
    with pytest.raises(PromptTooLong) as info:
        summarizer.summarize(entries_from([user("hi"), assistant_text("hello")]))
    assert info.value.actual == api.requests[0].estimated_tokens
    assert info.value.maximum == 20
    assert info.value.gap == info.value.actual - 20
    assert len(api.requests) == 1


def test_parse_token_counts() -> None:
    """Counts are parsed with thousands separators; absent counts give None."""
    assert parse_token_counts("prompt is too long: 210,345 tokens > 200000 maximum") == (210_345, 200_000)
    assert parse_token_counts("prompt is too long") == (None, None)


def test_empty_summary_is_an_error(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """An answer with no summary text (analysis only, or no blocks) is an error."""
    api.script("<analysis>only thinking, then the output budget ran out", Reply.blocks([]))
    with pytest.raises(SummarizerError, match="empty summary"):
        summarizer.summarize(entries_from([user("hi")]))
    with pytest.raises(SummarizerError, match="empty summary"):
        summarizer.summarize(entries_from([user("hi")]))


def test_nothing_to_summarize(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """A view with nothing to send raises before any request."""
    with pytest.raises(SummarizerError, match="nothing to summarize"):
        summarizer.summarize(entries_from([boundary()]))
    with pytest.raises(SummarizerError, match="nothing to summarize"):
        summarizer.summarize(entries_from([attachment("file again", reinjected=True)]))
    assert api.requests == []


def test_api_key_never_in_error_text(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """An error body echoing the key is redacted; the key still reached the server."""

    def leaky(request: RecordedRequest) -> Reply:
        credential = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        return Reply.error(401, "authentication_error", f"invalid x-api-key: {credential}")

    api.responder = leaky
    with pytest.raises(SummarizerError) as info:
        summarizer.summarize(entries_from([user("hi")]))
    error = info.value
    assert "401" in str(error) and "authentication_error" in str(error)
    assert KEY not in str(error) and KEY not in repr(error)
    assert error.__cause__ is None
    assert KEY in api.requests[0].headers.get("authorization", "") + api.requests[0].headers.get("x-api-key", "")


def test_connection_error_is_a_summarizer_error_without_key() -> None:
    """An unreachable server gives a SummarizerError without the key."""
    api = start_fake_api()
    dead_url = api.base_url
    api.close()
    s = AnthropicSummarizer("claude-test", api_key=KEY, base_url=dead_url, max_retries=0, timeout=2)
    with pytest.raises(SummarizerError) as info:
        s.summarize(entries_from([user("hi")]))
    assert "summary request failed" in str(info.value) and KEY not in str(info.value)


# ------------------------------------------------------- summarize_with_retry


def tool_ids(request: RecordedRequest) -> set[str]:
    """The tool_use ids present in a recorded request."""
    return {b["id"] for b in all_blocks(request.messages) if b["type"] == "tool_use"}


def test_rounds_to_drop_by_gap_or_share() -> None:
    """Rounds to drop: cover the gap, else 20% (at least one), never the last round."""
    rounds = group_rounds(entries_from(conversation(10)))
    sizes = [sum(e.tokens for e in r) for r in rounds]
    assert len(rounds) == 12
    assert rounds_to_drop(rounds, None) == 3
    assert rounds_to_drop(rounds, 1) == 1
    assert rounds_to_drop(rounds, sizes[0] + 1) == 2
    assert rounds_to_drop(rounds, 10**9) == 11
    assert rounds_to_drop(rounds[:1], 10**9) == 0


def test_prompt_too_long_drops_rounds_covering_the_gap(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """One retry drops the oldest rounds covering the stated gap, then the summary fits."""
    entries = entries_from(conversation(10, words=40))
    rounds = group_rounds(entries)
    kept = [e for r in rounds[4:] for e in r]
    fits = estimate_prompt_tokens(summarizer.build_request(kept, truncated=True))
    api.max_prompt_tokens = fits + 10
    api.script(RAW_SUMMARY)

    result, truncated = summarize_with_retry(summarizer, entries)

    assert truncated and result.text.startswith("1. Primary Request")
    first, second = api.requests
    assert first.estimated_tokens > fits + 10 >= second.estimated_tokens
    assert tool_ids(first) == {f"toolu_r{i:03d}" for i in range(10)}
    assert tool_ids(second) == {f"toolu_r{i:03d}" for i in range(3, 10)}
    assert second.messages[0] == {"role": "user", "content": OMITTED_START}
    assert second.messages[-1]["content"][-1]["text"] == compact_prompt(truncated=True)
    assert_valid(second.messages, allow_pending_last=False)


def unstated_too_long(fits_from_round: int) -> Any:
    """A responder answering a count-less prompt-too-long until old rounds are gone."""

    def respond(request: RecordedRequest) -> Reply:
        if f"toolu_r{fits_from_round - 1:03d}" in tool_ids(request):
            return Reply.error(400, "invalid_request_error", "prompt is too long")
        return Reply.text(RAW_SUMMARY)

    return respond


def test_unstated_gap_drops_a_fifth_of_the_rounds_per_retry(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """Without counts each retry drops 20% of the remaining rounds, up to three retries."""
    entries = entries_from(conversation(10))
    api.responder = unstated_too_long(fits_from_round=6)
    result, truncated = summarize_with_retry(summarizer, entries)
    assert truncated and result.text
    ids = [tool_ids(r) for r in api.requests]
    assert len(ids) == 4
    assert [min(i) if i else None for i in ids] == ["toolu_r000", "toolu_r002", "toolu_r004", "toolu_r006"]


def test_retry_limit_then_compaction_failed(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """A lower retry limit ends in CompactionFailed after 1 + max_retries requests."""
    entries = entries_from(conversation(10))
    api.responder = unstated_too_long(fits_from_round=6)
    with pytest.raises(CompactionFailed, match="after 2 retries"):
        summarize_with_retry(summarizer, entries, max_retries=2)
    assert len(api.requests) == 3


def test_nothing_fits_exactly_one_plus_three_requests(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """When nothing fits: exactly 1 + 3 requests, then CompactionFailed naming the retries."""
    api.max_prompt_tokens = 50
    api.script(RAW_SUMMARY)
    entries = entries_from(conversation(10))
    with pytest.raises(CompactionFailed) as info:
        summarize_with_retry(summarizer, entries)
    assert len(api.requests) == 1 + 3
    assert "after 3 retries" in str(info.value)
    assert isinstance(info.value, SummarizerError)
    assert isinstance(info.value.__cause__, PromptTooLong)
    last = api.requests[-1]
    assert tool_ids(last) == set()
    assert [m["role"] for m in last.messages] == ["user", "assistant", "user"]
    assert api.pending == 1


def test_other_errors_are_not_retried_by_compaction(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """Errors other than too-long propagate without a compaction retry."""
    api.script(Reply.error(403, "permission_error", "no access"))
    with pytest.raises(SummarizerError, match="403") as info:
        summarize_with_retry(summarizer, entries_from(conversation(3)))
    assert not isinstance(info.value, CompactionFailed)
    assert len(api.requests) == 1


def test_no_retry_needed_is_not_truncated(api: FakeAPI, summarizer: AnthropicSummarizer) -> None:
    """A request that fits is sent once and not marked truncated."""
    api.script(RAW_SUMMARY)
    result, truncated = summarize_with_retry(summarizer, entries_from(conversation(3)), custom_instructions="X")
    assert not truncated and result.raw == RAW_SUMMARY
    assert api.requests[0].messages[-1]["content"][-1]["text"] == compact_prompt("X")
