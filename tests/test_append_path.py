"""The append path: one guarded INSERT, figures on the transcript row, stale handles corrected."""

from __future__ import annotations

import time
import uuid

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact, make_summarizer
from sessionstore.storage.core.errors import PendingToolUse
from tests.support.messages import conversation

TOOL_USE = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}


def test_store_made_uuids_are_time_ordered(store: SessionStore) -> None:
    s = store.create_session()
    made = []
    for i in range(12):
        made.append(s.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}).uuid)
        time.sleep(0.002)
    assert all(uuid.UUID(u).version == 7 for u in made)
    assert made == sorted(made), "each new uuid sorts after the ones before it"


def test_appends_leave_the_session_row_alone_and_every_reader_sees_their_figures(store: SessionStore) -> None:
    s = store.create_session(title="figures")
    row_before = store.db.one(
        "SELECT last_seq, view_tokens, tail_state, updated_at FROM sessions WHERE id = :id", {"id": s.id}
    )
    s.append_many(list(conversation(30, seed=2)))
    s.append({"role": "user", "content": "one more"})
    assert (
        store.db.one("SELECT last_seq, view_tokens, tail_state, updated_at FROM sessions WHERE id = :id", {"id": s.id})
        == row_before
    ), "no append wrote the session row"
    fresh = store.get(s.id)
    entries = fresh.active_entries()
    assert fresh.last_seq == 31 == len(entries)
    assert fresh.view_tokens == sum(e.tokens for e in entries)
    listed = {r["id"]: r for r in store.list()}[s.id]
    assert listed["messages"] == 31 and listed["view_tokens"] == fresh.view_tokens
    assert listed["updated_at"] > row_before[3], "the listing's update time is the last append's"


def test_a_stale_handle_is_checked_against_what_another_handle_appended(store: SessionStore) -> None:
    a = store.create_session()
    a.append({"role": "user", "content": "go"})
    b = store.get(a.id)
    b.append({"role": "assistant", "content": [TOOL_USE]})
    with pytest.raises(PendingToolUse):
        a.append({"role": "assistant", "content": "a new turn while t1 waits for its result"})
    assert [m.seq for m in a.transcript()] == [1, 2], "nothing was written"
    a.append({"role": "user", "content": [RESULT]})  # valid once the tail is re-read
    b.append({"role": "assistant", "content": "done"})
    assert [m.role for m in store.get(a.id).transcript()] == ["user", "assistant", "user", "assistant"]


def test_an_append_after_another_handles_rewrite_lands_in_the_new_view(store: SessionStore) -> None:
    a = store.create_session()
    a.append_many(list(conversation(60, seed=4)))
    stale_version = a.view_version
    b = store.get(a.id)
    compact(b, summarizer=make_summarizer("extractive"))
    assert a._state is not None and a._state.view_version == stale_version, "a's cached state is stale"
    stored = a.append({"role": "user", "content": "and now?"})
    fresh = store.get(a.id)
    entries = fresh.active_entries()
    assert entries[-1].uuid == stored.uuid and stored.seq == fresh.last_seq
    assert entries[0].message.subtype == "compact_boundary"
    assert fresh.view_tokens == sum(e.tokens for e in entries)
