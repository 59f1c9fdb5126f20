"""Stored text put into a markdown export so that CommonMark renders it as the text it is, never as HTML.

A message may hold `<img src=x onerror=...>` or `<a href="javascript:...">` (a web page a tool
fetched, a stranger's README). Markdown passes raw HTML through, so a viewer of the export would
run it. `markdown_body` keeps the message's markdown (emphasis, lists, code) but writes every `<`
that is not inside a code fence or a code span as `&lt;`; the result is parsed once more with a
CommonMark parser, and should any HTML still be found, every `<` is escaped. `markdown_inline`
is the same for one-line fields (titles, labels, ids); `code_span` quotes a name as inline code.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from sessionstore.sanitize import one_line, visible

_PARSER = MarkdownIt("commonmark")
_TICKS = re.compile(r"`+")
_HTML_TOKENS = frozenset({"html_block", "html_inline"})


def markdown_body(text: str) -> str:
    """Markdown `text` with controls shown (see sessionstore.sanitize) and no `<` that could open HTML."""
    text = visible(text)
    if "<" not in text:
        return text
    escaped = _escape_outside_code(text)
    return escaped if not _has_html(escaped) else text.replace("<", "&lt;")


def markdown_inline(text: str) -> str:
    """One line of text for a heading or a label: controls shown, newlines as `\\n`, every `<` escaped."""
    return one_line(text).replace("<", "&lt;")


def code_span(text: str) -> str:
    """`text` as one inline code span: fenced by more backticks than it holds, so nothing inside closes it."""
    flat = one_line(text)
    longest = max((len(run) for run in _TICKS.findall(flat)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _has_html(text: str) -> bool:
    """True when a CommonMark parser finds raw HTML (a block or an inline tag) in `text`."""
    for token in _PARSER.parse(text):
        if token.type in _HTML_TOKENS or any(child.type in _HTML_TOKENS for child in token.children or ()):
            return True
    return False


def _escape_outside_code(text: str) -> str:
    """Every `<` as `&lt;`, except inside fenced code blocks and inside code spans of one paragraph."""
    lines = text.split("\n")
    verbatim = [False] * len(lines)
    blocks: list[tuple[int, int]] = []
    for token in _PARSER.parse(text):
        if token.map is None:
            continue
        start, end = token.map
        if token.type == "fence":
            for i in range(start + 1, min(end, len(lines))):
                verbatim[i] = True
            verbatim[start] = True
        elif token.type == "inline":
            blocks.append((start, end))
    out = [line if verbatim[i] else None for i, line in enumerate(lines)]
    for start, end in blocks:
        if any(verbatim[start:end]):
            continue
        # A token's map may run past the last line (see the fence above): zip stops at the shorter.
        escaped = _escape_paragraph("\n".join(lines[start:end])).split("\n")
        for i, line in zip(range(start, end), escaped, strict=False):
            out[i] = line
    return "\n".join(line if line is not None else lines[i].replace("<", "&lt;") for i, line in enumerate(out))


def _escape_paragraph(text: str) -> str:
    """One paragraph's `<` as `&lt;`, except inside its code spans (a backtick run closed by one as long)."""
    out: list[str] = []
    at = 0
    while True:
        opening = _TICKS.search(text, at)
        if opening is None:
            out.append(text[at:].replace("<", "&lt;"))
            return "".join(out)
        start = opening.start()
        backslashes = len(text[:start]) - len(text[:start].rstrip("\\"))
        if backslashes % 2:
            start += 1
        run = opening.end() - start
        closing = next((m for m in _TICKS.finditer(text, opening.end()) if len(m.group()) == run), None)
        if run == 0 or closing is None or "|" in text[start : closing.end()]:
            out.append(text[at : opening.end()].replace("<", "&lt;"))
            at = opening.end()
            continue
        out.append(text[at:start].replace("<", "&lt;"))
        out.append(text[start : closing.end()])
        at = closing.end()
