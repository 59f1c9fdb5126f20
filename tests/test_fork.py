"""Session.fork: a new session holding a view the parent had, with its lineage, on both engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionstore import MessageNotFound, SessionStore, SessionStoreError
from sessionstore.compaction.engine import compact, make_summarizer
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.interchange.importing import import_file
from sessionstore.storage.read import history as hist
from sessionstore.storage.upkeep.doctor import check
from sessionstore.storage.write.fork import InvalidForkPoint, ancestry, forks_of, lineage
from sessionstore.storage.write.replacements import load_replacements
from sessionstore.storage.write.session import Session
from sessionstore.storage.records.view import to_api_messages
from tests.support.messages import conversation

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"


def shown(entries: list[Any]) -> list[tuple[Any, ...]]:
    """What a view shows, seq left out (a fork numbers its own transcript from 1)."""
    return [
        (e.uuid, e.role, e.type, e.subtype, e.message.api_message_id, e.content, e.tokens, e.replaced) for e in entries
    ]


def parent_state(s: Session) -> dict[str, Any]:
    """Everything of the parent a fork must leave as it was."""
    return {
        "view": shown(s.active_entries()),
        "api": s.active_view(),
        "version": s.view_version,
        "boundaries": [b.to_dict() for b in hist.boundaries(s)],
        "before": [shown(hist.view_before(s, k)) for k in range(1, hist.boundary_count(s) + 1)],
        "transcript": [m.to_dict() for m in s.transcript()],
    }


def carried(b: Any) -> tuple[Any, ...]:
    """What a fork must carry of a boundary its view starts with (what an export to Claude Code writes of it)."""
    return (b.boundary_uuid, b.summary, b.kind, b.trigger, b.pre_tokens, b.post_tokens, b.preserved_segment)


def mid_round(view: list[Any], following: dict[str, Any] | None) -> bool:
    """True when the recorded view leaves a tool_use unanswered or the next message continues its response."""
    asked: set[str] = set()
    for e in view:
        if e.role == "assistant" and isinstance(e.content, list):
            asked |= {b["id"] for b in e.content if b.get("type") == "tool_use"}
        elif e.role == "user" and isinstance(e.content, list):
            asked -= {b["tool_use_id"] for b in e.content if b.get("type") == "tool_result"}
    last = view[-1]
    continues = (
        following is not None
        and following["role"] == "assistant"
        and last.role == "assistant"
        and following.get("api_message_id") is not None
        and following.get("api_message_id") == last.message.api_message_id
    )
    return bool(asked) or continues


def recorded_session(store: SessionStore) -> tuple[Session, list[tuple[str, list[Any], bool]]]:
    """A session appended one message at a time, cleared by the pipeline and compacted twice.

    Returns it with, for each appended message, the active view recorded right after the
    append and whether that moment was inside an API round.
    """
    s = store.create_session(title="parent", context_window=1_000_000)
    pipeline = Pipeline(store)
    summarizer = make_summarizer("extractive")
    messages = list(conversation(150, seed=3))
    recorded: list[tuple[str, list[Any], bool]] = []
    prepared = 0
    for i, m in enumerate(messages):
        stored = s.append(m)
        view = s.active_entries()
        inside = mid_round(view, messages[i + 1] if i + 1 < len(messages) else None)
        recorded.append((stored.uuid, shown(view), inside))
        if inside:
            continue
        if i >= 40 and i // 10 > prepared:
            prepared = i // 10
            pipeline.prepare(s)
        if hist.boundary_count(s) < (i >= 60) + (i >= 110):
            compact(s, summarizer=summarizer)
    assert hist.boundary_count(s) == 2
    return s, recorded


def test_fork_at_each_message_is_the_view_as_it_stood_right_after_it(store: SessionStore) -> None:
    s, recorded = recorded_session(store)
    assert any(e[-1] for _, view, _ in recorded for e in view), "the pipeline cleared some results"
    before = parent_state(s)
    parent_decisions = load_replacements(store.db, s.id)
    forked = refused = 0
    for uuid, view, inside_round in recorded:
        if inside_round:
            with pytest.raises(InvalidForkPoint) as err:
                s.fork(at=uuid)
            assert err.value.nearest, uuid
            refused += 1
            continue
        f = s.fork(at=uuid)
        assert shown(f.active_entries()) == view, uuid
        replaced = {
            b["tool_use_id"]
            for e in f.active_entries()
            if e.replaced
            for b in e.content
            if b.get("type") == "tool_result" and b not in e.message.content
        }
        decisions = load_replacements(store.db, f.id)
        assert set(decisions) == replaced, uuid
        assert all(decisions[t] == parent_decisions[t] for t in replaced)
        assert f.active_view() == to_api_messages(f.active_entries())
        info = lineage(store.db, f.id)
        assert info is not None and (info.kind, info.message_uuid, info.parent_id) == ("message", uuid, s.id)
        forked += 1
    assert forked > 20 and refused > 20
    assert parent_state(s) == before
    assert check(store).ok, check(store).to_dict()


@pytest.mark.parametrize("name", [SPOTTER, FASTHOOKS])
def test_fork_before_each_boundary_of_a_real_session_and_of_a_fork(
    store: SessionStore, transcripts_dir: Path, name: str
) -> None:
    result = import_file(store, transcripts_dir / name)
    s = store.get(result.session_id)
    # The compaction is a local write: it lands on the imported session's local continuation (s becomes it).
    compact(s, summarizer=make_summarizer("extractive"))
    assert lineage(store.db, s.id).parent_id == result.session_id  # type: ignore[union-attr]  # a fork: its lineage is there
    count = hist.boundary_count(s)
    # The file's view starts with its boundary: the continuation holds that compaction as its boundary 1.
    assert count == 2
    copied, source = hist.boundaries(s)[0], hist.boundaries(store.get(result.session_id))[-1]
    assert carried(copied) == carried(source)
    assert copied.metadata["copied_from"] == {"session_id": result.session_id, "boundary": source.index}
    assert (hist.view_before(s, 1), hist.summarized_messages(s, 1)) == ([], [])
    with pytest.raises(InvalidForkPoint, match=f"fork {result.session_id} --before-boundary {source.index}") as err:
        s.fork(before_boundary=1)
    assert f"from session {result.session_id} (its boundary {source.index})" in str(err.value)
    # A fork of the view the local compaction left carries that compaction (its post_tokens count what it kept).
    now = s.fork()
    assert carried(hist.boundaries(now)[0]) == carried(hist.boundaries(s)[-1])
    before = parent_state(s)
    for k in range(2, count + 1):
        expected = hist.view_before(s, k)
        f = s.fork(before_boundary=k, title=f"undo {k}")
        assert f.title == f"undo {k}"
        assert shown(f.active_entries()) == shown(expected)
        assert f.active_view() == to_api_messages(expected)
        assert f.view_tokens == sum(e.tokens for e in expected)
        assert [m.uuid for m in f.transcript()] == [e.uuid for e in expected]
        info = lineage(store.db, f.id)
        assert info is not None and (info.kind, info.boundary_index, info.parent_id) == ("boundary", k, s.id)
        again = f.fork()
        assert shown(again.active_entries()) == shown(expected)
        assert [x.session_id for x in ancestry(store.db, again.id)] == [again.id, f.id, s.id]
        assert [x.parent_id for x in ancestry(store.db, again.id)] == [f.id, s.id, result.session_id]
    assert parent_state(s) == before
    assert [x.boundary_index for x in forks_of(store.db, s.id)] == [None, 2]
    report = check(store)
    assert report.ok, report.to_dict()


def test_fork_of_a_fork_at_a_message(store: SessionStore) -> None:
    s = store.create_session(title="root")
    s.append_many(list(conversation(30, seed=1)))
    first = s.fork()
    extra = first.append_many(
        [
            {"role": "user", "content": "only in the first fork"},
            {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
        ]
    )
    second = first.fork(at=extra[0].uuid)
    assert shown(second.active_entries()) == shown(first.active_entries())[:-1]
    third = second.fork(at=str(second.last_seq))
    assert shown(third.active_entries()) == shown(second.active_entries())
    chain = ancestry(store.db, third.id)
    assert [(x.session_id, x.parent_id) for x in chain] == [
        (third.id, second.id),
        (second.id, first.id),
        (first.id, s.id),
    ]
    assert [x.kind for x in chain] == ["message", "message", "current"]
    assert [x.session_id for x in ancestry(store.db, third.id, limit=2)] == [third.id, second.id]


def test_a_cut_inside_a_round_is_refused_naming_the_nearest_valid_points_and_nothing_is_written(
    store: SessionStore,
) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "read it"})
    s.append({"role": "assistant", "content": [{"type": "text", "text": "sure"}]})
    call = s.append(
        {
            "role": "assistant",
            "api_message_id": "m1",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]})
    s.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    sessions = len(store.list())
    with pytest.raises(InvalidForkPoint) as err:
        s.fork(at=call.uuid)
    assert [p.seq for p in err.value.nearest] == [2, 4]
    assert "t1" in str(err.value)
    assert len(store.list()) == sessions
    assert [e.content for e in s.fork(at=4).active_entries()][-1][0]["tool_use_id"] == "t1"


def test_messages_are_named_by_seq_uuid_or_unique_prefix(store: SessionStore) -> None:
    s = store.create_session()
    a = s.append({"role": "user", "content": "one", "uuid": "abc-111"})
    s.append({"role": "assistant", "content": [{"type": "text", "text": "two"}], "uuid": "abd-222"})
    s.append({"role": "user", "content": "three", "uuid": "abd-333"})
    assert len(s.fork(at="abc").active_entries()) == 1
    assert len(s.fork(at="abd-2").active_entries()) == 2
    assert len(s.fork(at=a.seq).active_entries()) == 1
    assert len(s.fork(at="3").active_entries()) == 3
    with pytest.raises(MessageNotFound, match="ambiguous"):
        s.fork(at="abd")
    with pytest.raises(MessageNotFound):
        s.fork(at="zzz")
    with pytest.raises(MessageNotFound):
        s.fork(at=99)
    with pytest.raises(SessionStoreError, match="not both"):
        s.fork(at=1, before_boundary=1)
    with pytest.raises(hist.BoundaryNotFound):
        s.fork(before_boundary=1)


def test_deleting_the_parent_keeps_its_forks_whole(store: SessionStore) -> None:
    s = store.create_session(title="to be deleted")
    s.append_many(_whole(conversation(40, seed=2)))
    compact(s, summarizer=make_summarizer("extractive"))
    s.append_many(_whole(conversation(20, seed=5, prefix="later ")))
    undo = s.fork(before_boundary=1)
    now = s.fork()
    kept = {f.id: (shown(f.active_entries()), [m.to_dict() for m in f.transcript()]) for f in (undo, now)}
    store.delete(s.id)
    for f in (undo, now):
        again = store.get(f.id)
        assert (shown(again.active_entries()), [m.to_dict() for m in again.transcript()]) == kept[f.id]
        info = lineage(store.db, f.id)
        assert info is not None and info.parent_id == s.id and not info.parent_exists
    store.delete(now.id)
    assert lineage(store.db, now.id) is None and lineage(store.db, undo.id) is not None
    report = check(store)
    assert report.ok, report.to_dict()


def test_a_fork_holds_rows_for_its_view_not_the_parents_history(store: SessionStore) -> None:
    s = store.create_session()
    for r in range(4):
        s.append_many(_whole(conversation(40, seed=10 + r, prefix=f"r{r} ")))
        compact(s, summarizer=make_summarizer("extractive"))
    f = s.fork(before_boundary=4)
    rows = store.db.one("SELECT COUNT(*) FROM messages WHERE session_id = :id", {"id": f.id})[0]
    assert rows == len(hist.view_before(s, 4)) < s.last_seq


def test_after_a_fork_both_sessions_grow_and_compact_apart(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_whole(conversation(40, seed=7)))
    compact(s, summarizer=make_summarizer("extractive"))
    s.append_many(_whole(conversation(30, seed=8, prefix="both ")))
    f = s.fork(before_boundary=1)
    s.append_many(_whole(conversation(30, seed=9, prefix="PARENT-ONLY ")))
    f.append_many(_whole(conversation(30, seed=9, prefix="FORK-ONLY ")))
    compact(s, summarizer=make_summarizer("extractive"))
    compact(f, summarizer=make_summarizer("extractive"))
    f.append({"role": "user", "content": "FORK-ONLY after compaction"})
    s.append({"role": "user", "content": "PARENT-ONLY after compaction"})
    assert hist.boundary_count(s) == 2 and hist.boundary_count(f) == 1
    fork_text = str([m.to_dict() for m in f.transcript()]) + str(f.active_view())
    parent_text = str([m.to_dict() for m in s.transcript()]) + str(s.active_view())
    assert "PARENT-ONLY" not in fork_text and "FORK-ONLY" in fork_text
    assert "FORK-ONLY" not in parent_text and "PARENT-ONLY" in parent_text
    assert len(hist.view_before(f, 1)) > 0
    report = check(store)
    assert report.ok, report.to_dict()


def _whole(messages: Any) -> list[dict[str, Any]]:
    """The messages cut after the last final assistant text, so no tool_use waits for its result."""
    chunk = list(messages)
    end = max(
        i
        for i, m in enumerate(chunk)
        if m["role"] == "assistant"
        and isinstance(m["content"], list)
        and all(b.get("type") == "text" for b in m["content"])
    )
    return chunk[: end + 1]


def test_fork_at_the_last_message_before_a_rewrite_that_appends_nothing_is_the_view_before_it(
    store: SessionStore,
) -> None:
    """A budget spill rewrites the view without appending a message, so the rewrite's base is the very message
    forked at: the fork holds the view as it stood right after that message (the full result, not the preview)."""
    s = store.create_session(title="spilled")
    s.append({"role": "user", "content": "Show me the build log."})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_log", "name": "Bash", "input": {"command": "make"}}],
        }
    )
    last = s.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_log", "content": "build line\n" * 40_000}],
        }
    )
    before = shown(s.active_entries())
    Pipeline(store).prepare(s)
    assert shown(s.active_entries()) != before and s.active_entries()[-1].replaced, "the result was spilled"
    f = s.fork(at=last.uuid)
    assert shown(f.active_entries()) == before
    assert shown(s.fork(at=last.seq).active_entries()) == before


def test_a_message_no_view_showed_is_refused_naming_the_nearest_messages_that_were(
    store: SessionStore, transcripts_dir: Path
) -> None:
    """A message of the transcript that never was in a view (a side branch of the file) has no view to fork at."""
    s = store.get(import_file(store, transcripts_dir / SPOTTER).session_id)
    shown_seqs = {e.seq for k in range(1, hist.boundary_count(s) + 1) for e in hist.view_before(s, k)}
    shown_seqs |= {e.seq for e in s.active_entries()}
    outside = next(m.seq for m in s.transcript() if m.seq not in shown_seqs and 1 < m.seq < s.last_seq)
    sessions = len(store.list())
    with pytest.raises(InvalidForkPoint, match="never entered a view") as err:
        s.fork(at=outside)
    assert len(err.value.nearest) == 2
    assert err.value.nearest[0].seq < outside < err.value.nearest[1].seq
    assert {p.seq for p in err.value.nearest} <= shown_seqs
    assert len(store.list()) == sessions


def test_a_refused_cut_names_only_the_tool_uses_it_would_leave_unanswered(store: SessionStore) -> None:
    """The reason names the open tool_use, not one answered earlier, and a split response is called one."""
    s = store.create_session()
    s.append({"role": "user", "content": "look twice"})
    s.append({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_first", "name": "Read", "input": {}}]})
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_first", "content": "a"}]})
    second = s.append(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_second", "name": "Read", "input": {}}]}
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_second", "content": "b"}]})
    piece = s.append({"role": "assistant", "api_message_id": "msg_1", "content": [{"type": "text", "text": "Both"}]})
    s.append({"role": "assistant", "api_message_id": "msg_1", "content": [{"type": "text", "text": " read."}]})
    with pytest.raises(InvalidForkPoint) as err:
        s.fork(at=second.uuid)
    assert "tool_use toolu_second would have no tool_result" in str(err.value)
    assert "toolu_first" not in str(err.value)
    with pytest.raises(InvalidForkPoint, match="it would split one streamed assistant response") as err:
        s.fork(at=piece.uuid)
    assert [p.seq for p in err.value.nearest] == [piece.seq - 1, piece.seq + 1]


def test_an_empty_session_forks_to_an_empty_session(store: SessionStore) -> None:
    s = store.create_session(title="nothing yet")
    f = s.fork()
    assert (f.active_entries(), f.active_view(), f.title, hist.boundary_count(f)) == ([], [], "nothing yet", 0)
    f.append({"role": "user", "content": "first words"})
    assert [e.content for e in f.active_entries()] == ["first words"]


def test_a_leading_boundary_no_compaction_named_is_carried_from_its_own_metadata(store: SessionStore) -> None:
    """A view that starts with a boundary message appended as such (no compaction row of the parent names it):
    the fork records it as its boundary 1, with the trigger and pre_tokens its metadata gives (else auto, 0), the
    summary that follows it, and post_tokens what the view showed right after the compaction (boundary, summary)."""
    s = store.create_session()
    boundary = s.append(
        {
            "role": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "metadata": {"trigger": "manual", "pre_tokens": 91_000},
        }
    )
    summary = s.append({"role": "user", "content": "Summary: we fixed the parser.", "is_compact_summary": True})
    s.append({"role": "assistant", "content": [{"type": "text", "text": "Carrying on."}]})
    s.append({"role": "user", "content": "next"})
    assert hist.boundary_count(s) == 0
    f = s.fork()
    (b,) = hist.boundaries(f)
    assert (b.boundary_uuid, b.trigger, b.pre_tokens, b.kind) == (boundary.uuid, "manual", 91_000, "full")
    assert b.summary_seq == 2 and b.summary == summary.content
    assert b.post_tokens == boundary.tokens + summary.tokens
    assert b.metadata["copied_from"] == {"session_id": s.id, "boundary": None}
    assert shown(f.active_entries()) == shown(s.active_entries())
    with pytest.raises(InvalidForkPoint, match=f"session {s.id} \\(one of its boundaries\\).*--before-boundary K"):
        f.fork(before_boundary=1)

    bare = store.create_session()
    lone = bare.append(
        {"role": "system", "subtype": "compact_boundary", "content": "Compacted", "metadata": {"trigger": 7}}
    )
    bare.append({"role": "user", "content": "hello again"})
    (b,) = hist.boundaries(bare.fork())
    assert (b.trigger, b.pre_tokens, b.summary_seq, b.post_tokens) == ("auto", 0, None, lone.tokens)
    assert check(store).ok, check(store).to_dict()


def test_a_leading_boundarys_summary_is_the_first_summary_before_another_boundary(store: SessionStore) -> None:
    """With no compaction row to name it, the leading boundary's summary is the first summary after it, past a
    system notice between them, and none when another boundary comes first (that summary is the other's)."""
    noticed = store.create_session()
    noticed.append({"role": "system", "subtype": "compact_boundary", "content": "Compacted"})
    noticed.append({"role": "system", "subtype": "notice", "content": "a hook ran"})
    noticed.append({"role": "user", "content": "Summary: the parser is fixed.", "is_compact_summary": True})
    noticed.append({"role": "user", "content": "next"})
    (b,) = hist.boundaries(noticed.fork())
    assert b.summary_seq == 3

    twice = store.create_session()
    twice.append({"role": "system", "subtype": "compact_boundary", "content": "Compacted"})
    twice.append({"role": "system", "subtype": "compact_boundary", "content": "Compacted again"})
    twice.append({"role": "user", "content": "Summary: the second one's.", "is_compact_summary": True})
    twice.append({"role": "user", "content": "next"})
    first = hist.boundaries(twice.fork())[0]
    assert first.summary_seq is None


def _words(label: str) -> str:
    return f"{label} " + "word " * 200


def test_a_preserved_segment_goes_with_the_fork_only_when_the_whole_segment_is_in_its_view(
    store: SessionStore,
) -> None:
    """A fork cut inside a partial compaction's kept run drops the segment (its tail would name a message the fork
    has not); one whose view holds the run up to its tail, the boundary the anchor, keeps it."""
    messages: list[dict[str, Any]] = []
    for i in range(8):
        messages += [
            {"role": "user", "content": _words(f"question {i}")},
            {"role": "assistant", "content": [{"type": "text", "text": _words(f"answer {i}")}]},
        ]
    for pivot, keyword in ((1, "from_uuid"), (11, "up_to_uuid")):
        s = store.create_session()
        stored = s.append_many(messages)
        compact(s, summarizer=make_summarizer("extractive"), **{keyword: stored[pivot].uuid})
        segment = hist.boundaries(s)[-1].preserved_segment
        assert segment is not None
        whole = s.fork()
        assert carried(hist.boundaries(whole)[0]) == carried(hist.boundaries(s)[-1])
        uuids = [e.uuid for e in whole.active_entries()]
        to_tail = whole.fork(at=segment["tail_uuid"])
        assert [e.uuid for e in to_tail.active_entries()] == uuids[: uuids.index(segment["tail_uuid"]) + 1]
        assert hist.boundaries(to_tail)[0].preserved_segment == segment
        inside = whole.fork(at=uuids[uuids.index(segment["tail_uuid"]) - 1])
        assert segment["tail_uuid"] not in {e.uuid for e in inside.active_entries()}
        assert hist.boundaries(inside)[0].preserved_segment is None
    report = check(store)
    assert report.ok, report.to_dict()


def test_a_fork_carries_the_summary_its_boundary_named_past_an_earlier_boundary_the_view_kept(
    store: SessionStore,
) -> None:
    """A partial compaction that keeps the oldest messages keeps an earlier boundary and its summary before its
    own summary: the fork's boundary 1 names the summary the parent's compaction named, not none."""
    s = store.create_session()
    s.append_many([{"role": "user" if i % 2 == 0 else "assistant", "content": _words(f"early {i}")} for i in range(16)])
    compact(s, summarizer=make_summarizer("extractive"))
    later = s.append_many(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": _words(f"later {i}")} for i in range(16)]
    )
    compact(s, summarizer=make_summarizer("extractive"), from_uuid=later[4].uuid)
    last = hist.boundaries(s)[-1]
    assert [e.subtype for e in s.active_entries()[:2]] == ["compact_boundary", "compact_boundary"]
    f = s.fork()
    (copied, *_) = hist.boundaries(f)
    assert carried(copied) == carried(last)
    assert copied.summary_seq == len(f.active_entries()), "the summary ends the view (prefix layout)"


def _grep_round(n: int) -> list[dict[str, Any]]:
    """One Grep call and its result; the hit costs the tokens the cleared placeholder does."""
    tool = f"toolu_{n:02d}"
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool, "name": "Grep", "input": {"pattern": "TODO"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool, "content": "a.py:3: TODO"}]},
    ]


