"""A database that cannot be opened is bad input: one line naming the URL and what to do, exit 2.

Tried on every command of the CLI (the list is read from the typer app, so a new
command is covered the day it is added) for a PostgreSQL server that is down, a
role that does not exist and a file that is not a SQLite database; the Python
API raises DatabaseUnavailable for each.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Iterator

import pytest
import typer.main

from sessionstore import DatabaseUnavailable, SessionStore, SessionStoreError
from sessionstore.cli.app import app
from tests.conftest import PG_URL
from tests.support.cli import run_cli

#: Commands that never open the database (they must not take --db either).
NO_DATABASE = {"db history"}
PASSWORD = "s3cret-pw"


def _commands() -> Iterator[tuple[str, Any]]:
    """Every leaf command of the app as ("group sub", click command)."""

    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        subs = getattr(command, "commands", None)
        if subs is None:
            yield " ".join(path), command
            return
        for name, sub in sorted(subs.items()):
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])


COMMANDS = dict(_commands())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bad_url(case: str, tmp_path: Path) -> str:
    if case == "server-down":
        return f"postgresql+psycopg://postgres:{PASSWORD}@127.0.0.1:{_closed_port()}/test"
    if case == "password-in-query":
        return f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/test?password={PASSWORD}"
    if case in ("missing-role", "missing-database"):
        if not PG_URL:
            pytest.skip("needs a PostgreSQL server (SESSIONSTORE_TEST_PG_URL)")
        rest = PG_URL.split("@", 1)[1]
        if case == "missing-database":
            return f"postgresql+psycopg://postgres:{PASSWORD}@{rest.split('/', 1)[0]}/no_such_database_x"
        return f"postgresql+psycopg://no_such_role_x:{PASSWORD}@{rest}"
    not_db = tmp_path / "notes.db"
    not_db.write_text("these are my notes, not a database\n" * 200)
    return f"sqlite:///{not_db}"


def _argv(name: str, command: Any, tmp_path: Path) -> list[str]:
    """The command with a plausible value for each argument it requires (and for an optional SESSION)."""
    messages = tmp_path / "messages.jsonl"
    messages.write_text('{"role": "user", "content": "hello"}\n')
    argv = name.split()
    for param in command.params:
        if param.param_type_name != "argument":
            continue
        if param.name in ("paths", "source"):
            argv.append(str(messages))
        elif param.name == "directory":
            argv.append(str(tmp_path / "out"))
        elif param.required or param.name in ("session", "sessions"):
            argv.append("abcd1234")
    return argv


REASONS = {
    "server-down": "is the PostgreSQL server running",
    "password-in-query": "is the PostgreSQL server running",
    "missing-role": "create that role",
    "missing-database": "create that database",
    "not-sqlite": "file is not a database; point --db",
}


@pytest.mark.parametrize("case", list(REASONS))
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_refuses_a_database_it_cannot_open(
    name: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-never-sent")  # chat checks the key before the database
    command = COMMANDS[name]
    takes_db = any(p.name == "db" for p in command.params)
    if name in NO_DATABASE:
        assert not takes_db, f"{name} is listed as not opening the database but takes --db"
        return
    assert takes_db, f"{name} takes no --db; add it (or list the command in NO_DATABASE)"
    url = _bad_url(case, tmp_path)
    result = run_cli(capsys, *_argv(name, command, tmp_path), "--db", url)
    assert result.code == 1, (result.code, result.err)  # unreachable: a runtime failure, not a usage error
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    shown = url.replace(PASSWORD, "***")
    assert lines[0].startswith(f"error: cannot open database {shown}: "), lines[0]
    assert REASONS[case] in lines[0]
    assert PASSWORD not in result.err + result.out
    assert "Traceback" not in result.err


@pytest.mark.parametrize("case", list(REASONS))
def test_the_api_raises_a_typed_error(case: str, tmp_path: Path) -> None:
    url = _bad_url(case, tmp_path)
    with pytest.raises(DatabaseUnavailable) as caught:
        SessionStore.open(url)
    assert isinstance(caught.value, SessionStoreError)
    assert REASONS[case] in str(caught.value) and PASSWORD not in str(caught.value)


def test_a_not_sqlite_file_is_left_untouched(tmp_path: Path) -> None:
    url = _bad_url("not-sqlite", tmp_path)
    path = Path(url.removeprefix("sqlite:///"))
    before = path.read_bytes()
    with pytest.raises(DatabaseUnavailable):
        SessionStore.open(url)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]
