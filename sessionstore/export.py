"""Export a session's whole transcript, streaming with constant memory.

`jsonl`: one line per transcript message (envelope + message), every message
ever recorded, boundaries and summaries included — the shape `import jsonl`
reads back. `markdown`: a readable transcript where each boundary is a visible
divider carrying its summary.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Iterator, TextIO

from .history import boundaries

if TYPE_CHECKING:
    from .session import Session
    from .types import StoredMessage

FORMATS = ("jsonl", "markdown", "html", "claude-code")


def export_jsonl(session: "Session", out: TextIO) -> int:
    """Write one JSON line per transcript message; returns the count."""
    count = 0
    for message in session.transcript():
        out.write(json.dumps(message.to_dict(), ensure_ascii=False, separators=(",", ":")))
        out.write("\n")
        count += 1
    return count


def export_markdown(session: "Session", out: TextIO) -> int:
    """Write a readable transcript; boundaries become dividers with their summaries."""
    by_seq = {b.boundary_seq: b for b in boundaries(session)}
    summary_seqs = {b.summary_seq for b in by_seq.values() if b.summary_seq is not None}
    out.write(f"# {session.title or 'Session'} ({session.id})\n\n")
    count = 0
    for message in session.transcript():
        count += 1
        b = by_seq.get(message.seq)
        if b is not None:
            out.write(_divider(b))
            continue
        if message.seq in summary_seqs:
            continue
        out.write(_message_markdown(message))
    return count


def _divider(b: Any) -> str:
    """The horizontal rule a boundary becomes, its summary quoted below."""
    head = (f"\n---\n\n## ✂ Compaction {b.index} — {b.kind}, {b.trigger}: "
            f"{b.pre_tokens:,} → {b.post_tokens:,} tokens, {b.messages_summarized} messages summarized\n\n")
    summary = b.summary or "(no summary)"
    quoted = "\n".join("> " + line if line else ">" for line in summary.splitlines())
    return head + "<details><summary>Summary</summary>\n\n" + quoted + "\n\n</details>\n\n---\n\n"


def _message_markdown(m: "StoredMessage") -> str:
    """One message as a heading plus its blocks."""
    label = m.subtype or m.type
    parts = [f"### {label} · {m.timestamp or ''}\n"]
    for chunk in _blocks_markdown(m.content):
        parts.append(chunk)
    return "\n".join(parts) + "\n"


def _fence(text: str, lang: str = "") -> str:
    """A code fence long enough not to be closed by the text inside."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


def _blocks_markdown(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    for block in content:
        kind = block.get("type")
        if kind == "text":
            yield block.get("text", "")
        elif kind == "thinking":
            yield "<details><summary>thinking</summary>\n\n" + _fence(block.get("thinking", "")) + "\n\n</details>"
        elif kind == "tool_use":
            yield f"**tool_use** `{block.get('name')}` ({block.get('id')})\n\n" + _fence(
                json.dumps(block.get("input"), ensure_ascii=False, indent=2), "json")
        elif kind == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else "\n".join(
                b.get("text", f"[{b.get('type')}]") for b in (inner or []) if isinstance(b, dict))
            status = " (error)" if block.get("is_error") else ""
            yield f"**tool_result**{status} for {block.get('tool_use_id')}\n\n" + _fence(text or "")
        else:
            yield f"[{kind}]"
