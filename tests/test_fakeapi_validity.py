"""The test-support pieces: the Messages-API validity checker and the fake API server.

The server is exercised through the real anthropic SDK (plain, streamed,
tool_use, retries, errors), since later tests rely on it speaking the API
exactly as the SDK expects.
"""

from __future__ import annotations

from typing import Any, Iterator, cast

import anthropic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.fakeapi import (
    FakeAPI,
    RecordedRequest,
    Reply,
    estimate_prompt_tokens,
    estimate_tokens,
    start_fake_api,
)
from tests.support.validity import assert_valid, check_messages

KEY = "sk-ant-test-fakeapi-0001"


def text(t: str) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": t}


def use(tool_id: str, name: str = "Read") -> dict[str, Any]:
    """A tool_use block."""
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"path": "a.py"}}


def result(tool_id: str, content: Any = "ok") -> dict[str, Any]:
    """A tool_result block."""
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content}


def u(*blocks: Any) -> dict[str, Any]:
    """A user message (a single string argument stays a string)."""
    if len(blocks) == 1 and isinstance(blocks[0], str):
        return {"role": "user", "content": blocks[0]}
    return {"role": "user", "content": list(blocks)}


def a(*blocks: Any) -> dict[str, Any]:
    """An assistant message."""
    if len(blocks) == 1 and isinstance(blocks[0], str):
        return {"role": "assistant", "content": blocks[0]}
    return {"role": "assistant", "content": list(blocks)}


VALID_TOOL_ROUND = [
    u("fix the bug"),
    a(text("looking"), use("t1"), use("t2")),
    u(result("t1"), result("t2", [text("line 1")]), text("also check b.py")),
    a("done"),
]


# ---------------------------------------------------------------- checker


def test_valid_conversations_have_no_problems() -> None:
    """Plain turns, parallel tool rounds, images and thinking pass the checker."""
    assert check_messages([u("hi")]) == []
    assert check_messages([u("hi"), a("hello"), u("bye")]) == []
    assert check_messages(VALID_TOOL_ROUND) == []
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert check_messages([u(image, text("what is this?")), a(thinking, use("t9"))]) == []
    assert_valid(VALID_TOOL_ROUND)


def test_pending_tool_use_in_last_message_depends_on_flag() -> None:
    """An unanswered tool_use in the final message is allowed only with allow_pending_last."""
    pending = [u("read a.py"), a(text("sure"), use("t1"))]
    assert check_messages(pending) == []
    assert_valid(pending, allow_pending_last=True)
    problems = check_messages(pending, allow_pending_last=False)
    assert len(problems) == 1 and "unanswered tool_use" in problems[0]
    with pytest.raises(AssertionError, match="unanswered tool_use"):
        assert_valid(pending, allow_pending_last=False)


INVALID_CASES: list[tuple[str, list[Any], str]] = [
    ("empty", [], "empty"),
    ("first is assistant", [a("hi"), u("hello")], "first message has role 'assistant'"),
    ("two users in a row", [u("a"), u("b")], "two user messages in a row"),
    ("two assistants in a row", [u("a"), a("b"), a("c")], "two assistant messages in a row"),
    ("system role", [u("a"), {"role": "system", "content": "x"}], "role 'system'"),
    ("empty string content", [u("")], "empty string content"),
    ("blank string content", [u("   ")], "empty string content"),
    ("empty content list", [u("a"), {"role": "assistant", "content": []}], "empty content list"),
    ("content not str or list", [{"role": "user", "content": 3}], "neither a string nor a list"),
    ("unknown block type", [u({"type": "banana"})], "unknown block type 'banana'"),
    ("empty text block", [u(text(""))], "empty text block"),
    ("tool_use in user", [u(use("t1"))], "tool_use block in a user message"),
    ("tool_result in assistant", [u("a"), a(result("t1"))], "tool_result block in an assistant message"),
    (
        "tool_result answering nothing",
        [u("a"), a("no tools"), u(result("t1"))],
        "answers no tool_use of the previous message",
    ),
    (
        "tool_result answering an older message",
        [u("a"), a(use("t1")), u(result("t1")), a("x"), u(result("t1"))],
        "answers no tool_use of the previous message",
    ),
    (
        "tool_use not answered",
        [u("a"), a(use("t1"), use("t2")), u(result("t1")), a("x")],
        "tool_use ['t2'] not answered",
    ),
    (
        "tool_use followed by plain user text",
        [u("a"), a(use("t1")), u("never mind")],
        "not answered in the next message",
    ),
    (
        "duplicate tool_use ids",
        [u("a"), a(use("t1")), u(result("t1")), a(use("t1")), u(result("t1"))],
        "duplicate tool_use id 't1'",
    ),
    (
        "tool_result after text",
        [u("a"), a(use("t1")), u(text("here"), result("t1"))],
        "tool_result after a non-tool_result block",
    ),
    (
        "two results for one tool_use",
        [u("a"), a(use("t1")), u(result("t1"), result("t1"))],
        "several tool_result blocks",
    ),
    (
        "tool_use without input object",
        [u("a"), a({"type": "tool_use", "id": "t", "name": "R", "input": 1})],
        "input",
    ),
    (
        "bad block inside tool_result",
        [u("a"), a(use("t1")), u(result("t1", [{"type": "tool_use"}]))],
        "not allowed in a tool_result",
    ),
]


