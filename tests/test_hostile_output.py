"""Stored text is untrusted (issue 20, items 1, 2 and 10): no command lets a stored value drive the terminal.

A hostile corpus (tests/support/hostile.py: OSC 0/8/52, CSI clear and cursor moves, DCS, C1
controls, bidi overrides, Rich markup, HTML, NUL) sits in every field a printer shows, appended
through the API and imported from a Claude Code file. Every printing command runs, as text and as
JSON, and none may write a C0 control other than newline and tab, DEL or a C1 control, nor end
in a traceback.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator

import pytest

from sessionstore import SessionStore
from tests.conftest import ENGINES, PG_URL
from tests.support.cli import Result, run_cli
from tests.support.hostile import HOSTILE, MEDIUM, NEEDLE, HostileStore, hostile_store, unsafe_bytes


Hostile = HostileStore


@pytest.fixture(scope="module", params=ENGINES)
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    """A store holding the hostile session appended through the API and the one imported from a file."""
    yield from hostile_store(request.param, tmp_path_factory.mktemp("hostile"), PG_URL)


def commands(h: Hostile) -> list[list[str]]:
    """Every printing command on the hostile sessions, each also run with --json where it takes it."""
    n, i = h.native, h.imported
    return [
        ["sessions"],
        ["search", NEEDLE],
        ["search", NEEDLE, "--session", n],
        ["search", "PWNED"],
        ["view", n],
        ["view", i],
        ["stats", n],
        ["stats", i],
        ["history", n],
        ["history", n, "-b", "1"],
        ["history", n, "-b", "1", "--summary"],
        ["history", n, "-b", "1", "--recompact", "extractive"],
        ["recall", n],
        ["recall", n, "-q", NEEDLE],
        ["recall", n, "--around", MEDIUM + "-1"],
        ["spill", "list", n],
        ["prepare", n, "--dry-run"],
        ["doctor"],
        ["eval", n, i],
        ["import", "claude-code", str(h.folder)],
        ["watch", "--once", str(h.folder)],
    ]


def _clean(result: Result, what: list[str]) -> None:
    assert "Traceback" not in result.err, (what, result.err[-2000:])
    assert not unsafe_bytes(result.out), (what, unsafe_bytes(result.out))
    assert not unsafe_bytes(result.err), (what, unsafe_bytes(result.err))


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_no_printing_command_lets_a_stored_control_through(
    hostile: Hostile, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    for args in commands(hostile):
        full = [*args, "--db", hostile.url] + (["--json"] if as_json else [])
        result = run_cli(capsys, *full)
        _clean(result, full)
        assert result.code == 0, (full, result.code, result.err[-500:])
        if as_json:
            for line in result.out.splitlines() if args[0] == "watch" else [result.out]:
                json.loads(line)


def test_the_payloads_are_shown_as_text_not_dropped(hostile: Hostile, capsys: pytest.CaptureFixture[str]) -> None:
    """What a control was stays readable: `\\x1b]0;PWNED-TITLE` is printed as those characters."""
    result = run_cli(capsys, "view", hostile.native, "--db", hostile.url)
    assert result.code == 0
    shown = run_cli(capsys, "recall", hostile.native, "-q", NEEDLE, "--db", hostile.url).out
    assert "\\x1b]0;PWNED-TITLE" in shown and "\\u202eevil" in shown and "\\x9b2J" in shown
    assert "[link=https://evil.example]x[/link]" in shown and "[/]" in shown


def test_colour_codes_are_dropped_and_their_text_kept(
    hostile: Hostile, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`...\\x07\x1b[31mred\x1b[0m` in a search snippet prints as `...\\x07red`: the colour code is dropped."""
    from sessionstore.cli import common

    monkeypatch.setattr(common.console, "_width", 400)
    shown = run_cli(capsys, "search", "alert(3)", "--db", hostile.url).out
    assert "\\x07red" in shown
    assert "\x1b[31m" not in shown and "\\x1b[31m" not in shown, "dropped, neither sent nor shown"


def test_markdown_export_to_stdout_is_clean(hostile: Hostile, capsys: pytest.CaptureFixture[str]) -> None:
    for sid in (hostile.native, hostile.imported):
        result = run_cli(capsys, "export", sid, "-f", "markdown", "-o", "-", "--db", hostile.url)
        assert result.code == 0, result.err
        _clean(result, ["export", sid])
        assert NEEDLE in result.out


def test_json_keeps_every_value_exactly(hostile: Hostile, capsys: pytest.CaptureFixture[str]) -> None:
    """--json escapes DEL, C1 and bidi controls as \\u escapes: the document decodes to the stored values."""
    result = run_cli(capsys, "sessions", "--json", "--db", hostile.url)
    titles = {row["title"] for row in json.loads(result.out)}
    assert HOSTILE in titles
    assert "\\u009b" in result.out and "\\u202e" in result.out and "\\u007f" in result.out


def test_an_error_line_quoting_a_hostile_argument_is_one_clean_line(
    hostile: Hostile, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "view", "\x1b]0;PWN\x07\x9b2J[/]", "--db", hostile.url)
    assert result.code == 2 and result.err.startswith("error: ") and result.err.count("\n") == 1
    _clean(result, ["view"])
    assert "\\x1b]0;PWN" in result.err


MARKUP = "[/][link=https://evil.example]x[/link][bold]"


@pytest.mark.parametrize("field", ["subtype", "tool_use_id", "uuid"])
def test_rich_markup_in_a_stored_value_is_printed_as_written(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """`[/]` used to end in a MarkupError traceback, `[link=...]` drew a clickable link (item 2)."""
    from sessionstore.cli import common

    monkeypatch.setattr(common.console, "_width", 400)
    tool_id = "t-" + MARKUP if field == "tool_use_id" else "toolu_1"
    with SessionStore.open(store_url) as store:
        s = store.create_session(title=MARKUP)
        s.append({"role": "user", "content": "go", "uuid": "u-" + MARKUP if field == "uuid" else None})
        s.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"c": "x"}}]}
        )
        s.append(
            {"role": "user", "content": [{"type": "tool_result", "content": "y" * 40_000, "tool_use_id": tool_id}]}
        )
        s.append({"role": "system", "content": "note", "subtype": MARKUP if field == "subtype" else None})
        from sessionstore.compaction.pipeline import Pipeline

        Pipeline(store, config=dataclasses.replace(store.config, tool_result_max_chars=500)).prepare(s)
        sid = s.id
    printed = {}
    for command in (("view", sid), ("spill", "list", sid), ("sessions",), ("search", "note")):
        result = run_cli(capsys, *command, "--db", store_url)
        assert result.code == 0, (command, result.err)
        assert "Traceback" not in result.err and "MarkupError" not in result.err
        printed[command[0]] = result.out
    assert MARKUP in printed["sessions"]
    if field == "uuid":  # `view` shows the shortest unique prefix; the JSON has the whole uuid
        assert "u-" + MARKUP in run_cli(capsys, "view", sid, "--json", "--db", store_url).out
    else:
        shown = printed["view" if field == "subtype" else "spill"]
        assert MARKUP in shown, shown
