"""A SQLite file of another program (a `sessions` table, no schema revision) is refused in plain words.

`--db` at such a file said "could not upgrade the database to head:
(sqlite3.OperationalError) table sessions already exists [SQL: CREATE TABLE ...]".
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sessionstore import MigrationError, SessionStore
from tests.support.cli import run_cli


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, cookie TEXT)")
        conn.execute("INSERT INTO sessions (cookie) VALUES ('abc')")


def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def test_another_programs_database_is_refused_and_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "app.db"
    _foreign(path)
    with pytest.raises(MigrationError, match="another program"):
        SessionStore.open(f"sqlite:///{path}")
    result = run_cli(capsys, "sessions", "--db", f"sqlite:///{path}")
    assert result.code == 1 and len(result.err.strip().splitlines()) == 1, result  # a runtime failure, not usage
    assert "another program" in result.err and "CREATE TABLE" not in result.err
    assert _tables(path) == ["sessions"], "nothing written into it"