@pytest.mark.parametrize("messages,expected", [c[1:] for c in INVALID_CASES], ids=[c[0] for c in INVALID_CASES])
def test_each_invalid_case_is_reported(messages: list[Any], expected: str) -> None:
    """Each broken request is reported with the matching problem, and assert_valid fails."""
    problems = check_messages(messages)
    assert any(expected in p for p in problems), problems
    with pytest.raises(AssertionError):
        assert_valid(messages)


@st.composite
def valid_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Conversations valid by construction: text turns and parallel tool rounds."""
    messages = [u(draw(st.text(min_size=1).filter(str.strip)))]
    counter = 0
    for kind in draw(st.lists(st.sampled_from(["text", "tools"]), max_size=8)):
        if kind == "text":
            messages += [a("answer"), u("next question")]
            continue
        ids = [f"t{counter + i}" for i in range(draw(st.integers(1, 3)))]
        counter += len(ids)
        messages += [a(*[use(i) for i in ids]), u(*[result(i) for i in ids])]
    return messages


@settings(max_examples=60, deadline=None)
@given(valid_conversations(), st.data())
def test_generated_valid_conversations_pass_and_losing_a_result_fails(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Generated valid conversations pass; removing one tool_result is always caught."""
    assert check_messages(messages) == []
    with_results = [i for i, m in enumerate(messages) if m["role"] == "user" and isinstance(m["content"], list)]
    if not with_results:
        return
    i = data.draw(st.sampled_from(with_results))
    broken = [dict(m) for m in messages]
    broken[i] = dict(broken[i], content=broken[i]["content"][1:] or [text("gone")])
    assert check_messages(broken) != []


# ---------------------------------------------------------------- server


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """A fresh fake API server for one test."""
    with start_fake_api() as server:
        yield server


@pytest.fixture
def client(api: FakeAPI) -> Iterator[anthropic.Anthropic]:
    """A real SDK client pointed at the fake server, with fast retries."""
    sdk = anthropic.Anthropic(api_key=KEY, base_url=api.base_url, max_retries=2, timeout=5)
    yield sdk
    sdk.close()


def ask(client: anthropic.Anthropic, messages: list[dict[str, Any]], **extra: Any) -> Any:
    """A non-streamed messages.create call with small defaults."""
    return client.messages.create(model="claude-test", max_tokens=256, messages=cast(Any, messages), **extra)


