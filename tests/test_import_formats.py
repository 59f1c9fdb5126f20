"""The importer checks what each file is: the wrong kind is refused, a file without messages creates nothing.

And `sessionstore delete SESSION` removes a session (after a question, or with --yes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import WrongFormat, import_paths
from sessionstore.interchange.importers import sniff_source
from tests.support.cli import run_cli, run_cli_process

EXPORT_LINE = (
    '{"seq":1,"uuid":"u1","parent_uuid":null,"type":"user","subtype":null,"timestamp":"2026-01-01T00:00:00Z",'
    '"api_message_id":null,"usage":null,"is_meta":false,"is_compact_summary":false,"metadata":{},'
    '"tokens":1,"message":{"role":"user","content":"hi"}}\n'
)


def sessions(url: str) -> list[dict]:  # type: ignore[type-arg]
    with SessionStore.open(url) as st:
        return st.list()


def test_the_format_is_read_from_each_file(transcripts_dir: Path, tmp_path: Path) -> None:
    for path in (transcripts_dir / "claude-code").rglob("*.jsonl"):
        assert sniff_source(path) == "claude-code", path
    for path in (transcripts_dir / "codex").rglob("*.jsonl"):
        renamed = tmp_path / "renamed.jsonl"
        shutil.copy(path, renamed)
        assert sniff_source(renamed) == "codex", path
    (tmp_path / "export.jsonl").write_text(EXPORT_LINE)
    assert sniff_source(tmp_path / "export.jsonl") == "jsonl"
    (tmp_path / "binary.jsonl").write_bytes(bytes(range(256)) * 4)
    assert sniff_source(tmp_path / "binary.jsonl") is None


@pytest.mark.parametrize(
    "command,folder,right",
    [
        ("claude-code", "codex", "codex"),
        ("codex", "claude-code", "claude-code"),
        ("jsonl", "claude-code", "claude-code"),
    ],
)
def test_a_file_of_the_other_kind_is_refused_naming_the_command(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, transcripts_dir: Path, command: str, folder: str, right: str
) -> None:
    result = run_cli(capsys, "import", command, str(transcripts_dir / folder), "--db", sqlite_url)
    assert result.code == 2, result
    assert result.err.startswith("error: ") and result.err.count("\n") == 1
    assert f"sessionstore import {right}" in result.err and f"not {command}" in result.err
    assert sessions(sqlite_url) == [], "nothing imported"


def test_our_export_is_refused_by_the_claude_code_importer(sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(EXPORT_LINE)
    with SessionStore.open(sqlite_url) as st:
        with pytest.raises(WrongFormat, match="sessionstore import jsonl"):
            import_paths(st, [path], source="claude-code")
        assert st.list() == []


#: Files without a message, each with the import commands that must refuse it as such (to codex and
#: jsonl a Claude Code summary line is not theirs, a different refusal).
_NO_MESSAGE = [
    (content, command)
    for content in (
        b"",
        b"\n\n",
        bytes(range(256)) * 40,
        b'{"type": "summary", "summary": "x"}\n',
        b"not json at all\n",
    )
    for command in ("claude-code", "codex", "jsonl")
    if command == "claude-code" or not content.startswith(b'{"type": "summary"')
]


@pytest.mark.parametrize(("content", "command"), _NO_MESSAGE)
def test_a_file_without_messages_creates_no_session(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path, content: bytes, command: str
) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(content)
    result = run_cli(capsys, "import", command, str(path), "--db", sqlite_url)
    assert result.code == 2, result
    assert "no message" in result.err and "no session created" in result.err
    assert sessions(sqlite_url) == []


def test_a_folder_with_one_empty_file_imports_the_rest(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(transcripts_dir / "claude-code" / "spotter" / "tool_heavy.jsonl", folder / "a.jsonl")
    (folder / "b.jsonl").write_bytes(b"")
    result = run_cli(capsys, "import", "claude-code", str(folder), "--json", "--db", sqlite_url)
    assert result.code == 0, result.err
    statuses = {Path(f["path"]).name: f["status"] for f in json.loads(result.out)["files"]}
    assert statuses == {"a.jsonl": "imported", "b.jsonl": "skipped"}
    assert len(sessions(sqlite_url)) == 1


def test_delete_asks_then_deletes(sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        keep = st.create_session(title="keep")
        gone = st.create_session(title="junk")
        gone.append({"role": "user", "content": "x"})
    declined = run_cli_process("delete", gone.id[:8], "--db", sqlite_url, input=b"n\n")
    assert declined.code == 1 and "nothing deleted" in declined.err
    assert {s["id"] for s in sessions(sqlite_url)} == {keep.id, gone.id}
    unanswered = run_cli_process("delete", gone.id[:8], "--db", sqlite_url, input=b"")
    assert unanswered.code == 1 and "nothing deleted" in unanswered.err and "--yes" in unanswered.err
    assert "Aborted" not in unanswered.err, "no answer on stdin is said in our words"
    assert {s["id"] for s in sessions(sqlite_url)} == {keep.id, gone.id}
    confirmed = run_cli_process("delete", gone.id[:8], "--db", sqlite_url, input=b"y\n")
    assert confirmed.code == 0, confirmed.err
    assert "junk" in confirmed.err and "1 messages" in confirmed.out
    assert [s["id"] for s in sessions(sqlite_url)] == [keep.id]


def test_delete_yes_for_scripts(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    with SessionStore.open(store_url) as st:
        s = st.create_session(title="junk")
    result = run_cli(capsys, "delete", s.id, "--yes", "--json", "--db", store_url)
    assert result.code == 0 and json.loads(result.out) == {"deleted": s.id, "messages": 0}
    assert sessions(store_url) == []
    again = run_cli(capsys, "delete", s.id, "--yes", "--db", store_url)
    assert again.code == 2 and again.err.startswith("error: ")
