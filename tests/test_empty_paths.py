"""An empty path ('') names no file: commands refuse it in one line instead of reading the current folder.

`append S ''` said "cannot read : Is a directory"; `import claude-code ''` and
`watch --once ''` walked the current folder as if it had been given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore import SessionStore, SessionStoreError
from sessionstore.interchange.importing import transcript_files
from tests.support.cli import run_cli


@pytest.fixture
def sid(sqlite_url: str) -> str:
    with SessionStore.open(sqlite_url) as st:
        return st.create_session(title="empty paths").id


def _folder_with_a_transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The current folder holds a transcript an empty path must not pick up."""
    (tmp_path / "t.jsonl").write_text(
        '{"type":"user","uuid":"u1","sessionId":"s1","message":{"role":"user","content":"hi"}}\n'
    )
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    "args", [["append", "SID", ""], ["import", "claude-code", ""], ["import", "jsonl", ""], ["watch", "--once", ""]]
)
def test_an_empty_path_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    sqlite_url: str,
    sid: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
) -> None:
    _folder_with_a_transcript(tmp_path, monkeypatch)
    result = run_cli(capsys, *[sid if a == "SID" else a for a in args], "--db", sqlite_url)
    assert result.code == 2, result
    assert result.err.startswith("error: ") and "empty path" in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    with SessionStore.open(sqlite_url) as st:
        assert [s["id"] for s in st.list()] == [sid], "nothing imported from the current folder"
        assert st.get(sid).refresh_state().last_seq == 0


def test_the_api_refuses_an_empty_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _folder_with_a_transcript(tmp_path, monkeypatch)
    with pytest.raises(SessionStoreError, match="empty path"):
        transcript_files([""])
    assert transcript_files(["."]) == [tmp_path / "t.jsonl"], "the current folder, named, still works"


@pytest.mark.parametrize("source", ["claude-code", "codex", "jsonl"])
def test_a_folder_without_transcripts_is_nothing_to_import(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path, source: str
) -> None:
    """`import claude-code EMPTYDIR` said "imported 0 of 0 file(s)" and exit 0, as if all went well."""
    (tmp_path / "notes.txt").write_text("not a transcript")
    result = run_cli(capsys, "import", source, str(tmp_path), "--db", sqlite_url)
    assert result.code == 2, result
    assert result.err.startswith("error: nothing to import") and "*.jsonl" in result.err
    assert len(result.err.strip().splitlines()) == 1 and result.out == ""


def test_materialize_into_an_empty_folder_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`spill materialize S T ''` wrote the spill into the current folder."""
    from sessionstore.storage.core.output import OutputError, write_into_folder

    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match="empty path"):
        write_into_folder("", "spill.txt", b"data")
    assert list(tmp_path.iterdir()) == []
    assert write_into_folder(".", "spill.txt", b"data") == tmp_path / "spill.txt", "'.' still names this folder"


def test_a_file_that_is_no_transcript_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path
) -> None:
    """It printed a table, a warning, "1 warning(s); everything else was imported" and the error."""
    data = tmp_path / "data.jsonl"
    data.write_text('{"a": 1}\n')
    result = run_cli(capsys, "import", "jsonl", str(data), "--db", sqlite_url)
    assert result.code == 2 and result.out == ""
    assert result.err.strip().splitlines() == [result.err.strip()] and "nothing imported" in result.err
    assert "no message in it" in result.err
