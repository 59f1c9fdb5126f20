"""Small things a new user trips on: message numbers from 1, a UTF-8 BOM, a garbage timestamp, the stats title."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessionstore import InvalidMessage, SessionStore
from sessionstore.interchange.importing import import_paths
from tests.support.cli import run_cli, run_cli_process

BOM = b"\xef\xbb\xbf"


@pytest.fixture
def sid(sqlite_url: str) -> str:
    with SessionStore.open(sqlite_url) as st:
        return st.create_session(title="checks").id


def test_a_bad_message_is_named_by_its_line_counted_from_1(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, sid: str, tmp_path: Path
) -> None:
    path = tmp_path / "three.jsonl"
    path.write_text('{"role":"user","content":"a"}\n{"role":"assistant","content":"b"}\n{"role":"usr","content":"c"}\n')
    result = run_cli(capsys, "append", sid, str(path), "--db", sqlite_url)
    assert result.code == 2
    assert "message 3:" in result.err and "'usr'" in result.err, result.err


def test_blocks_are_counted_from_1(sqlite_url: str, sid: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        with pytest.raises(InvalidMessage, match=r"^content block 2 has unknown type 'video'"):
            st.get(sid).append({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "video"}]})
        with pytest.raises(InvalidMessage, match=r"^content block 3 must be an object"):
            st.get(sid).append(
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, 7]}
            )


def test_an_orphan_result_in_a_batch_is_named_from_1(sqlite_url: str, sid: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        with pytest.raises(InvalidMessage, match=r"^message 2 \("):
            st.get(sid).append_many(
                [
                    {"role": "user", "content": "a"},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]},
                ]
            )


def test_append_accepts_a_utf8_bom(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, sid: str, tmp_path: Path
) -> None:
    for name, text in [
        ("one.json", '{"role":"user","content":"é"}'),
        ("lines.jsonl", '{"role":"assistant","content":"a"}\n{"role":"user","content":"b"}\n'),
    ]:
        path = tmp_path / name
        path.write_bytes(BOM + text.encode())
        result = run_cli(capsys, "append", sid, str(path), "--db", sqlite_url)
        assert result.code == 0, result.err
    with SessionStore.open(sqlite_url) as st:
        assert [m.content for m in st.get(sid).transcript()] == ["é", "a", "b"]


def test_import_accepts_a_utf8_bom(sqlite_url: str, transcripts_dir: Path, tmp_path: Path) -> None:
    source = transcripts_dir / "claude-code" / "claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    with_bom = tmp_path / "bom.jsonl"
    with_bom.write_bytes(BOM + source.read_bytes())
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with SessionStore.open(sqlite_url) as st:
        [plain] = import_paths(st, [source], source="claude-code")
    with SessionStore.open(other) as st:
        [bommed] = import_paths(st, [with_bom], source="claude-code")
        assert bommed.status == "imported" and bommed.messages_added == plain.messages_added
        assert not [w for w in bommed.warnings if ":1:" in w], bommed.warnings
        assert len(st.get(bommed.session_id or "").active_view()) > 1


def test_a_garbage_timestamp_is_refused_at_the_door(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, sid: str, tmp_path: Path
) -> None:
    with SessionStore.open(sqlite_url) as st:
        with pytest.raises(InvalidMessage, match="timestamp"):
            st.get(sid).append({"role": "user", "content": "x", "timestamp": "garbage"})
        st.get(sid).append({"role": "user", "content": "ok", "timestamp": "2026-01-02T03:04:05.678Z"})
    path = tmp_path / "m.json"
    path.write_text('{"role":"assistant","content":"x","timestamp":"garbage"}')
    result = run_cli(capsys, "append", sid, str(path), "--db", sqlite_url)
    assert result.code == 2 and "timestamp" in result.err and "'garbage'" in result.err
    exported = run_cli(capsys, "export", sid, "-f", "markdown", "--db", sqlite_url)
    assert "garbage" not in exported.out


def test_an_imported_garbage_timestamp_is_dropped_with_a_warning(sqlite_url: str, tmp_path: Path) -> None:
    lines = [
        {
            "type": "user",
            "uuid": "a",
            "parentUuid": None,
            "sessionId": "s1",
            "timestamp": "garbage",
            "message": {"role": "user", "content": "hello"},
        },
        {
            "type": "assistant",
            "uuid": "b",
            "parentUuid": "a",
            "sessionId": "s1",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "assistant", "id": "m1", "content": [{"type": "text", "text": "hi"}]},
        },
    ]
    path = tmp_path / "cc.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with SessionStore.open(sqlite_url) as st:
        [result] = import_paths(st, [path], source="claude-code")
        assert any("'garbage' is not a time" in w for w in result.warnings), result.warnings
        messages = st.get(result.session_id or "").transcript()
        assert [m.content for m in messages][0] == "hello"
        assert all(m.timestamp and m.timestamp != "garbage" for m in messages)


def test_the_stats_title_is_one_line(sqlite_url: str, sid: str) -> None:
    env = {**os.environ, "COLUMNS": "100"}
    result = run_cli_process("stats", sid, "--db", sqlite_url, env=env)
    assert result.code == 0, result.err
    assert any(line.strip() == f"stats of {sid}" for line in result.out.splitlines()), result.out


@pytest.mark.parametrize("usage", [{"input_tokens": -5, "output_tokens": 3}, {"input_tokens": 10**20}])
def test_an_imported_absurd_usage_is_dropped_and_the_message_kept(sqlite_url: str, tmp_path: Path, usage: dict) -> None:
    """Counts no API reports used to turn the whole message into a side entry; only the figures go."""
    lines = [
        {
            "type": "user",
            "uuid": "a",
            "parentUuid": None,
            "sessionId": "s1",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "hello"},
        },
        {
            "type": "assistant",
            "uuid": "b",
            "parentUuid": "a",
            "sessionId": "s1",
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {
                "role": "assistant",
                "id": "m1",
                "content": [{"type": "text", "text": "hi there"}],
                "usage": usage,
            },
        },
    ]
    path = tmp_path / "cc.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with SessionStore.open(sqlite_url) as st:
        [result] = import_paths(st, [path], source="claude-code")
        assert any(":2:" in w and "without its usage" in w for w in result.warnings), result.warnings
        messages = list(st.get(result.session_id or "").transcript())
        assert [m.uuid for m in messages] == ["a", "b"]
        assert messages[1].content == [{"type": "text", "text": "hi there"}] and messages[1].usage is None