def open_stream(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> Any:
    """A messages.stream context manager with small defaults."""
    return client.messages.stream(model="claude-test", max_tokens=256, messages=cast(Any, messages))


def dumped(message: Any) -> list[dict[str, Any]]:
    """The content blocks of an SDK message as plain dicts (unset fields left out)."""
    return [block.model_dump(exclude_none=True) for block in message.content]


def test_plain_text_reply_and_recorded_request(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """A non-streamed reply parses in the SDK; the request and its usage figures are recorded."""
    api.script("Hello from the fake API.")
    message = ask(client, [u("hi")], system="be brief")
    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello from the fake API."
    assert message.stop_reason == "end_turn"
    assert message.model == "claude-test"
    (request,) = api.requests
    assert request.path == "/v1/messages" and request.method == "POST"
    assert request.body["messages"] == [u("hi")]
    assert request.system == "be brief" and not request.stream
    assert request.headers["anthropic-version"]
    assert KEY in (request.headers.get("x-api-key", "") + request.headers.get("authorization", ""))
    expected_in = estimate_prompt_tokens({"system": "be brief", "messages": [u("hi")]})
    assert message.usage.input_tokens == expected_in == request.estimated_tokens
    assert message.usage.output_tokens == estimate_tokens([text("Hello from the fake API.")])


def test_streamed_text_arrives_in_several_deltas(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """A streamed text reply arrives in several deltas and accumulates to the scripted text."""
    answer = "A streamed answer that is long enough to be cut into several deltas."
    api.script(answer)
    with open_stream(client, [u("hi")]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 2 and "".join(pieces) == answer
    assert dumped(final) == [text(answer)]
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == api.requests[0].estimated_tokens
    assert final.usage.output_tokens == estimate_tokens([text(answer)])
    assert api.requests[0].stream


def test_streamed_tool_use_rebuilds_input_json(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """Streamed parallel tool_use blocks rebuild their input from input_json deltas."""
    tool_input = {"command": "pytest -q tests/", "timeout": 120, "env": {"A": "1"}}
    api.script(Reply.tool_uses([("Bash", tool_input, "toolu_a"), ("Read", {"path": "x.py"})], text="Running tests."))
    with open_stream(client, [u("run tests")]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert "input_json" in kinds
    blocks = dumped(final)
    generated_id = blocks[2]["id"]
    assert generated_id.startswith("toolu_")
    assert blocks == [
        text("Running tests."),
        {"type": "tool_use", "id": "toolu_a", "name": "Bash", "input": tool_input},
        {"type": "tool_use", "id": generated_id, "name": "Read", "input": {"path": "x.py"}},
    ]
    assert final.stop_reason == "tool_use"


def test_thinking_blocks_stream_with_signature(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """A thinking block streams its text and signature."""
    api.script(Reply.blocks([{"type": "thinking", "thinking": "let me think", "signature": "sig1"}, text("42")]))
    with open_stream(client, [u("q")]) as stream:
        final = stream.get_final_message()
    assert dumped(final) == [
        {"type": "thinking", "thinking": "let me think", "signature": "sig1"},
        text("42"),
    ]


def test_agent_loop_tool_turns_then_text(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """An agent loop runs two tool turns then ends on text; every request is valid."""
    api.script(
        Reply.tool_use("Read", {"path": "a.py"}),
        Reply.tool_use("Edit", {"path": "a.py", "old": "x", "new": "y"}, text="Fixing."),
        "All fixed.",
    )
    messages: list[dict[str, Any]] = [u("fix a.py")]
    for _ in range(5):
        reply = ask(client, messages)
        messages.append({"role": "assistant", "content": dumped(reply)})
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            break
        messages.append(u(*[result(c.id, f"{c.name} ok") for c in calls]))
    assert messages[-1]["content"][0]["text"] == "All fixed."
    assert len(api.requests) == 3
    assert [len(r.messages) for r in api.requests] == [1, 3, 5]
    for request in api.requests:
        assert_valid(request.messages)
    assert api.pending == 0


def test_overloaded_is_retried_by_the_sdk(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """Two 529s are retried by the SDK, then the scripted reply arrives."""
    api.overload(2).script("finally")
    message = ask(client, [u("hi")])
    assert message.content[0].text == "finally"
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1", "2"]


def test_overloaded_beyond_retries_raises(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """More 529s than SDK retries surface as an APIStatusError; the script keeps the rest."""
    api.overload(3).script("never reached")
    with pytest.raises(anthropic.APIStatusError) as info:
        ask(client, [u("hi")])
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    assert len(api.requests) == 3 and api.pending == 1


def test_prompt_too_long_states_counts(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """Over max_prompt_tokens the server answers the API's 400 with both counts."""
    api.max_prompt_tokens = 10
    api.script("unused")
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(client, [u("a question long enough to be over ten tokens of estimate")])
    tokens = api.requests[0].estimated_tokens
    assert info.value.api_message == f"prompt is too long: {tokens} tokens > 10 maximum"
    assert len(api.requests) == 1 and api.pending == 1


def test_invalid_requests_are_rejected_like_the_api(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """An invalid request gets a 400 naming the problem and consumes no scripted reply."""
    api.script("unused")
    with pytest.raises(anthropic.BadRequestError) as info:
        ask(client, [u("a"), a(use("t1")), u("no result")])
    assert "not answered" in (info.value.api_message or "")
    assert api.pending == 1


def test_responder_and_unscripted_requests() -> None:
    """A responder answers when the queue is empty; None falls to the default, else a 400."""

    def echo(request: RecordedRequest) -> str | None:
        last = request.messages[-1]["content"]
        return None if last == "silence" else f"echo: {last}"

    with start_fake_api(responder=echo) as api:
        sdk = anthropic.Anthropic(api_key=KEY, base_url=api.base_url, max_retries=0)
        assert ask(sdk, [u("ping")]).content[0].text == "echo: ping"
        with pytest.raises(anthropic.BadRequestError, match="no scripted reply"):
            ask(sdk, [u("silence")])
        api.default = "fallback"
        assert ask(sdk, [u("silence")]).content[0].text == "fallback"
        sdk.close()


def test_scripted_error_status_and_count_tokens(api: FakeAPI, client: anthropic.Anthropic) -> None:
    """A scripted 401 maps to AuthenticationError; count_tokens answers the estimate."""
    api.script(Reply.error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(anthropic.AuthenticationError):
        ask(client, [u("hi")])
    count = client.messages.count_tokens(model="claude-test", messages=cast(Any, [u("hello there")]))
    assert count.input_tokens == estimate_prompt_tokens({"messages": [u("hello there")]})
    assert [r.path for r in api.requests] == ["/v1/messages", "/v1/messages/count_tokens"]
    assert len(api.message_requests) == 1
