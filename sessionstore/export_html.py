"""Self-contained HTML export of a transcript, written as it streams.

One file, nothing fetched: inline CSS, an inline SVG chart and one small
inline script whose hash is the only script the page's Content-Security-Policy
allows (so nothing injected could run even if escaping failed). Every piece
of transcript content is HTML-escaped (`html.escape(..., quote=True)`), only
numbers go into attributes, links in content stay plain text.

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
import html
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, TextIO

from .types import StoredMessage

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


def esc(value: Any) -> str:
    """Text made safe for HTML content and attribute values (NUL and lone surrogates replaced)."""
    text = value if isinstance(value, str) else str(value)
    if "\x00" in text or (not text.isascii() and _UNSAFE.search(text)):
        text = _UNSAFE.sub("\ufffd", text)
    return html.escape(text, quote=True)


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
    out: TextIO,
    *,
    title: str,
    messages: Iterable[StoredMessage],
    boundaries: list[dict[str, Any]],
    token_points: list[tuple[int, int]],
) -> None:
    """Write the whole page to `out`, one message at a time."""
    bounds = [_Boundary.of(b, i + 1) for i, b in enumerate(boundaries)]
    out.write(_head(title))
    out.write('<div class="layout">')
    out.write(_nav(bounds))
    out.write(f'<main><h1 id="top">{esc(title)}</h1>')
    out.write(_chart(token_points, bounds))
    _transcript(out, messages, bounds)
    out.write("</main></div>")
    out.write(f"<script>{SCRIPT}</script></body></html>\n")


def _head(title: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
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
                f'<li><a href="#boundary-{b.index}">{esc(b.label)}</a>{replaced}'
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
        f'<g class="drop"><title>{esc(b.label)}</title>',
        f'<line x1="{bx:.1f}" y1="{m}" x2="{bx:.1f}" y2="{h - m}" stroke="#d9534f" stroke-dasharray="4 3"/>',
    ]
    if b.pre_tokens is not None and b.post_tokens is not None:
        y1, y2 = y(b.pre_tokens), y(b.post_tokens)
        mark.append(f'<line x1="{bx:.1f}" y1="{y1:.1f}" x2="{bx:.1f}" y2="{y2:.1f}" stroke="#d9534f" stroke-width="3"/>')
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
        return out

    def close(self) -> str:
        return "</details>" if self.open is not None else ""


def _transcript(out: TextIO, messages: Iterable[StoredMessage], bounds: list[_Boundary]) -> None:
    """Every message in order; replaced segments folded; anchors at boundaries."""
    by_uuid = {b.uuid: b for b in bounds if b.uuid}
    by_seq = {b.seq: b for b in bounds if b.seq is not None}
    anchored: set[int] = set()
    folds = _Folds(bounds)
    out.write('<section class="transcript"><h2>Transcript</h2>')
    pending = sorted((b for b in bounds if b.seq is not None), key=lambda b: b.seq or 0)
    cursor = 0
    for message in messages:
        out.write(folds.before(message.seq))
        while cursor < len(pending) and (pending[cursor].seq or 0) < message.seq:
            b = pending[cursor]
            cursor += 1
            if b.index not in anchored:
                anchored.add(b.index)
                out.write(f'<div id="boundary-{b.index}" class="msg boundary">{esc(b.label)}</div>')
        boundary = by_uuid.get(message.uuid) or by_seq.get(message.seq)
        if boundary is not None and boundary.index in anchored:
            boundary = None
        if boundary is not None:
            anchored.add(boundary.index)
        out.write(_message(message, boundary))
    out.write(folds.close())
    for b in bounds:
        if b.index not in anchored:
            out.write(f'<div id="boundary-{b.index}" class="msg boundary">{esc(b.label)}</div>')
    out.write("</section>")


def _message(message: StoredMessage, boundary: _Boundary | None) -> str:
    """One message as an <article>."""
    classes = ["msg", f"role-{_css_name(message.role)}", f"type-{_css_name(message.type)}"]
    anchor = f"m{message.seq}"
    if boundary is not None:
        classes.append("boundary")
        anchor = f"boundary-{boundary.index}"
    if message.is_compact_summary:
        classes.append("summary-msg")
    header = _header(message, boundary)
    body = _content(message.content, summary=message.is_compact_summary)
    return f'<article class="{" ".join(classes)}" id="{anchor}"><header>{header}</header>{body}</article>'


def _header(message: StoredMessage, boundary: _Boundary | None) -> str:
    parts = [f"<b>{esc(message.type)}</b>"]
    if message.subtype:
        parts.append(f'<span class="badge">{esc(message.subtype)}</span>')
    parts.append(f" #{message.seq}")
    if message.timestamp:
        parts.append(f" · {esc(message.timestamp)}")
    if message.is_meta:
        parts.append('<span class="badge">meta</span>')
    if message.is_compact_summary:
        parts.append('<span class="badge">compaction summary</span>')
    if message.usage:
        total = sum(v for v in message.usage.values() if isinstance(v, int) and not isinstance(v, bool))
        parts.append(f'<span class="badge">usage {total:,} tokens</span>')
    if boundary is not None:
        parts.append(f"<div><b>{esc(boundary.label)}</b></div>")
    return "".join(parts)


def _content(content: Any, *, summary: bool = False) -> str:
    """Message content: a string or a list of blocks."""
    if isinstance(content, str):
        body = f'<div class="text">{esc(content)}</div>'
    elif isinstance(content, list):
        body = "".join(_block(b) for b in content)
    else:
        body = f"<pre>{esc(json.dumps(content, ensure_ascii=False))}</pre>"
    if summary:
        return f'<details class="summary-text"><summary>Compaction summary</summary>{body}</details>'
    return body


def _block(block: Any) -> str:
    """One content block; tool calls, results and thinking folded."""
    if not isinstance(block, dict):
        return f"<pre>{esc(json.dumps(block, ensure_ascii=False))}</pre>"
    kind = block.get("type")
    if kind == "text":
        return f'<div class="text">{esc(block.get("text", ""))}</div>'
    if kind == "thinking":
        return f'<details class="thinking"><summary>Thinking</summary><div class="text">{esc(block.get("thinking", ""))}</div></details>'
    if kind == "redacted_thinking":
        return '<details class="thinking"><summary>Thinking (redacted)</summary></details>'
    if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        return _tool_use(block)
    if kind == "tool_result":
        return _tool_result(block)
    if kind in ("image", "document"):
        return f'<div class="placeholder">[{esc(kind)}: {esc(_source_label(block))}]</div>'
    return (
        f'<details class="block"><summary>{esc(kind)} block</summary>'
        f"<pre>{esc(json.dumps(block, ensure_ascii=False, indent=2))}</pre></details>"
    )


def _tool_use(block: dict[str, Any]) -> str:
    tool_input = _compact_json(block.get("input"))
    return (
        f'<details class="tool-use"><summary>Tool call <b>{esc(block.get("name", "?"))}</b> '
        f'<code>{esc(block.get("id", ""))}</code></summary><pre>{esc(tool_input)}</pre></details>'
    )


_compact_json = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode


def _tool_result(block: dict[str, Any]) -> str:
    error = bool(block.get("is_error"))
    inner = block.get("content")
    if isinstance(inner, str) or inner is None:
        body = f"<pre>{esc(inner or '')}</pre>"
    else:
        body = _content(inner)
    label = " (error)" if error else ""
    return (
        f'<details class="tool-result{" error" if error else ""}"><summary>Tool result for '
        f'<code>{esc(block.get("tool_use_id", ""))}</code>{label}</summary>{body}</details>'
    )


def _source_label(block: dict[str, Any]) -> str:
    """A short description of an image/document source (never its data or URL)."""
    source = block.get("source")
    if not isinstance(source, dict):
        return "no source"
    kind = source.get("type", "?")
    size = len(source.get("data") or "") if kind == "base64" else 0
    media = source.get("media_type", "")
    return f"{kind} {media} {size:,} base64 characters" if size else f"{kind} {media}".strip()
