"""`import DIR --strict`: each file whole or not at all, every file reported, exit 2 when one was refused.

It stopped at the first file with warnings (the files after it never looked at, the ones
before it imported) and `--json` printed nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sessionstore import SessionStore
from tests.support.cli import run_cli
from tests.test_import_store import bad_file

#: Two shared files that import without a warning.
CLEAN = "claude-code/claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
CLEAN_TOO = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl"


def _folder(transcripts_dir: Path, tmp_path: Path) -> tuple[Path, int]:
    """a-clean, b-bad (with warnings), c-clean; returns the folder and how many warnings b-bad gives."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(transcripts_dir / CLEAN, folder / "a-clean.jsonl")
    path, bad = bad_file(transcripts_dir, tmp_path)
    shutil.move(path, folder / "b-bad.jsonl")
    shutil.copy(transcripts_dir / CLEAN_TOO, folder / "c-clean.jsonl")
    return folder, len(bad)


def _imported(url: str) -> set[str]:
    with SessionStore.open(url) as store:
        return {Path(p).name for (p,) in store.db.all("SELECT path FROM imports")}


def test_strict_on_a_folder_reports_every_file_as_json(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    folder, warned = _folder(transcripts_dir, tmp_path)
    result = run_cli(capsys, "import", "claude-code", str(folder), "--strict", "--json", "--db", store_url)
    assert result.code == 2, result.err
    report = json.loads(result.out)
    statuses = {Path(f["path"]).name: f["status"] for f in report["files"]}
    assert statuses == {"a-clean.jsonl": "imported", "b-bad.jsonl": "refused", "c-clean.jsonl": "imported"}
    refused = next(f for f in report["files"] if f["status"] == "refused")
    assert len(refused["warnings"]) == warned and refused["session"] is None and refused["messages_added"] == 0
    assert "refused under --strict" in result.err
    assert _imported(store_url) == {"a-clean.jsonl", "c-clean.jsonl"}


def test_strict_on_a_folder_lists_every_warning_of_the_refused_file(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    folder, warned = _folder(transcripts_dir, tmp_path)
    result = run_cli(capsys, "import", "claude-code", str(folder), "--strict", "--db", sqlite_url)
    assert result.code == 2, result.err
    said = [line for line in result.err.splitlines() if line.startswith("warning:") and "b-bad.jsonl" in line]
    assert len(said) == warned, result.err
    assert "1 of 3 file(s) refused under --strict" in result.err and "Traceback" not in result.err
    assert "refused" in result.out and "c-clean.jsonl" in result.out
    assert _imported(sqlite_url) == {"a-clean.jsonl", "c-clean.jsonl"}


def test_strict_help_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "import", "claude-code", "--help")
    flat = " ".join(result.out.replace("│", " ").split())
    assert "whole or not at all" in flat and "refused" in flat and "exit 2" in flat
