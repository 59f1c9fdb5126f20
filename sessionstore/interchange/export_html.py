"""Self-contained HTML export of a transcript, written as it streams.

One file, nothing fetched: inline CSS, an inline SVG chart and one small
inline script whose hash is the only script the page's Content-Security-Policy
allows (so nothing injected could run even if escaping failed). Every piece
of transcript content is HTML-escaped (exactly as `html.escape(..., quote=True)`
would), only numbers go into attributes, links in content stay plain text.
The title and headings also show control characters as visible escapes (`\x1b`,
`\u202e`), as every terminal printer does (sessionstore.sanitize.one_line).

`boundaries` is a small list of dicts, one per compaction, with keys:

- `index` (int): K, the anchor is `#boundary-K`;
- `uuid` (str) and `seq` (int): the boundary message;
- `kind`, `trigger` (str): e.g. "full", "auto";
- `pre_tokens`, `post_tokens` (int or None): view tokens before and after;
- `summary` (str): the summary text shown in the navigation column;
- `summarized_seqs` ((first, last) or None): the seq range it replaced,
  folded in the transcript.

`token_points` are (seq, view tokens) pairs for the chart.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from sessionstore.interchange.sinks import TextSink
from sessionstore.sanitize import one_line
from sessionstore.storage.core.blocktypes import COMPACTION, compaction_summary
from sessionstore.storage.codecs.fastjson import loads_stored
from sessionstore.storage.records.rows import message_content
from sessionstore.storage.codecs.textpack import text_of
from sessionstore.storage.core.types import StoredMessage

SCRIPT = """(function () {
  function reveal(id) {
    var el = document.getElementById(id);
    for (var p = el && el.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS") { p.open = true; }
    }
  }
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest ? ev.target.closest("a[href^='#']") : null;
    if (a) { reveal(a.getAttribute("href").slice(1)); }
  });
  if (location.hash) { reveal(location.hash.slice(1)); }
})();"""

SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{SCRIPT_HASH}'; img-src 'none'; base-uri 'none'; form-action 'none'"
)

STYLE = """
body{margin:0;font:14px/1.45 system-ui,sans-serif;color:#1d2330;background:#f6f7f9}
.layout{display:grid;grid-template-columns:300px minmax(0,1fr)}
nav{position:sticky;top:0;height:100vh;overflow:auto;box-sizing:border-box;padding:12px;
background:#fff;border-right:1px solid #d5d9e0}
nav ol{padding-left:1.2em}nav li{margin:0 0 10px}
main{padding:16px 24px;min-width:0}
h1{font-size:20px;margin:4px 0 12px}
.usage{font-size:13px;line-height:18px;color:#44506a;margin:0 0 12px}
.msg{background:#fff;border:1px solid #dde1e7;border-left:4px solid #9aa3b2;border-radius:6px;
margin:10px 0;padding:8px 12px}
.msg>header{font-size:12px;color:#5b6474;margin-bottom:4px}
.role-user{border-left-color:#3a7bd5}.role-assistant{border-left-color:#2e9e6a}
.role-system{background:#fafafa}.boundary{border-left-color:#d9534f;background:#fff4f4}
.summary-msg{border-left-color:#e0a800}
.badge{display:inline-block;padding:0 6px;margin-left:4px;border-radius:8px;background:#eef0f4}
.text,pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0}
pre{background:#f3f4f6;padding:8px;border-radius:4px;max-height:40em;overflow:auto;
font:12px/1.4 ui-monospace,monospace}
details>summary{cursor:pointer;color:#44506a}
.tool-result.error>summary{color:#b42318}
.placeholder{color:#6b7280;font-style:italic}
.replaced{border:1px dashed #c9ced6;border-radius:6px;padding:4px 8px;margin:10px 0}
.chart svg{width:100%;height:auto;background:#fff;border:1px solid #dde1e7;border-radius:6px}
"""

_UNSAFE = re.compile("[\x00\ud800-\udfff]")
_CLASS_SAFE = re.compile(r"[^a-z0-9_-]")

CHART_WIDTH, CHART_HEIGHT, CHART_MARGIN = 900, 220, 40

#: How much transcript markup render_html_rows gathers before each write.
ROWS_FLUSH_CHARS = 1 << 16

#: The messages columns render_html_rows reads, in the order it expects them.
ROW_COLUMNS = "seq, uuid, role, type, subtype, timestamp, usage_json, is_meta, is_compact_summary, content_json"


def esc(value: Any) -> str:
    """Text made safe for HTML content and attribute values (NUL and lone surrogates replaced)."""
    text = value if isinstance(value, str) else str(value)
    if "\x00" in text or (not text.isascii() and _UNSAFE.search(text)):
        text = _UNSAFE.sub("\ufffd", text)
    return _escape(text)


def esc_line(value: Any) -> str:
    """`esc` for a title or a heading: controls (terminal escapes, C1, bidi, newlines) shown as visible escapes.

    A title is read on its own, in a tab or a window list, where a bidi override or an escape
    sequence would disguise what it says; so it shows them, as every terminal printer does.
    """
    return esc(one_line(value if isinstance(value, str) else str(value)))


def _escape(value: Any) -> str:
    """`html.escape(value, quote=True)` for text holding no NUL or lone surrogate: only present characters replaced."""
    text = value if isinstance(value, str) else str(value)
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if '"' in text:
        text = text.replace('"', "&quot;")
    if "'" in text:
        text = text.replace("'", "&#x27;")
    return text


def _may_hold_unsafe(raw: str) -> bool:
    """True when JSON text read from the store could decode to NUL or a lone surrogate.

    Text from the database is valid UTF-8 (no lone surrogate) and the decoder
    rejects raw control characters, so such characters can only come from a
    `\\u0000` or `\\uD800`-`\\uDFFF` escape.
    """
    return "\\u" in raw and ("\\u0000" in raw or "\\ud" in raw or "\\uD" in raw)


def _css_name(value: Any) -> str:
    """A class-name fragment: lowercase letters, digits, '-' and '_' only."""
    return _CLASS_SAFE.sub("-", str(value or "").lower())[:40]


@dataclass(frozen=True, slots=True)
class _Boundary:
    index: int
    uuid: str
    seq: int | None
    kind: str
    trigger: str
    pre_tokens: int | None
    post_tokens: int | None
    summary: str
    first: int | None
    last: int | None

    @classmethod
    def of(cls, data: dict[str, Any], position: int) -> "_Boundary":
        """Normalize one `boundaries` dict (missing keys tolerated)."""
        seqs = data.get("summarized_seqs") or (None, None)
        first, last = (_int_or_none(seqs[0]), _int_or_none(seqs[1])) if len(seqs) == 2 else (None, None)
        index = _int_or_none(data.get("index"))
        return cls(
            index=position if index is None else index,
            uuid=str(data.get("uuid") or ""),
            seq=_int_or_none(data.get("seq")),
            kind=str(data.get("kind") or "full"),
            trigger=str(data.get("trigger") or ""),
            pre_tokens=_int_or_none(data.get("pre_tokens")),
            post_tokens=_int_or_none(data.get("post_tokens")),
            summary=str(data.get("summary") or ""),
            first=first,
            last=last,
        )

    @property
    def label(self) -> str:
        tokens = f"{_n(self.pre_tokens)} → {_n(self.post_tokens)} tokens"
        return f"Compaction {self.index} · {self.kind} · {self.trigger or 'unknown'} · {tokens}"


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    return None


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def render_html(
    out: TextSink,
    *,
    title: str,
    messages: Iterable[StoredMessage],
    boundaries: list[dict[str, Any]],
    token_points: list[tuple[int, int]],
    usage: str = "",
) -> int:
    """Write the whole page to `out`, one message at a time; returns the number of messages.

    `usage` is the line under the title saying what the session's API responses used and cost (plain text).
    """
    return _page(out, title, boundaries, token_points, lambda writer: writer.messages(messages), usage=usage)


def render_html_rows(
    out: TextSink,
    *,
    title: str,
    rows: Iterable[Sequence[Any]],
    boundaries: list[dict[str, Any]],
    token_points: list[tuple[int, int]],
    usage: str = "",
    clean: Callable[[Any], Any] | None = None,
) -> int:
    """`render_html` from ROW_COLUMNS rows as read from the store (the export's fast path); returns their number.

    The page is the same as render_html's for the same messages. Output goes out
    in pieces of about ROWS_FLUSH_CHARS characters rather than per message: far
    fewer writes, memory still bounded. `clean` (export --redact) takes each
    message's decoded content and returns what the page shows of it.
    """
    return _page(
        out, title, boundaries, token_points, lambda writer: writer.rows(rows, clean), ROWS_FLUSH_CHARS, usage=usage
    )


def _page(
    out: TextSink,
    title: str,
    boundaries: list[dict[str, Any]],
    token_points: list[tuple[int, int]],
    feed: Callable[["_TranscriptWriter"], int],
    flush_chars: int = 0,
    *,
    usage: str = "",
) -> int:
    """The page around the transcript, which `feed` writes through a _TranscriptWriter."""
    bounds = [_Boundary.of(b, i + 1) for i, b in enumerate(boundaries)]
    out.write(_head(title))
    out.write('<div class="layout">')
    out.write(_nav(bounds))
    out.write(f'<main><h1 id="top">{esc_line(title)}</h1>')
    if usage:
        out.write(f'<p class="usage" id="usage">{esc(usage)}</p>')
    out.write(_chart(token_points, bounds))
    writer = _TranscriptWriter(out, bounds, flush_chars)
    count = feed(writer)
    writer.finish()
    writer.flush()
    out.write("</main></div>")
    out.write(f"<script>{SCRIPT}</script></body></html>\n")
    return count


def _head(title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc_line(title)}</title><style>{STYLE}</style></head><body>"
    )


def _nav(bounds: list[_Boundary]) -> str:
    """The navigation column: one entry per compaction, its summary foldable."""
    parts = ['<nav><a href="#top">Top</a> · <a href="#chart">Context chart</a><h2>Compactions</h2>']
    if not bounds:
        parts.append('<p class="placeholder">No compaction in this session.</p>')
    else:
        parts.append("<ol>")
        for b in bounds:
            replaced = ""
            if b.first is not None and b.last is not None:
                replaced = f"<div>replaced messages #{b.first}–#{b.last}</div>"
            parts.append(
                f'<li><a href="#boundary-{b.index}">{esc_line(b.label)}</a>{replaced}'
                f'<details class="nav-summary"><summary>Summary</summary>'
                f'<div class="text">{esc(b.summary)}</div></details></li>'
            )
        parts.append("</ol>")
    parts.append("</nav>")
    return "".join(parts)


def _chart(points: list[tuple[int, int]], bounds: list[_Boundary]) -> str:
    """An inline SVG line of view tokens by seq, each compaction's drop in red."""
    head = '<section class="chart" id="chart"><h2>Context tokens</h2>'
    clean = sorted((int(s), int(t)) for s, t in points)
    if not clean:
        return head + '<p class="placeholder">No token data.</p></section>'
    top = max([t for _, t in clean] + [b.pre_tokens or 0 for b in bounds] + [1])
    lo, hi = clean[0][0], max(clean[-1][0], clean[0][0] + 1)
    w, h, m = CHART_WIDTH, CHART_HEIGHT, CHART_MARGIN

    def x(seq: int) -> float:
        return m + (seq - lo) / (hi - lo) * (w - 2 * m)

    def y(tokens: int) -> float:
        return h - m - tokens / top * (h - 2 * m)

    line = " ".join(f"{x(s):.1f},{y(t):.1f}" for s, t in clean)
    parts = [
        head,
        f'<svg viewBox="0 0 {w} {h}" role="img" aria-label="context tokens by message">',
        f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="#9aa3b2"/>',
        f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="#9aa3b2"/>',
        f'<text x="{m}" y="{m - 8}" font-size="11">{top:,} tokens</text>',
        f'<text x="{m}" y="{h - m + 16}" font-size="11">#{lo}</text>',
        f'<text x="{w - m}" y="{h - m + 16}" font-size="11" text-anchor="end">#{hi}</text>',
        f'<polyline points="{line}" fill="none" stroke="#3a7bd5" stroke-width="1.5"/>',
    ]
    for b in bounds:
        parts.append(_drop_mark(b, x, y, lo, hi, h, m))
    parts.append("</svg></section>")
    return "".join(parts)


def _drop_mark(b: _Boundary, x: Any, y: Any, lo: int, hi: int, h: int, m: int) -> str:
    """A dashed line at the boundary, and the pre -> post drop as a red segment."""
    if b.seq is None or not lo <= b.seq <= hi:
        return ""
    bx = x(b.seq)
    mark = [
        f'<g class="drop"><title>{esc_line(b.label)}</title>',
        f'<line x1="{bx:.1f}" y1="{m}" x2="{bx:.1f}" y2="{h - m}" stroke="#d9534f" stroke-dasharray="4 3"/>',
    ]
    if b.pre_tokens is not None and b.post_tokens is not None:
        y1, y2 = y(b.pre_tokens), y(b.post_tokens)
        mark.append(
            f'<line x1="{bx:.1f}" y1="{y1:.1f}" x2="{bx:.1f}" y2="{y2:.1f}" stroke="#d9534f" stroke-width="3"/>'
        )
        mark.append(f'<circle cx="{bx:.1f}" cy="{y1:.1f}" r="3" fill="#d9534f"/>')
    mark.append(f'<text x="{bx + 3:.1f}" y="{m + 10}" font-size="11" fill="#d9534f">{b.index}</text></g>')
    return "".join(mark)


class _Folds:
    """Tracks which replaced segment (if any) is open while messages stream by."""

    def __init__(self, bounds: list[_Boundary]) -> None:
        self.pending = sorted(
            (b for b in bounds if b.first is not None and b.last is not None), key=lambda b: (b.first, b.index)
        )
        self.open: _Boundary | None = None
        self.watch = self._watch()

    def _watch(self) -> float:
        """The lowest seq for which `before` can change anything (below it, calling it is skipped)."""
        if self.open is not None:
            return (self.open.last or 0) + 1
        if self.pending:
            head = self.pending[0]
            return min(head.first or 0, (head.last or 0) + 1)
        return math.inf

    def before(self, seq: int) -> str:
        """Markup to emit before message `seq`: close and/or open a fold."""
        out = ""
        if self.open is not None and self.open.last is not None and seq > self.open.last:
            out += "</details>"
            self.open = None
        if self.open is None:
            while self.pending and (self.pending[0].last or 0) < seq:
                self.pending.pop(0)
            if self.pending and (self.pending[0].first or 0) <= seq:
                self.open = self.pending.pop(0)
                out += (
                    f'<details class="replaced"><summary>Messages #{self.open.first}–#{self.open.last}, '
                    f"replaced by compaction {self.open.index} (open to read)</summary>"
                )
        self.watch = self._watch()
        return out

    def close(self) -> str:
        return "</details>" if self.open is not None else ""


_Escape = Callable[[Any], str]

_META_BADGE = '<span class="badge">meta</span>'
_SUMMARY_BADGE = '<span class="badge">compaction summary</span>'
_ARTICLE_END = "</article>"
_CACHE_MAX = 4096


class _TranscriptWriter:
    """Streams the transcript section: replaced segments folded, anchors at boundaries.

    Markup is written once `flush_chars` characters have gathered (0: after
    every message), so memory stays bounded whatever the transcript's size.
    """

    def __init__(self, out: TextSink, bounds: list[_Boundary], flush_chars: int = 0) -> None:
        self.out = out
        self.flush_chars = flush_chars
        self.parts: list[str] = []
        self.buffered = 0
        self.bounds = bounds
        self.by_uuid = {b.uuid: b for b in bounds if b.uuid}
        self.by_seq = {b.seq: b for b in bounds if b.seq is not None}
        self.anchored: set[int] = set()
        self.folds = _Folds(bounds)
        self.anchors = sorted((b for b in bounds if b.seq is not None), key=lambda b: b.seq or 0)
        self.cursor = 0
        self.next_anchor: float = (self.anchors[0].seq or 0) if self.anchors else math.inf
        self.heads: dict[tuple[Any, Any, Any], tuple[str, str]] = {}
        self.usage_badges: dict[str | bytes, str] = {}
        self.put('<section class="transcript"><h2>Transcript</h2>')

    def messages(self, messages: Iterable[StoredMessage]) -> int:
        """Write StoredMessages (any text, so every string is checked for NUL and lone surrogates)."""
        count = 0
        for m in messages:
            self.write(
                m.seq,
                m.uuid,
                m.role,
                m.type,
                m.subtype,
                m.timestamp,
                m.is_meta,
                m.is_compact_summary,
                _usage_badge(m.usage),
                m.content,
                esc,
            )
            count += 1
        return count

    def rows(self, rows: Iterable[Sequence[Any]], clean: Callable[[Any], Any] | None = None) -> int:
        """Write ROW_COLUMNS rows: only the content is decoded, usage once per distinct value.

        Content whose JSON text could decode to NUL or a lone surrogate gets the
        checking `esc`; the rest the plain escape (same output, less work). `clean`,
        when given, takes the decoded content first.
        """
        count = 0
        for seq, uuid, role, mtype, subtype, timestamp, usage, is_meta, is_summary, packed in rows:
            raw = text_of(packed)
            badge = self.usage_badges.get(usage) if usage else ""
            if badge is None:
                badge = self._usage_badge(usage)
            escape = esc if _may_hold_unsafe(raw) else _escape
            self.write(
                seq,
                uuid,
                role,
                mtype,
                subtype,
                timestamp,
                is_meta == 1,
                is_summary == 1,
                badge,
                message_content(raw, seq, uuid) if clean is None else clean(message_content(raw, seq, uuid)),
                escape,
            )
            count += 1
        return count

    def write(
        self,
        seq: int,
        uuid: str,
        role: Any,
        mtype: Any,
        subtype: Any,
        timestamp: Any,
        is_meta: Any,
        is_summary: Any,
        usage_badge: str,
        content: Any,
        escape: _Escape,
    ) -> None:
        """One message as an <article>, preceded by any fold or anchor due before it."""
        if seq >= self.folds.watch or seq > self.next_anchor:
            self.put(self._before(seq))
        classes, header = self.heads.get((role, mtype, subtype)) or self._head(role, mtype, subtype)
        boundary = self.by_uuid.get(uuid) or self.by_seq.get(seq)
        if boundary is None or boundary.index in self.anchored:
            anchor, label = f"m{seq}", ""
        else:
            self.anchored.add(boundary.index)
            classes += " boundary"
            anchor, label = f"boundary-{boundary.index}", f"<div><b>{esc_line(boundary.label)}</b></div>"
        body = _content(content, escape)
        if is_summary:
            classes += " summary-msg"
            body = f'<details class="summary-text"><summary>Compaction summary</summary>{body}</details>'
        opening = (
            f'<article class="{classes}" id="{anchor}"><header>{header} #{seq}'
            f"{f' · {esc_line(timestamp)}' if timestamp else ''}{_META_BADGE if is_meta else ''}"
            f"{_SUMMARY_BADGE if is_summary else ''}{usage_badge}{label}</header>"
        )
        self.parts += (opening, body, _ARTICLE_END)
        self.buffered += len(opening) + len(body) + len(_ARTICLE_END)
        if self.buffered >= self.flush_chars:
            self.flush()

    def put(self, markup: str) -> None:
        """Queue markup, writing the queue out once it holds `flush_chars` characters."""
        self.parts.append(markup)
        self.buffered += len(markup)
        if self.buffered >= self.flush_chars:
            self.flush()

    def flush(self) -> None:
        """Write out everything queued, in one piece."""
        self.out.write("".join(self.parts))
        self.parts.clear()
        self.buffered = 0

    def _head(self, role: Any, mtype: Any, subtype: Any) -> tuple[str, str]:
        """Class list and header start for a (role, type, subtype), remembered (bounded) as they repeat."""
        badge = f'<span class="badge">{esc_line(subtype)}</span>' if subtype else ""
        head = (f"msg role-{_css_name(role)} type-{_css_name(mtype)}", f"<b>{esc_line(mtype)}</b>{badge}")
        if len(self.heads) >= _CACHE_MAX:
            self.heads.clear()
        self.heads[(role, mtype, subtype)] = head
        return head

    def _usage_badge(self, usage_json: str | bytes) -> str:
        """The usage badge of a stored usage object, remembered (bounded): a response's messages share it."""
        badge = _usage_badge(loads_stored(usage_json))
        if len(self.usage_badges) >= _CACHE_MAX:
            self.usage_badges.clear()
        self.usage_badges[usage_json] = badge
        return badge

    def _before(self, seq: int) -> str:
        """Fold markup, then anchors of boundaries whose message never came, due before message `seq`."""
        parts = [self.folds.before(seq)]
        while self.cursor < len(self.anchors) and (self.anchors[self.cursor].seq or 0) < seq:
            b = self.anchors[self.cursor]
            self.cursor += 1
            if b.index not in self.anchored:
                self.anchored.add(b.index)
                parts.append(_anchor(b))
        self.next_anchor = (self.anchors[self.cursor].seq or 0) if self.cursor < len(self.anchors) else math.inf
        return "".join(parts)

    def finish(self) -> None:
        """Close an open fold, add anchors still missing, end the section."""
        self.put(self.folds.close())
        for b in self.bounds:
            if b.index not in self.anchored:
                self.put(_anchor(b))
        self.put("</section>")


def _anchor(b: _Boundary) -> str:
    """A stand-in boundary marker (its message is not in the transcript)."""
    return f'<div id="boundary-{b.index}" class="msg boundary">{esc_line(b.label)}</div>'


def _usage_badge(usage: Any) -> str:
    """The usage badge: the sum of the top-level integer counters and of the server's compaction iterations
    (billed, and left out of the top-level counters); empty without usage."""
    if not usage:
        return ""
    parts = [
        usage,
        *(i for i in usage.get("iterations") or () if isinstance(i, dict) and i.get("type") == "compaction"),
    ]
    total = sum(v for part in parts for v in part.values() if isinstance(v, int) and not isinstance(v, bool))
    return f'<span class="badge">usage {total:,} tokens</span>'


def _content(content: Any, escape: _Escape) -> str:
    """Message content: a string or a list of blocks."""
    if isinstance(content, str):
        return f'<div class="text">{escape(content)}</div>'
    if isinstance(content, list):
        if len(content) == 1:
            return _block(content[0], escape)
        return "".join([_block(b, escape) for b in content])
    return f"<pre>{escape(_compact_json(content))}</pre>"


_TOOL_USES = ("tool_use", "server_tool_use", "mcp_tool_use")


def _block(block: Any, escape: _Escape) -> str:
    """One content block; tool calls, results and thinking folded."""
    if not isinstance(block, dict):
        return f"<pre>{escape(_compact_json(block))}</pre>"
    kind = block.get("type")
    if kind == "text":
        return f'<div class="text">{escape(block.get("text", ""))}</div>'
    if kind in _TOOL_USES:
        return (
            f'<details class="tool-use"><summary>Tool call <b>{escape(block.get("name", "?"))}</b> '
            f"<code>{escape(block.get('id', ''))}</code></summary>"
            f"<pre>{escape(_compact_json(block.get('input')))}</pre></details>"
        )
    if kind == "tool_result":
        return _tool_result(block, escape)
    if kind == "thinking":
        return (
            '<details class="thinking"><summary>Thinking</summary>'
            f'<div class="text">{escape(block.get("thinking", ""))}</div></details>'
        )
    if kind == "redacted_thinking":
        return '<details class="thinking"><summary>Thinking (redacted)</summary></details>'
    if kind in ("image", "document"):
        return f'<div class="placeholder">[{escape(kind)}: {escape(_source_label(block))}]</div>'
    if kind == COMPACTION:
        return _compaction(block, escape)
    return (
        f'<details class="block"><summary>{escape(kind)} block</summary>'
        f"<pre>{escape(_pretty_json(block))}</pre></details>"
    )


def _compaction(block: dict[str, Any], escape: _Escape) -> str:
    """The API's compaction block: its summary, or that the compaction failed; never its encrypted copy."""
    summary = compaction_summary(block)
    if summary is None:
        return '<div class="placeholder">[compaction failed: the server returned no summary; the view did not change]</div>'
    return (
        '<details class="compaction" open><summary>Compaction summary (the API\'s compaction block)</summary>'
        f'<div class="text">{escape(summary)}</div></details>'
    )


#: json.dumps(value, ensure_ascii=False) and the same with indent=2, without building an encoder per call.
_compact_json = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
_pretty_json = json.JSONEncoder(ensure_ascii=False, indent=2).encode


def _tool_result(block: dict[str, Any], escape: _Escape) -> str:
    """A tool result, folded; its content a string or blocks."""
    error = bool(block.get("is_error"))
    inner = block.get("content")
    summary = (
        f'<details class="tool-result{" error" if error else ""}"><summary>Tool result for '
        f"<code>{escape(block.get('tool_use_id', ''))}</code>{' (error)' if error else ''}</summary>"
    )
    if isinstance(inner, str) or inner is None:
        return f"{summary}<pre>{escape(inner or '')}</pre></details>"
    return f"{summary}{_content(inner, escape)}</details>"


def _source_label(block: dict[str, Any]) -> str:
    """A short description of an image/document source (never its data or URL)."""
    source = block.get("source")
    if not isinstance(source, dict):
        return "no source"
    kind = source.get("type", "?")
    size = len(source.get("data") or "") if kind == "base64" else 0
    media = source.get("media_type", "")
    return f"{kind} {media} {size:,} base64 characters" if size else f"{kind} {media}".strip()
