"""`history` shows each boundary's summary honestly (issue 16, item 15).

`history --json` cut `summary` to 200 characters with no flag; the table's
preview was the same boilerplate opening for every boundary. Now the listing
says when it cut (`summary_truncated`, `summary_chars`), `--full` gives the
whole text, and the table shows each summary's first informative line.
"""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.storage.read.history import boundaries
from tests.support.cli import run_cli

FILLER = "a long line of tool output that makes the view worth compacting\n" * 60


def _two_compactions(s) -> None:  # type: ignore[no-untyped-def]
    for round_, request in enumerate(["Rename the config loader.", "Now add a --dry-run flag to deploy."]):
        s.append({"role": "user", "content": request})
        s.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"t{round_}",
                        "name": "Read",
                        "input": {"file_path": f"src/f{round_}.py"},
                    }
                ],
            }
        )
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{round_}", "content": FILLER}]})
        s.append({"role": "assistant", "content": f"Done with step {round_}."})
        compact(s)


def test_json_says_when_it_cut_and_full_gives_everything(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        _two_compactions(s)
        whole = [b.summary or "" for b in boundaries(s)]
    assert all(len(text) > 200 for text in whole)
    listed = json.loads(run_cli(capsys, "history", s.id, "--json", "--db", sqlite_url).out)
    for item, text in zip(listed, whole, strict=True):
        assert item["summary_truncated"] is True and item["summary_chars"] == len(text)
        assert text.startswith(item["summary"].rstrip("…"))
    full = json.loads(run_cli(capsys, "history", s.id, "--json", "--full", "--db", sqlite_url).out)
    assert [item["summary"] for item in full] == whole
    assert all(item["summary_truncated"] is False for item in full)
    one = run_cli(capsys, "history", s.id, "--boundary", "2", "--summary", "--db", sqlite_url).out
    assert one.rstrip("\n") == whole[1]


def test_table_shows_each_summarys_first_informative_line(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionstore.cli.common import console

    monkeypatch.setattr(console, "width", 200)
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        _two_compactions(s)
    listed = json.loads(run_cli(capsys, "history", s.id, "--json", "--db", sqlite_url).out)
    lines = [item["summary_line"] for item in listed]
    assert "Rename the config loader." in lines[0]
    assert "Now add a --dry-run flag to deploy." in lines[1]
    table = run_cli(capsys, "history", s.id, "--db", sqlite_url).out
    assert "This session is being continued" not in table
    assert "Rename the config" in table and "Now add a" in table


def test_first_informative_line_skips_headings_of_any_summarizer() -> None:
    from sessionstore.storage.read.history import first_informative_line

    text = (
        "This session is being continued from a previous conversation.\n\n## 1. Primary Request and Intent:\n"
        "   - The user wants the cache invalidated on deploy.\n"
    )
    assert first_informative_line(text) == "The user wants the cache invalidated on deploy."
    assert first_informative_line("**1. Primary Request and Intent:**\n") == ""
    # Claude Code's own summaries open with an "Analysis:" title and the prompt's lead-in.
    claude = (
        "This session is being continued from a previous conversation that ran out of context.\n\n"
        "Analysis:\nLet me chronologically analyze the conversation:\n\n"
        '1. **User\'s initial request**: "Implement spotter-gqc"\n'
    )
    assert first_informative_line(claude) == '1. **User\'s initial request**: "Implement spotter-gqc"'
    assert first_informative_line("Summary: the parser now streams.\n") == "Summary: the parser now streams."


def test_a_summary_is_cut_only_when_longer_than_the_preview(sqlite_url: str) -> None:
    """A summary that fits the preview is given whole and not flagged; one character more is cut with "…"."""
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        _two_compactions(s)
        b = boundaries(s)[0]
    text = b.summary or ""
    for room in (len(text), len(text) + 50):
        shown = b.to_dict(preview_chars=room)
        assert shown["summary"] == text and shown["summary_truncated"] is False
    cut = b.to_dict(preview_chars=len(text) - 1)
    assert cut["summary"] == text[:-1] + "…" and cut["summary_truncated"] is True


def test_a_long_first_line_is_cut_to_the_limit() -> None:
    """The table's summary line is at most `limit` characters, ellipsis included; a line of exactly `limit` is kept."""
    from sessionstore.storage.read.history import first_informative_line

    exact = "x" * 200
    assert first_informative_line(exact) == exact
    long = "The user wants the deploy script to retry. " * 10
    line = first_informative_line(long)
    assert len(line) == 200 and line == long.strip()[:199] + "…"
