"""Validation at the door: every rule rejects with a typed error and writes nothing (API and CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import (
    DuplicateUuid,
    InvalidContent,
    InvalidMessage,
    InvalidRole,
    OrphanToolResult,
    PendingToolUse,
    SessionStore,
    UnknownBlockType,
)
from tests.support.cli import run_cli

TOOL_USE = {
    "role": "assistant",
    "api_message_id": "m1",
    "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
}

# (name, message, error class, words the message must contain)
BAD: list[tuple[str, Any, type[Exception], str]] = [
    ("role", {"role": "tool", "content": "x"}, InvalidRole, "role"),
    ("content type", {"role": "user", "content": 42}, InvalidContent, "content"),
    ("content dict", {"role": "user", "content": {"type": "text", "text": "x"}}, InvalidContent, "content"),
    ("block without type", {"role": "user", "content": [{"text": "x"}]}, UnknownBlockType, "type"),
    ("unknown block type", {"role": "user", "content": [{"type": "video", "url": "x"}]}, UnknownBlockType, "video"),
    (
        "orphan tool_result",
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
        OrphanToolResult,
        "nope",
    ),
    ("duplicate uuid", {"role": "user", "content": "again", "uuid": "fixed-uuid"}, DuplicateUuid, "fixed-uuid"),
    ("not an object", ["role", "user"], InvalidMessage, "dict"),
    ("unknown field", {"role": "user", "content": "x", "contents": "y"}, InvalidMessage, "contents"),
    # usage figures the pipeline sums before each call: beyond a 64-bit column, negative or infinite ones broke prepare
    (
        "usage too large",
        {"role": "assistant", "content": "a", "usage": {"input_tokens": 10**20}},
        InvalidMessage,
        "usage.input_tokens",
    ),
    (
        "usage negative",
        {"role": "assistant", "content": "a", "usage": {"output_tokens": -5}},
        InvalidMessage,
        "usage.output_tokens",
    ),
    (
        "usage infinite",
        {"role": "assistant", "content": "a", "usage": {"cache_read_input_tokens": float("inf")}},
        InvalidMessage,
        "usage.cache_read_input_tokens",
    ),
]


def _seed(store: SessionStore):
    s = store.create_session()
    s.append({"role": "user", "content": "start", "uuid": "fixed-uuid"})
    s.append(TOOL_USE)
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]})
    return s


def _snapshot(s) -> tuple[Any, ...]:
    state = s.refresh_state()
    return (state.last_seq, state.view_tokens, state.tail, [m.content for m in s.transcript()])


@pytest.mark.parametrize("name,message,error,words", BAD, ids=[b[0] for b in BAD])
def test_api_rejects_and_writes_nothing(
    store: SessionStore, name: str, message: Any, error: type[Exception], words: str
) -> None:
    s = _seed(store)
    before = _snapshot(s)
    with pytest.raises(error) as info:
        s.append(message)
    assert words in str(info.value)
    assert _snapshot(s) == before


def test_a_bad_message_in_a_batch_rejects_the_whole_batch(store: SessionStore) -> None:
    s = _seed(store)
    before = _snapshot(s)
    with pytest.raises(OrphanToolResult, match="message 2 "):
        s.append_many(
            [
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
            ]
        )
    assert _snapshot(s) == before


def test_tool_result_answering_an_older_turn_is_rejected(store: SessionStore) -> None:
    s = _seed(store)
    s.append({"role": "assistant", "content": "done"})
    with pytest.raises(OrphanToolResult):
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "again"}]})


def test_pending_tool_use_is_fine_but_a_new_turn_over_it_is_not(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "go"})
    s.append(
        {
            "role": "assistant",
            "api_message_id": "m9",
            "content": [{"type": "thinking", "thinking": "plan", "signature": "s"}],
        }
    )
    s.append(
        {
            "role": "assistant",
            "api_message_id": "m9",
            "content": [
                {"type": "tool_use", "id": "a", "name": "Read", "input": {}},
                {"type": "tool_use", "id": "b", "name": "Read", "input": {}},
            ],
        }
    )
    assert s.active_view()[-1]["role"] == "assistant"
    with pytest.raises(PendingToolUse, match="a, b"):
        s.append({"role": "assistant", "api_message_id": "m10", "content": "moving on"})
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "B"}]})
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "A"}]})
    with pytest.raises(OrphanToolResult):
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "twice"}]})
    s.append({"role": "assistant", "content": "both read"})


def test_first_message_sent_must_be_user(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "system", "content": "notice"})
    with pytest.raises(InvalidMessage, match="first message"):
        s.append({"role": "assistant", "content": "hi"})


def test_duplicate_uuid_inside_one_batch(store: SessionStore) -> None:
    s = store.create_session()
    with pytest.raises(DuplicateUuid):
        s.append_many([{"role": "user", "content": "a", "uuid": "x"}, {"role": "user", "content": "b", "uuid": "x"}])
    assert list(s.transcript()) == []


@pytest.mark.parametrize("name,message,error,words", BAD, ids=[b[0] for b in BAD])
def test_cli_rejects_with_exit_2_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    sqlite_url: str,
    name: str,
    message: Any,
    error: type,
    words: str,
) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = _seed(st)
        before = _snapshot(s)
    path = tmp_path / "msg.json"
    path.write_text(json.dumps(message))
    result = run_cli(capsys, "append", s.id, str(path), "--db", sqlite_url)
    assert result.code == 2
    assert result.err.startswith("error: ") and words in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    with SessionStore.open(sqlite_url) as st:
        assert _snapshot(st.get(s.id)) == before


@pytest.mark.parametrize(
    "payload,words",
    [
        (b"{not json", "invalid JSON"),
        (b"", "no message"),
        (b"\xff\xfe{}", "UTF-8"),
        (b'"just a string"', "expected a JSON object"),
        (b'{"role":"user","content":"a"}\n{"role":', ":2: invalid JSON"),
    ],
)
def test_cli_bad_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sqlite_url: str, payload: bytes, words: str
) -> None:
    with SessionStore.open(sqlite_url) as st:
        sid = st.create_session().id
    path = tmp_path / "in.jsonl"
    path.write_bytes(payload)
    result = run_cli(capsys, "append", sid, str(path), "--db", sqlite_url)
    assert result.code == 2 and words in result.err
    with SessionStore.open(sqlite_url) as st:
        assert list(st.get(sid).transcript()) == []


def test_cli_unknown_session_and_missing_file(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        sid = st.create_session().id
    result = run_cli(capsys, "view", "nope-nope", "--db", sqlite_url)
    assert result.code == 2 and "no session" in result.err
    result = run_cli(capsys, "append", sid, "/does/not/exist.json", "--db", sqlite_url)
    assert result.code == 2 and "cannot read" in result.err


def nest(levels: int) -> Any:
    """A value `levels` containers deep (lists and dicts alternating around a string)."""
    value: Any = "leaf"
    for i in range(levels):
        value = {"k": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("levels, accepted", [(1, True), (99, True), (100, True), (101, False), (500, False)])
def test_depth_limit_is_exact(levels: int, accepted: bool) -> None:
    from sessionstore.storage.records.validate import check_depth, normalize

    value = nest(levels)
    if accepted:
        check_depth(value, "content")
        normalize({"role": "user", "content": "x", "metadata": {"v": nest(levels - 1)}})
        return
    with pytest.raises(InvalidContent, match="content is nested deeper than 100 levels"):
        check_depth(value, "content")
    with pytest.raises(InvalidContent, match="metadata is nested deeper than 100 levels"):
        normalize({"role": "user", "content": "x", "metadata": {"v": nest(levels - 1)}})
    with pytest.raises(InvalidContent, match="usage is nested deeper than 100 levels"):
        normalize({"role": "assistant", "content": "x", "usage": {"v": nest(levels - 1)}})


def test_depth_check_edges() -> None:
    from sessionstore.storage.records.validate import check_depth

    check_depth("scalar", "x", limit=1)
    check_depth({"a": 1, "b": [1, 2]}, "x", limit=2)
    check_depth([{}, [], "s"], "x", limit=2)
    with pytest.raises(InvalidContent):
        check_depth({"a": {"b": {}}}, "x", limit=2)
    with pytest.raises(InvalidContent):
        check_depth("scalar", "x", limit=0)


def test_a_read_at_a_mistyped_path_leaves_no_database(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`--db` naming a SQLite file that does not exist: reads say so (exit 2) and create nothing;
    commands that record (new, import, watch) create it."""
    missing = tmp_path / "typo.db"
    url = f"sqlite:///{missing}"
    for argv in (
        ["sessions"],
        ["view", "abc"],
        ["history", "abc"],
        ["search", "hello"],
        ["doctor"],
        ["export", "abc", "-f", "markdown"],
        ["stats", "abc"],
        ["mcp"],
    ):
        result = run_cli(capsys, *argv, "--db", url)
        assert result.code == 2 and f"no database at {missing}" in result.err, (argv, result)
        assert len(result.err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == [], "nothing was created"
    assert run_cli(capsys, "new", "--db", url).code == 0
    assert missing.exists() and run_cli(capsys, "sessions", "--db", url).code == 0


def test_appending_an_empty_list_is_refused(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path
) -> None:
    """`echo '[]' | sessionstore append S -` said "appended 0 message(s)" and exited 0."""
    with SessionStore.open(sqlite_url) as st:
        sid = st.create_session().id
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    result = run_cli(capsys, "append", sid, str(empty), "--db", sqlite_url)
    assert result.code == 2 and "nothing to append" in result.err and str(empty) in result.err


def test_appending_our_own_export_points_to_import(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path
) -> None:
    """A jsonl export fed to `append` was refused as "unknown message field(s): message, seq, tokens"."""
    with SessionStore.open(sqlite_url) as st:
        source = st.create_session()
        source.append({"role": "user", "content": "hello"})
        target = st.create_session().id
    exported = tmp_path / "export.jsonl"
    assert run_cli(capsys, "export", source.id, "-f", "jsonl", "-o", str(exported), "--db", sqlite_url).code == 0
    result = run_cli(capsys, "append", target, str(exported), "--db", sqlite_url)
    assert result.code == 2 and "sessionstore import jsonl FILE" in result.err
    assert len(result.err.strip().splitlines()) == 1
