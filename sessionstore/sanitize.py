"""The one sanitizer every printer and screen uses: stored text shown as text, never as commands.

Transcripts hold what tools printed (web pages, coloured test runs, strangers' files), so a
stored string may carry terminal escape sequences (OSC 0/8/52 set the title, draw links, write
the clipboard; CSI clears the screen), C1 controls, bidi overrides or NUL. `visible` makes
every such character visible text (`\\x1b`, `\\u202e`) and keeps newline and tab; colour codes
(SGR sequences, `ESC [ ... m`) are dropped whole, so coloured tool output reads as its text.
`one_line` also makes newline and tab visible, for table cells and one-line messages.
"""

from __future__ import annotations

import re

#: SGR ("select graphic rendition") sequences: colours and bold, nothing else.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")

#: Bidi embeddings, overrides and isolates, which reorder what follows them on screen.
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"

#: Every character `visible` replaces: C0 except newline and tab, DEL, C1, bidi controls,
#: and the line/paragraph separators some terminals treat as newlines.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029]")

_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with colour codes dropped and every other control shown as an escape; newline and tab kept."""
    if not text:
        return text
    if "\x1b" in text:
        text = _SGR.sub("", text)
    return _UNSAFE.sub(_escape, text)


def one_line(text: str) -> str:
    """`visible`, with newline and tab shown as `\\n` and `\\t` too: safe for a table cell or a one-line message."""
    if not text:
        return text
    if "\x1b" in text:
        text = _SGR.sub("", text)
    return _UNSAFE_LINE.sub(_escape, text)


#: What `json.dumps(..., ensure_ascii=False)` leaves raw that a terminal acts on: DEL, C1, bidi, separators.
_JSON_RAW = re.compile("[\x7f-\x9f" + _BIDI + "\u2028\u2029]")


def json_visible(document: str) -> str:
    """A JSON document (as json.dumps writes it) with DEL, C1 and bidi controls as `\\uXXXX` escapes: same value.

    Outside strings a JSON document is ASCII, so every such character sits in a string, where the
    escape decodes to the very same character; json.dumps already escapes C0 controls.
    """
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def is_clean(text: str) -> bool:
    """True when `text` holds nothing `visible` would change (no control other than newline and tab)."""
    return _UNSAFE.search(text) is None and "\x1b" not in text
