"""Layer 2: snip removes low-value messages where the view stays valid, behind a marker."""

from __future__ import annotations

import pytest

from sessionstore.compaction.pipeline import Pipeline
from sessionstore.compaction.snip import is_acknowledgement, is_trivial_output
from sessionstore import SessionStore
from tests.support.layers import (
    assert_transcript_kept,
    assert_valid_view,
    assistant,
    tool_round,
    transcript,
    user,
)


@pytest.fixture
def pipeline(store: SessionStore) -> Pipeline:
    return Pipeline(store, config=store.config.replace(microcompact_enabled=False))


def _view_uuids(session) -> list[str]:
    return [e.uuid for e in session.active_entries()]


def _markers(session) -> list:
    return [e for e in session.active_entries() if e.subtype == "snip_marker"]


@pytest.mark.parametrize("text", ["ok", "OK.", "thanks!", "Thank you", "got it", "perfect 👍", "  okay  "])
def test_bare_acknowledgements(text: str) -> None:
    assert is_acknowledgement(text)


@pytest.mark.parametrize(
    "text", ["ok?", "ok, but why does it fail?", "thanks, now run the tests", "yes", "ok do it", "no"]
)
def test_not_acknowledgements(text: str) -> None:
    assert not is_acknowledgement(text)


@pytest.mark.parametrize(
    "content, trivial",
    [
        ("", True),
        ("   \n", True),
        ("OK", True),
        ("Done.", True),
        ("(no output)", True),
        (None, True),
        ([{"type": "text", "text": "Success"}], True),
        ("3 files changed", False),
        ("error: nope", False),
    ],
)
def test_trivial_outputs(content, trivial: bool) -> None:
    assert is_trivial_output({"type": "tool_result", "tool_use_id": "t", "content": content}) is trivial
    assert not is_trivial_output({"type": "tool_result", "tool_use_id": "t", "content": content, "is_error": True})


def test_ack_between_assistant_and_user_is_removed_and_tokens_reach_the_count(
    store: SessionStore, pipeline: Pipeline
) -> None:
    s = store.create_session()
    stored = s.append_many(
        [
            user("Fix the failing test"),
            assistant("Fixed it."),
            user("ok"),
            user("Now update the docs"),
            assistant("Updated.", usage={"input_tokens": 5_000, "output_tokens": 100}),
        ]
    )
    ack = stored[2]
    before = transcript(s)
    prepared = pipeline.prepare(s)
    snip = prepared.report["snip"]
    assert snip.acted and snip.items == 1
    assert snip.details["rules"] == {"ack": 1}
    assert snip.details["tokens_freed"] == ack.tokens
    assert ack.uuid not in _view_uuids(s)
    (marker,) = _markers(s)
    assert snip.tokens_before - snip.tokens_after == ack.tokens - marker.tokens
    assert marker.message.metadata["removed_uuids"] == [ack.uuid]
    assert marker.message.metadata["tokens_freed"] == ack.tokens
    assert marker.message.metadata["usage_credit"] == ack.tokens
    assert prepared.tokens == 5_100 - ack.tokens
    assert prepared.messages == s.active_view()
    assert_valid_view(prepared.messages)
    added = assert_transcript_kept(s, before)
    assert [m["subtype"] for m in added] == ["snip_marker"]
    again = pipeline.prepare(s)
    assert not again.report["snip"].acted
    assert again.tokens == prepared.tokens


@pytest.mark.parametrize(
    "messages",
    [
        [user("ok")],
        [user("ok"), assistant("Hello! What can I do?")],
        [user("Run it"), assistant("Shall I also deploy?"), user("ok"), assistant("Deploying.")],
        [user("Run it"), assistant("Done."), user("thanks")],
        [user("Run it"), assistant("Done."), user("ok, but why did it fail before?"), user("and the docs?")],
        [user("Run it"), assistant("Done."), user("thanks, now run the linter"), user("please")],
    ],
    ids=["only-message", "first-then-assistant", "between-assistants", "last", "question", "more-content"],
)
def test_ack_rule_does_not_fire(store: SessionStore, pipeline: Pipeline, messages: list) -> None:
    s = store.create_session()
    s.append_many(messages)
    prepared = pipeline.prepare(s)
    assert not prepared.report["snip"].acted
    assert _markers(s) == []
    assert_valid_view(prepared.messages)


