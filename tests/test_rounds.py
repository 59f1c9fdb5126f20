"""API rounds and split adjustment: every adjusted split leaves valid API requests."""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore.compaction.rounds import (
    adjust_split,
    group_rounds,
    is_valid_split,
    kept_suffix_start,
    valid_splits,
)
from sessionstore.storage.core.types import ViewEntry
from sessionstore.storage.records.view import as_blocks, to_api_messages
from tests.support.convo import Convo, text, thinking, tool_result, tool_use


# --- an independent validity check of a Messages-API request -------------------


def _ids(message: dict[str, Any], kind: str, key: str) -> list[str]:
    """Ids of the `kind` blocks of one API message."""
    return [b[key] for b in as_blocks(message["content"]) if b.get("type") == kind]


def request_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Every way `messages` breaks the Messages-API rules (empty list: valid)."""
    problems: list[str] = []
    if not messages:
        return problems
    if messages[0]["role"] != "user":
        problems.append("first message is not a user message")
    for i, message in enumerate(messages):
        if i and message["role"] == messages[i - 1]["role"]:
            problems.append(f"message {i}: roles do not alternate")
        blocks = as_blocks(message["content"])
        if message["role"] == "user":
            kinds = [b.get("type") == "tool_result" for b in blocks]
            if kinds != sorted(kinds, reverse=True):
                problems.append(f"message {i}: tool_result after another block")
            asked = set(_ids(messages[i - 1], "tool_use", "id")) if i else set()
            for use_id in _ids(message, "tool_result", "tool_use_id"):
                if use_id not in asked:
                    problems.append(f"message {i}: orphan tool_result {use_id}")
        else:
            uses = set(_ids(message, "tool_use", "id"))
            if i + 1 < len(messages):
                answered = set(_ids(messages[i + 1], "tool_result", "tool_use_id"))
                if uses - answered:
                    problems.append(f"message {i}: unanswered tool_use {sorted(uses - answered)}")
    return problems


def reference_valid(entries: Sequence[ViewEntry], index: int) -> bool:
    """A split is valid when both sides are valid requests and no response is torn."""
    if index in (0, len(entries)):
        return True
    older, newer = entries[:index], entries[index:]
    older_ids = {e.api_message_id for e in older if e.api_message_id}
    newer_ids = {e.api_message_id for e in newer if e.api_message_id}
    if older_ids & newer_ids:
        return False
    older_messages = to_api_messages(older)
    newer_messages = to_api_messages(newer)
    if newer_messages and older_messages and older_messages[-1]["role"] == "assistant":
        last_uses = set(_ids(older_messages[-1], "tool_use", "id"))
        if last_uses:
            return False
    return not request_problems(older_messages) and not request_problems(newer_messages)


# --- random tool-using conversations --------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[ViewEntry]:
    """A tool-using conversation: parallel calls, split responses, interleaved text."""
    convo = Convo()

    def flip(percent: int) -> bool:
        """A biased coin: True with probability `percent` / 100."""
        return draw(st.integers(0, 99)) < percent

    def maybe_system() -> None:
        """Sometimes insert a system notice (never sent, must not matter)."""
        if flip(15):
            convo.system("notice", "hook output")

    maybe_system()
    convo.user("start the task")
    if flip(30):
        convo.user([text("and also this")])
    turns = draw(st.integers(1, 7))
    for turn in range(turns):
        maybe_system()
        api = None if flip(15) else f"msg_{turn}"
        tool_api = f"msg_{turn}b" if api and flip(15) else api
        calls = [f"t{turn}_{k}" for k in range(draw(st.integers(0, 3)))]
        head: list[dict[str, Any]] = []
        if flip(50):
            head.append(thinking("let me think"))
        if flip(50) or not calls:
            head.append(text(f"working on step {turn}"))
        layout = draw(st.sampled_from(["together", "separate", "interleaved", "merged"]))
        pending = turn == turns - 1 and calls and flip(30)
        if layout == "merged" and tool_api == api:
            convo.assistant(head + [tool_use(c, "Bash", command="ls") for c in calls], api)
        else:
            for block in head:
                convo.assistant([block], api)
                maybe_system()
        if layout in ("together",) and calls:
            convo.assistant([tool_use(c, "Read", file_path=f"/{c}.py") for c in calls], tool_api)
        if layout in ("separate", "interleaved", "merged") and not (layout == "merged" and tool_api == api):
            for call in calls:
                convo.assistant([tool_use(call, "Grep", pattern="x")], tool_api)
                maybe_system()
                if layout == "interleaved" and not pending:
                    convo.user([tool_result(call, "found", is_error=flip(10))])
                    maybe_system()
        if pending:
            break
        if layout != "interleaved" and calls:
            order = draw(st.permutations(calls))
            if flip(50):
                blocks = [tool_result(c, "ok") for c in order]
                convo.user(blocks + ([text("note from user")] if flip(30) else []))
            else:
                for call in order:
                    convo.user([tool_result(call, "ok")])
                    maybe_system()
        if not calls or flip(30):
            convo.user(f"user says {turn}")
        maybe_system()
    return convo.entries


FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(conversations())
def test_generated_conversations_are_valid_requests(entries: list[ViewEntry]) -> None:
    """Sanity: the generator itself produces valid views."""
    assert request_problems(to_api_messages(entries)) == []


@FAST
@given(conversations())
def test_valid_splits_match_reference(entries: list[ViewEntry]) -> None:
    """The O(n) mask agrees with the brute-force definition at every index."""
    mask = valid_splits(entries)
    assert len(mask) == len(entries) + 1
    for index in range(len(entries) + 1):
        assert mask[index] == reference_valid(entries, index), index
        assert is_valid_split(entries, index) == mask[index]


@FAST
@given(conversations())
def test_every_adjusted_split_leaves_valid_requests(entries: list[ViewEntry]) -> None:
    """From every proposed split, both directions land on the nearest valid split."""
    mask = valid_splits(entries)
    for proposed in range(len(entries) + 1):
        for direction in ("earlier", "later"):
            index = adjust_split(entries, proposed, direction=direction)
            between = range(index, proposed) if direction == "earlier" else range(proposed + 1, index + 1)
            assert (index <= proposed) if direction == "earlier" else (index >= proposed)
            assert not any(mask[k] for k in between if k != index)
            kept = to_api_messages(entries[index:])
            dropped = to_api_messages(entries[:index])
            assert request_problems(kept) == [], (proposed, direction, index)
            assert request_problems(dropped) == [], (proposed, direction, index)
            older = {e.api_message_id for e in entries[:index] if e.api_message_id}
            assert not older & {e.api_message_id for e in entries[index:] if e.api_message_id}


@FAST
@given(conversations())
def test_rounds_partition_the_view(entries: list[ViewEntry]) -> None:
    """Rounds concatenate back to the view; none tears a response or a tool call."""
    rounds = group_rounds(entries)
    assert list(itertools.chain.from_iterable(rounds)) == entries
    seen_ids: set[str] = set()
    uses_so_far: set[str] = set()
    for number, group in enumerate(rounds):
        sent = [e for e in group if e.role != "system"]
        if number:
            assert sent and sent[0].role == "assistant"
            assert group[0].role == "assistant"
        ids = {e.api_message_id for e in group if e.api_message_id}
        assert not ids & seen_ids
        seen_ids |= ids
        uses = {b["id"] for e in group for b in as_blocks(e.content) if b.get("type") == "tool_use"}
        results = {b["tool_use_id"] for e in group for b in as_blocks(e.content) if b.get("type") == "tool_result"}
        assert results <= uses
        assert not results & uses_so_far
        uses_so_far |= uses


@FAST
@given(conversations(), st.integers(0, 400), st.integers(0, 6), st.data())
def test_kept_suffix_start_is_valid(
    entries: list[ViewEntry], min_tokens: int, min_texts: int, data: st.DataObject
) -> None:
    """The kept suffix is a valid request, never starts before the floor, and only grows."""
    n = len(entries)
    floor_index = data.draw(st.integers(0, n))
    start = data.draw(st.integers(floor_index, n))
    index = kept_suffix_start(entries, min_tokens, min_texts, 10 * min_tokens + 1, floor_index, start)
    assert floor_index <= index <= n
    assert is_valid_split(entries, index)
    assert request_problems(to_api_messages(entries[index:])) == []
    if is_valid_split(entries, floor_index):
        assert index <= start


# --- concrete cases ---------------------------------------------------------------


def _simple() -> list[ViewEntry]:
    """U, A(tool_use), U(result), A(text), U(text)."""
    c = Convo()
    c.user("fix the bug")
    c.assistant([tool_use("t1", "Read", file_path="/a.py")], "m1")
    c.user([tool_result("t1", "code")])
    c.assistant([text("done")], "m2")
    c.user("thanks")
    return c.entries


def test_split_convention_on_a_small_view() -> None:
    """Only splits whose newer side opens with a clean user message are valid."""
    entries = _simple()
    assert [i for i in range(6) if is_valid_split(entries, i)] == [0, 4, 5]
    assert adjust_split(entries, 3, direction="earlier") == 0
    assert adjust_split(entries, 3, direction="later") == 4
    assert adjust_split(entries, 4) == 4
    assert adjust_split(entries, -5) == 0
    assert adjust_split(entries, 99, direction="later") == 5
    with pytest.raises(ValueError):
        adjust_split(entries, 1, direction="sideways")  # type: ignore[arg-type]


def test_thinking_and_tool_use_pieces_stay_together() -> None:
    """A split between two pieces of one streamed response moves off it."""
    c = Convo()
    c.user("go")
    c.assistant([thinking("hmm")], "m1")
    c.assistant([tool_use("t1", "Bash", command="ls")], "m1")
    c.user([tool_result("t1", "a b")])
    c.assistant([tool_use("t2", "Bash", command="pwd")], "m1")
    c.user([tool_result("t2", "/")])
    c.user("next please")
    c.assistant([text("ok")], "m2")
    entries = c.entries
    assert [i for i in range(len(entries) + 1) if is_valid_split(entries, i)] == [0, 6, 8]
    assert adjust_split(entries, 4, direction="later") == 6
    assert [len(g) for g in group_rounds(entries)] == [1, 6, 1]


def test_system_entries_stay_in_their_round() -> None:
    """A system notice between a result and the next response ends the earlier round."""
    c = Convo()
    c.system("notice", "session start")
    c.user("hi")
    c.assistant([text("hello")], "m1")
    c.system("snip_marker")
    c.user("do it")
    c.system("notice", "hook")
    c.assistant([text("doing")], "m2")
    rounds = group_rounds(c.entries)
    assert [[e.role for e in g] for g in rounds] == [
        ["system", "user"],
        ["assistant", "system", "user", "system"],
        ["assistant"],
    ]
    assert is_valid_split(c.entries, 3) and is_valid_split(c.entries, 4)


def test_kept_suffix_start_widens_to_minimums() -> None:
    """Widening stops at the first index meeting both minimums, or at max / floor."""
    c = Convo()
    for k in range(10):
        c.user("u" * 400 + str(k))
        c.assistant("a" * 400 + str(k), f"m{k}")
    entries = c.entries
    per = entries[0].tokens
    assert kept_suffix_start(entries, per * 3, 1, 10**6, 0, 20) == 16
    assert kept_suffix_start(entries, 1, 5, 10**6, 0, 20) == 14
    assert kept_suffix_start(entries, 10**6, 5, per * 4, 0, 20) == 16
    assert kept_suffix_start(entries, 10**6, 50, 10**7, 6, 20) == 6
    assert kept_suffix_start(entries, 0, 0, 10**6, 0, 18) == 18
    assert kept_suffix_start(entries, 0, 0, 10**6) == 20


def test_kept_suffix_start_pulls_in_the_tool_use() -> None:
    """If widening stops on a tool result, the split moves back to include its call."""
    entries = _simple()
    assert kept_suffix_start(entries, 1, 1, 10**6, 0, 2) == 0
    assert kept_suffix_start(entries, 1, 1, 10**6, 1, 2) == 4