def test_a_fork_shows_what_was_cleared_then_and_takes_only_those_decisions(store: SessionStore) -> None:
    """Forked at a message, the view shows the results cleared by then (even where the placeholder costs what the
    result did) and the fork holds those clearing decisions only: not the parent's later ones for results one
    message of the view still shows whole next to a cleared one."""
    s = store.create_session()
    s.append({"role": "user", "content": "find the TODOs"})
    for n in range(1, 9):
        s.append_many(_grep_round(n))
    many = [f"toolu_{n:02d}" for n in range(9, 13)]
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": t, "name": "Grep", "input": {"pattern": t}} for t in many],
        }
    )
    s.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": t, "content": "a.py:3: TODO"} for t in many]
            + [{"type": "text", "text": "that is all"}],
        }
    )
    s.append({"role": "assistant", "content": [{"type": "text", "text": "Found them."}]})
    pipeline = Pipeline(store)
    assert pipeline.prepare(s).report["microcompact"].acted
    mixed = next(e for e in s.active_entries() if e.replaced and len(e.content) == 5)
    assert [b.get("content") == "a.py:3: TODO" for b in mixed.content[:4]] == [False, True, True, True]
    assert mixed.tokens == mixed.message.tokens, "the placeholder costs what the result did"
    cleared_then = {f"toolu_{n:02d}" for n in range(1, 10)}
    point = s.append({"role": "user", "content": "and in the tests?"})
    then = shown(s.active_entries())
    for n in range(13, 25):
        s.append_many(_grep_round(n))
    s.append({"role": "assistant", "content": [{"type": "text", "text": "None there."}]})
    assert pipeline.prepare(s).report["microcompact"].acted
    assert set(many[1:]) <= set(load_replacements(store.db, s.id)), "the parent cleared them later"
    f = s.fork(at=point.uuid)
    assert shown(f.active_entries()) == then
    assert set(load_replacements(store.db, f.id)) == cleared_then
    assert shown(s.fork().active_entries()) == shown(s.active_entries())
