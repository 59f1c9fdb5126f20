"""Every numeric CLI option is bounded: out of range is one `error:` line and exit 2, never an OverflowError."""

from __future__ import annotations

import pytest

from sessionstore import SessionStore
from tests.support.cli import run_cli

HUGE = "99999999999999999999"


@pytest.fixture
def sid(sqlite_url: str) -> str:
    with SessionStore.open(sqlite_url) as st:
        return st.create_session(title="bounds").id


@pytest.mark.parametrize(
    "args,option",
    [
        (["sessions", "--limit", HUGE], "--limit"),
        (["sessions", "--limit", "-1"], "--limit"),
        (["sessions", "--offset", HUGE], "--offset"),
        (["sessions", "--offset", "-5"], "--offset"),
        (["new", "--context-window", HUGE], "--context-window"),
        (["new", "--context-window", "-1"], "--context-window"),
        (["new", "--context-window", "0"], "--context-window"),
        (["history", "SID", "--boundary", HUGE], "--boundary"),
        (["history", "SID", "--boundary", "0"], "--boundary"),
        (["history", "SID", "-b", "-3"], "--boundary"),
        (["history", "SID", "--limit", HUGE], "--limit"),
        (["history", "SID", "--limit", "0"], "--limit"),
        (["history", "SID", "--offset", HUGE], "--offset"),
        (["history", "SID", "--offset", "-1"], "--offset"),
        (["search", "word", "--limit", HUGE], "--limit"),
        (["search", "word", "--limit", "0"], "--limit"),
    ],
)
def test_out_of_range_numbers_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, sid: str, args: list[str], option: str
) -> None:
    result = run_cli(capsys, *[sid if a == "SID" else a for a in args], "--db", sqlite_url)
    assert result.code == 2, result
    assert result.err.startswith(f"error: {option} must be between") and result.err.count("\n") == 1, result.err
    with SessionStore.open(sqlite_url) as st:
        assert [s["id"] for s in st.list()] == [sid], "nothing created"


def test_in_range_numbers_still_work(capsys: pytest.CaptureFixture[str], sqlite_url: str, sid: str) -> None:
    assert run_cli(capsys, "sessions", "--limit", "0", "--offset", "9223372036854775807", "--db", sqlite_url).code == 0
    made = run_cli(capsys, "new", "--context-window", "1000000", "--db", sqlite_url)
    assert made.code == 0, made.err
    for args in (
        ["history", sid, "--limit", "1000000", "--offset", "9223372036854775807"],
        ["search", "word", "--limit", "1000000"],
    ):
        assert run_cli(capsys, *args, "--db", sqlite_url).code == 0, args
