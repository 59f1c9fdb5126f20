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
    assert (copied.boundary_uuid, copied.summary, copied.kind) == (source.boundary_uuid, source.summary, source.kind)
    assert copied.metadata["copied_from"] == {"session_id": result.session_id, "boundary": source.index}
    assert (hist.view_before(s, 1), hist.summarized_messages(s, 1)) == ([], [])
    with pytest.raises(InvalidForkPoint, match=f"fork {result.session_id} --before-boundary {source.index}"):
        s.fork(before_boundary=1)
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
    assert [x.boundary_index for x in forks_of(store.db, s.id)] == [2]
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
