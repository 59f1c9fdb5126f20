"""The shared sanitizer: controls become visible text, colour codes are dropped, text is kept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sessionstore.sanitize import is_clean, one_line, visible


def _safe(text: str, *, newlines: bool) -> bool:
    allowed = {"\n", "\t"} if newlines else set()
    return all(
        ch in allowed or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
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