def test_ack_becomes_removable_once_a_user_message_follows(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    stored = s.append_many([user("Do X"), assistant("Done."), user("ok")])
    assert not pipeline.prepare(s).report["snip"].acted
    s.append(user("Now do Y"))
    prepared = pipeline.prepare(s)
    assert prepared.report["snip"].details["rules"] == {"ack": 1}
    assert stored[2].uuid not in _view_uuids(s)
    assert_valid_view(prepared.messages)


def test_ack_first_before_a_user_message_is_removed(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    stored = s.append_many([user("thanks"), user("Please look at the build"), assistant("Looking.")])
    prepared = pipeline.prepare(s)
    assert prepared.report["snip"].details["rules"] == {"ack": 1}
    assert prepared.messages[0] == {"role": "user", "content": "Please look at the build"}
    assert stored[0].uuid not in _view_uuids(s)


def _build_rounds(s, trivial_round: list, *, last: bool = False) -> list:
    """A request, the round under test, an informative round, a final text and a new request."""
    head = s.append_many([user("Set up the build directory")])
    middle = s.append_many(trivial_round)
    if last:
        return middle
    s.append_many(
        [
            *tool_round("t_read", "def main():\n    return 1\n", name="Read"),
            assistant("The build directory is ready."),
            user("Now run the tests"),
        ]
    )
    return head + middle


def test_trivial_round_is_removed_whole(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    stored = _build_rounds(s, tool_round("t_mkdir", "", name="Bash", tool_input={"command": "mkdir -p build"}))
    before = transcript(s)
    prepared = pipeline.prepare(s)
    assert prepared.report["snip"].details["rules"] == {"trivial_round": 2}
    view = _view_uuids(s)
    assert stored[1].uuid not in view and stored[2].uuid not in view
    assert "t_mkdir" not in str(prepared.messages)
    assert "t_read" in str(prepared.messages)
    assert_valid_view(prepared.messages)
    assert_transcript_kept(s, before)


@pytest.mark.parametrize(
    "round_messages",
    [
        tool_round("t1", "", name="Bash", tool_input={"command": "false"}, is_error=True),
        tool_round("t1", "Created 3 files", name="Bash", tool_input={"command": "make"}),
        tool_round(
            "t1",
            "File written successfully",
            name="Write",
            tool_input={"file_path": "a.py", "content": "x = 1\n" * 100},
        ),
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Creating the folder."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "mkdir b"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}]},
        ],
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "mkdir b"}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": ""},
                    {"type": "text", "text": "also, use tabs"},
                ],
            },
        ],
    ],
    ids=["error", "informative-output", "large-input", "assistant-text", "user-text"],
)
def test_trivial_round_rule_does_not_fire(store: SessionStore, pipeline: Pipeline, round_messages: list) -> None:
    s = store.create_session()
    _build_rounds(s, round_messages)
    prepared = pipeline.prepare(s)
    assert not prepared.report["snip"].acted
    assert "t1" in str(prepared.messages)


def test_last_round_is_never_removed(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    _build_rounds(s, tool_round("t_last", "", name="Bash", tool_input={"command": "touch x"}), last=True)
    prepared = pipeline.prepare(s)
    assert not prepared.report["snip"].acted
    assert_valid_view(prepared.messages)


def test_repeated_notices_keep_the_first(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    notice = {"role": "system", "subtype": "hook_notice", "content": "Hook lint: passed"}
    reminder = {"role": "user", "is_meta": True, "content": "<system-reminder>The todo list is empty</system-reminder>"}
    stored = s.append_many(
        [
            user("q1"),
            notice,
            assistant("a1"),
            reminder,
            user("q2"),
            assistant("a2"),
            dict(notice),
            dict(reminder),
            user("q3"),
            assistant("a3"),
            {"role": "system", "subtype": "hook_notice", "content": "other"},
        ]
    )
    prepared = pipeline.prepare(s)
    assert prepared.report["snip"].details["rules"] == {"notice": 2}
    view = _view_uuids(s)
    assert stored[1].uuid in view and stored[3].uuid in view and stored[10].uuid in view
    assert stored[6].uuid not in view and stored[7].uuid not in view
    assert_valid_view(prepared.messages)
    assert sum(1 for m in prepared.messages for b in m["content"] if "todo list" in str(b)) == 1


def test_markers_are_never_notices(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append_many([user("Do X"), assistant("Done."), user("ok"), user("Then Y"), assistant("Done too.")])
    pipeline.prepare(s)
    s.append_many([user("ok"), user("And Z"), assistant("Z done.")])
    pipeline.prepare(s)
    markers = _markers(s)
    assert len(markers) == 2
    assert markers[0].content == markers[1].content


def test_snip_disabled(store: SessionStore) -> None:
    pipeline = Pipeline(store, config=store.config.replace(snip_enabled=False))
    s = store.create_session()
    s.append_many([user("Do X"), assistant("Done."), user("ok"), user("Then Y")])
    prepared = pipeline.prepare(s)
    assert prepared.report["snip"].details == {"skipped": "disabled"}
    assert len(s.active_entries()) == 4
