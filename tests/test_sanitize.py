"""The shared sanitizer: controls become visible text, colour codes are dropped, text is kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import json

from sessionstore.sanitize import is_clean, json_visible, one_line, visible


def _safe(text: str, *, newlines: bool) -> bool:
    allowed = {"\n", "\t"} if newlines else set()
    return all(
        ch in allowed
        or not (
            ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
        )
        for ch in text
    )


def test_osc_csi_dcs_c1_bidi_and_nul_become_visible() -> None:
    hostile = "a\x1b]0;PWN\x1b\\b\x1b]52;c;aGk=\x07c\x1b[2Jd\x1bP1$q\x1b\\e\x9bf\u202eg\x00h"
    shown = visible(hostile)
    assert _safe(shown, newlines=True)
    assert shown == "a\\x1b]0;PWN\\x1b\\b\\x1b]52;c;aGk=\\x07c\\x1b[2Jd\\x1bP1$q\\x1b\\e\\x9bf\\u202eg\\x00h"


def test_colour_codes_are_dropped_and_the_text_kept() -> None:
    assert visible("\x1b[31mFAILED\x1b[0m test_x\n\x1b[1;32mok\x1b[m") == "FAILED test_x\nok"


def test_newline_and_tab_kept_by_visible_and_shown_by_one_line() -> None:
    assert visible("a\tb\nc\r") == "a\tb\nc\\r"
    assert one_line("a\tb\nc") == "a\\tb\\nc"
    assert is_clean("plain\ttext\n") and not is_clean("x\x1b[0m")


@given(st.text())
def test_any_text_comes_out_safe(text: str) -> None:
    assert _safe(visible(text), newlines=True)
    assert _safe(one_line(text), newlines=False)
    assert is_clean(visible(text))


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_json_visible_keeps_the_value_and_shows_every_control(value: object) -> None:
    """`--json` output: the same document once decoded, and nothing raw a terminal would act on."""
    document = json_visible(json.dumps(value, ensure_ascii=False))
    assert json.loads(document) == value
    assert _safe(document, newlines=False)


def test_the_cli_consoles_sanitize_what_a_caller_forgot_to() -> None:
    """The render hook is the last line of defence: a raw stored string in a table cell or a title, printed
    as is, comes out visible, and markup in it is not parsed."""
    from rich.table import Table

    from sessionstore.cli.common import safe_console

    console = safe_console(record=True, width=200, force_terminal=False)
    table = Table(title="\x1b]0;PWN\x07[/]")
    table.add_column("cell")
    table.add_row("\x1b[2J\x9b[link=https://evil.example]x[/link]\u202e")
    with console.capture() as captured:
        console.print(table)
        console.print("[bold]loud[/bold] \x1b]52;c;eA==\x07")
    out = captured.get()
    assert _safe(out, newlines=True)
    assert "\\x1b]0;PWN" in out and "[/]" in out and "[link=https://evil.example]x[/link]" in out
    assert "[bold]loud[/bold] \\x1b]52;c;eA==" in out
