"""Exit codes a script can act on: 1 when the store failed (busy, unreachable, corrupt), 2 for usage and bad input.

Every error still prints one line on stderr and no traceback; only the code tells the two kinds apart.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from sessionstore import SessionStore
from tests.support.cli import run_cli, run_cli_process

#: Nothing listens on port 1 of the loopback address.
UNREACHABLE = "postgresql+psycopg://x@127.0.0.1:1/db"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def quick_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give up on a locked database after a few milliseconds instead of seconds."""
    monkeypatch.setenv("SESSIONSTORE_BUSY_TIMEOUT_MS", "50")
    monkeypatch.setenv("SESSIONSTORE_WRITE_RETRIES", "1")


@pytest.fixture
def locked_url(store_url: str) -> Iterator[str]:
    """A store whose `sessions` table another connection holds against writers (reads still work)."""
    SessionStore.open(store_url).close()
    if store_url.startswith("sqlite"):
        holder = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield store_url
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    # PostgreSQL waits for a lock forever unless told otherwise: lock_timeout makes the wait fail (SQLSTATE 55P03).
    schema = store_url.rsplit("search_path%3D", 1)[1]
    plain = store_url.split("?", 1)[0].replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as holder:
        holder.execute(f'LOCK TABLE "{schema}".sessions IN SHARE MODE')
        yield store_url + "%20-clock_timeout%3D100"
        holder.rollback()


def test_a_busy_database_exits_1(locked_url: str, quick_busy: None, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "new", "--title", "t", "--db", locked_url)
    assert result.code == 1, result
    assert "busy" in _one_error_line(result.err)


def test_an_unreachable_server_exits_1() -> None:
    result = run_cli_process("sessions", "--db", UNREACHABLE)
    assert result.code == 1, result
    assert "cannot open database" in _one_error_line(result.err) and "Traceback" not in result.err


def test_a_file_that_is_no_database_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database, only notes\n" * 300)
    result = run_cli(capsys, "sessions", "--db", f"sqlite:///{junk}")
    assert result.code == 1, result
    _one_error_line(result.err)


def test_a_mistyped_flag_exits_2(sqlite_url: str) -> None:
    result = run_cli_process("sessions", "--limt", "3", "--db", sqlite_url)
    assert result.code == 2, result
    assert "--limt" in result.err and "Traceback" not in result.err


def test_bad_input_exits_2(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with SessionStore.open(store_url) as store:
        sid = store.create_session().id
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    result = run_cli(capsys, "append", sid, str(bad), "--db", store_url)
    assert result.code == 2, result
    assert "invalid JSON" in _one_error_line(result.err)
    missing = run_cli(capsys, "view", "no-such-session", "--db", store_url)
    assert missing.code == 2, missing
    _one_error_line(missing.err)
