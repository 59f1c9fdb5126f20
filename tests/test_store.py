"""The storage core through the Python API, on every engine."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import anthropic.types as at
import pytest

from sessionstore import SessionNotFound, SessionStore
from sessionstore.storage.records.view import to_api_messages
from tests.support.messages import conversation
from tests.support.validity import check_messages


def test_create_get_list_delete(store: SessionStore) -> None:
    a = store.create_session(title="first", model="claude-sonnet-4-5", context_window=100_000, cwd="/w")
    b = store.create_session(title="second")
    b.append({"role": "user", "content": "hello"})
    got = store.get(a.id)
    assert (got.title, got.model, got.context_window, got.cwd) == ("first", "claude-sonnet-4-5", 100_000, "/w")
    assert store.get(a.id[:8]).id == a.id
    listed = store.list()
    assert [s["id"] for s in listed] == [b.id, a.id], "newest (last updated) first"
    assert listed[0]["messages"] == 1
    assert [s["id"] for s in store.list(limit=1, offset=1)] == [a.id]
    store.delete(b.id)
    with pytest.raises(SessionNotFound):
        store.get(b.id)
    assert [s["id"] for s in store.list()] == [a.id]


def test_unknown_session_is_a_typed_error(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.get("does-not-exist")


def test_active_view_merges_and_orders_tool_results_first(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "look at a.py"})
    s.append(
        {
            "role": "assistant",
            "api_message_id": "m1",
            "content": [{"type": "thinking", "thinking": "read it", "signature": "x"}],
        }
    )
    s.append(
        {
            "role": "assistant",
            "api_message_id": "m1",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}],
        }
    )
    s.append({"role": "system", "subtype": "notice", "content": "hook ran"})
    s.append({"role": "user", "content": [{"type": "text", "text": "also check b.py"}]})
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}]})
    view = s.active_view()
    assert [m["role"] for m in view] == ["user", "assistant", "user"]
    assert [b["type"] for b in view[1]["content"]] == ["thinking", "tool_use"]
    assert [b["type"] for b in view[2]["content"]] == ["tool_result", "text"]
    assert check_messages(view) == []
    entries = s.active_entries()
    assert [e.position for e in entries] == list(range(6))
    assert entries[3].role == "system" and entries[3].subtype == "notice"
    assert sum(e.tokens for e in entries) == s.view_tokens


def test_view_and_tokens_survive_reopen(store_url: str) -> None:
    msgs = list(conversation(60, seed=3))
    with SessionStore.open(store_url) as st:
        s = st.create_session(title="resume me")
        s.append_many(msgs[:30])
        for m in msgs[30:]:
            s.append(m)
        view, tokens = s.active_view(), s.view_tokens
    with SessionStore.open(store_url) as st:
        again = st.get(s.id)
        assert again.active_view() == view
        assert again.view_tokens == tokens
        assert [m.content for m in again.transcript()] == [m["content"] for m in msgs]


def test_two_handles_see_each_others_appends(store_url: str) -> None:
    with SessionStore.open(store_url) as st1, SessionStore.open(store_url) as st2:
        s1 = st1.create_session()
        s1.append({"role": "user", "content": "one"})
        s2 = st2.get(s1.id)
        assert len(s2.active_view()) == 1
        s1.append({"role": "assistant", "content": "two"})
        s2.append({"role": "user", "content": "three"})
        assert [m["content"] for m in s1.active_view()] == ["one", "two", "three"]
        assert [m["content"] for m in s2.active_view()] == ["one", "two", "three"]


def test_returned_view_can_be_decorated_without_changing_the_store(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    view = s.active_view()
    view[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in s.active_view()[-1]["content"][-1]


def test_sdk_message_objects_are_accepted(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "hi"})
    reply = at.Message(
        id="msg_123",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=[
            at.TextBlock(type="text", text="hello"),
            at.ToolUseBlock(type="tool_use", id="tu1", name="Read", input={"file_path": "x"}),
        ],
        stop_reason="tool_use",
        stop_sequence=None,
        usage=at.Usage(input_tokens=10, output_tokens=5),
    )
    stored = s.append(reply)
    assert stored.api_message_id == "msg_123"
    assert stored.usage is not None and stored.usage["input_tokens"] == 10
    assert stored.metadata["stop_reason"] == "tool_use"
    assert s.active_view()[-1]["content"][1] == {
        "type": "tool_use",
        "id": "tu1",
        "name": "Read",
        "input": {"file_path": "x"},
    }


def test_usage_and_envelope_are_stored(store: SessionStore) -> None:
    s = store.create_session()
    s.append(
        {
            "role": "user",
            "content": "q",
            "uuid": "u-1",
            "timestamp": "2026-01-01T00:00:00Z",
            "is_meta": True,
            "metadata": {"cwd": "/x"},
        }
    )
    s.append(
        {"role": "assistant", "content": "a", "parent_uuid": "u-1", "usage": {"input_tokens": 7, "output_tokens": 3}}
    )
    first, second = list(s.transcript())
    assert (first.uuid, first.timestamp, first.is_meta, first.metadata) == (
        "u-1",
        "2026-01-01T00:00:00Z",
        True,
        {"cwd": "/x"},
    )
    assert second.parent_uuid == "u-1" and second.usage == {"input_tokens": 7, "output_tokens": 3}
    assert second.timestamp and second.uuid


def test_unicode_and_odd_strings_round_trip(store: SessionStore) -> None:
    s = store.create_session(title="ünïcode ✓")
    odd = "'; DROP TABLE messages; --\n\t\u2028 😀 \\u0000 %s %(x)s :name"
    s.append({"role": "user", "content": odd})
    assert [m.content for m in s.transcript()] == [odd]
    assert store.get(s.id).title == "ünïcode ✓"


def test_sqlite_file_is_private_and_default_location_follows_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SESSIONSTORE_DB_URL", raising=False)
    with SessionStore.open() as st:
        st.create_session()
    path = tmp_path / "xdg" / "sessionstore" / "sessions.db"
    assert path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_env_var_picks_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("SESSIONSTORE_DB_URL", url)
    with SessionStore.open() as st:
        assert st.url == url


def test_view_matches_to_api_messages_of_entries(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(conversation(200, seed=9))
    assert s.active_view() == to_api_messages(s.active_entries())
    assert check_messages(s.active_view()) == []
    assert json.loads(json.dumps(s.active_view())) == s.active_view()
