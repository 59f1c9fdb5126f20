"""Plain CLI tables at 80 columns keep one line per row: titles end in an ellipsis, model names are shortened."""

from __future__ import annotations

import os

import pytest

from sessionstore import SessionStore
from sessionstore.cli.tables import ellipsize, short_model, short_path
from tests.support.cli import run_cli, run_cli_process

LONG_TITLE = "Investigate why the nightly integration suite times out on the ARM runners but never locally"


@pytest.mark.parametrize("width", [80, 100])
def test_sessions_table_keeps_one_line_per_row(sqlite_url: str, width: int) -> None:
    with SessionStore.open(sqlite_url) as store:
        ids = [
            store.create_session(title=LONG_TITLE, model="claude-sonnet-4-5-20250929").id,
            store.create_session(title="short one", model="claude-3-5-haiku-20241022").id,
            store.create_session(title=None, model="gpt-5.3-codex-with-a-very-long-deployment-name").id,
        ]
    env = {**os.environ, "COLUMNS": str(width), "LINES": "50"}
    result = run_cli_process("sessions", "--db", sqlite_url, env=env)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert all(len(line) <= width for line in lines)
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == len(ids), "one line per session, nothing wrapped onto a second line"
    for sid in ids:
        assert sum(sid[:8] in row for row in rows) == 1
    long_row = next(row for row in rows if ids[0][:8] in row)
    assert "Investigate why" in long_row and "…" in long_row and "sonnet-4.5" in long_row
    assert "haiku-3.5" in next(row for row in rows if ids[1][:8] in row)


def test_sessions_json_is_unchanged(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with SessionStore.open(sqlite_url) as store:
        store.create_session(title=LONG_TITLE, model="claude-sonnet-4-5-20250929")
    result = run_cli(capsys, "sessions", "--json", "--db", sqlite_url)
    assert '"model": "claude-sonnet-4-5-20250929"' in result.out and LONG_TITLE in result.out


@pytest.mark.parametrize(
    "name, short",
    [
        ("claude-sonnet-4-5-20250929", "sonnet-4.5"),
        ("claude-opus-4-1-20250805", "opus-4.1"),
        ("claude-haiku-4-5", "haiku-4.5"),
        ("claude-3-5-sonnet-20241022", "sonnet-3.5"),
        ("claude-3-opus-latest", "opus-3"),
        ("claude-sonnet-4-20250514", "sonnet-4"),
        ("gpt-5.3-codex", "gpt-5.3-codex"),
        ("claude-instant-1.2", "claude-instant-1.2"),
        (None, ""),
    ],
)
def test_short_model_names(name: str | None, short: str) -> None:
    assert short_model(name) == short


def test_ellipsize_and_short_path() -> None:
    assert ellipsize("a  b\nc", 10) == "a b c"
    assert ellipsize("abcdefghijk", 5) == "abcd…" and len(ellipsize("x" * 100, 7)) == 7
    assert short_path("/home/me/projects/textstats", 12) == "…s/textstats"
    assert short_path("/tmp", 12) == "/tmp"


def test_sessions_table_with_imported_sessions_keeps_one_line_per_row(sqlite_url: str, transcripts_dir) -> None:
    imported = run_cli_process(
        "import", "claude-code", str(transcripts_dir / "claude-code"), "--db", sqlite_url, "--no-progress"
    )
    assert imported.code == 0, imported.err
    env = {**os.environ, "COLUMNS": "80", "LINES": "50"}
    result = run_cli_process("sessions", "--db", sqlite_url, env=env)
    with SessionStore.open(sqlite_url) as store:
        count = len(store.list(limit=1000))
    rows = [line for line in result.out.splitlines() if line.startswith("│")]
    assert result.code == 0 and len(rows) == count and all(len(line) <= 80 for line in result.out.splitlines())
    assert "source id" in result.out


@pytest.mark.parametrize("width", [80, 120])
def test_the_import_table_keeps_one_line_per_file(sqlite_url: str, transcripts_dir, width: int) -> None:
    """File names wrapped over four lines at 80 columns; now they end in an ellipsis."""
    env = {**os.environ, "COLUMNS": str(width), "LINES": "50"}
    result = run_cli_process(
        "import", "claude-code", str(transcripts_dir / "claude-code"), "--db", sqlite_url, "--no-progress", env=env
    )
    assert result.code == 0, result.err
    files = [p for p in (transcripts_dir / "claude-code").rglob("*.jsonl")]
    lines = result.out.splitlines()
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == len(files) and all(len(line) <= width for line in lines)
    assert all(row.rstrip().endswith("│") for row in rows)
    assert sum("sample_main_tra" in row for row in rows) == 1
    assert ("sample_main_transcript.jsonl" in result.out) == (width >= 100), "cut only where it must be"


def test_an_empty_store_says_how_to_fill_it(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's first `sessions` printed an empty table with nothing else."""
    from tests.support.cli import run_cli

    SessionStore.open(sqlite_url).close()
    result = run_cli(capsys, "sessions", "--db", sqlite_url)
    assert result.code == 0 and result.out == ""
    assert "no sessions here yet" in result.err and "sessionstore watch --once" in result.err
    assert run_cli(capsys, "sessions", "--db", sqlite_url, "--json").out.strip() == "[]"
