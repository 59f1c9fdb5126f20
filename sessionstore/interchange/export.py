"""Export a session's whole transcript, streaming with constant memory.

`jsonl`: one line per transcript message (envelope + message), every message
ever recorded, boundaries and summaries included — the shape `import jsonl`
reads back. `markdown`: a readable transcript where each boundary is a visible
divider carrying its summary; stored text is untrusted, so controls are shown as
text and raw HTML is escaped (see markdown_text.py). An API boundary's summary is
its compaction block's content; the rest of that reply (the answer after the block)
follows the divider, and a background compaction's divider stands after the last
message it replaced, before those appended while it was in flight.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator

from sessionstore.interchange.fidelity import check_claude_code
from sessionstore.interchange.importers.claude_code import KIND_FIELD
from sessionstore.interchange.importers.native import JSONL_IDENTITY
from sessionstore.interchange.links import Link, linked_transcript
from sessionstore.interchange.markdown_text import code_span, markdown_body, markdown_inline
from sessionstore.interchange.sinks import ByteSink, TextSink
from sessionstore.sanitize import visible
from sessionstore.storage.core.blocktypes import COMPACTION, compaction_summary
from sessionstore.storage.read.history import Boundary, boundaries
from sessionstore.storage.codecs.linepack import session_lines
from sessionstore.storage.derived.search import document_text
from sessionstore.storage.codecs.fastjson import is_stored_json
from sessionstore.storage.codecs.textpack import TextCorrupt, text_of
from sessionstore.storage.records.rows import dumps, iter_message_rows
from sessionstore.storage.write.apicompaction import API_KINDS

if TYPE_CHECKING:
    from sessionstore.secrets import Redactor
    from sessionstore.storage.write.session import Session
    from sessionstore.storage.core.types import StoredMessage

FORMATS = ("jsonl", "markdown", "html", "claude-code")
log = logging.getLogger("sessionstore.export")

#: What a jsonl line of a message no view ever showed carries (read by `import jsonl`).
OFF_VIEW = '"in_view":false,'


def fork_note(session: "Session") -> str | None:
    """`forked from <parent> <point>` for a fork (what its exports say in their header), else None."""
    from sessionstore.storage.write.fork import lineage

    info = lineage(session.db, session.id)
    if info is None:
        return None
    return f"forked from {info.parent_id}{'' if info.parent_exists else ' (deleted)'} {info.point}"


def export_jsonl(session: "Session", out: TextSink, redactor: "Redactor | None" = None) -> int:
    """Write one JSON line per transcript message (StoredMessage.to_dict's shape); returns the count.

    Lines are assembled from the JSON text as stored, which is exactly what
    decoding and re-encoding would give, without the cost of doing it. The first
    line also carries the session's header (`session`: see `jsonl_header`), which
    messages do not hold (a Codex session's model, cwd and title), so that
    `import jsonl` gives the session back whole. A message that was in no view (an
    imported file's line off the chain its tool would resume) says so with
    `"in_view":false`, so `import jsonl`, which rebuilds the views by replaying the
    file, leaves it out of them too. With a `redactor`, every line passes through it whole.
    """
    count = 0
    header = dumps(jsonl_header(session))
    off_view = never_in_a_view(session)
    for row in iter_message_rows(session.db, session.id):
        line = _jsonl_line(row, header if count == 0 else None, in_view=int(row[0]) not in off_view)
        out.write(line if redactor is None else redactor.json_line(line.encode("utf-8")).decode("utf-8"))
        count += 1
    return count


def jsonl_header(session: "Session") -> dict[str, Any]:
    """The session facts a jsonl export carries on its first line: its source tool's id, title, cwd, model, window.

    `source_id` is the id the session had in its source (a Codex or Claude Code session id,
    as `sessions` shows it), None for a session made here (and for the import of its export,
    whose identity is a digest of its first line, made again on each import); `import jsonl`
    keeps it as the new session's source id.
    """
    row = session.db.one("SELECT source, source_key FROM imports WHERE session_id = :id", {"id": session.id})
    digest = row is not None and row[0] == "jsonl" and str(row[1]).startswith(JSONL_IDENTITY)
    return {
        "source_id": row[1] if row and not digest else None,
        "title": session.title,
        "cwd": session.cwd,
        "model": session.model,
        "context_window": session.context_window,
    }


def never_in_a_view(session: "Session") -> set[int]:
    """The seqs of the messages no view of the session ever showed (one query; usually none).

    A message past `base_seq` is in the active view without a row; every other
    message a view showed has a temporal view row, kept for history.
    """
    rows = session.db.all(
        "SELECT seq FROM messages WHERE session_id = :id AND seq <= :base "
        "EXCEPT SELECT seq FROM view_entries WHERE session_id = :id",
        {"id": session.id, "base": session.refresh_state().base_seq},
    )
    return {int(r[0]) for r in rows}


def _jsonl_line(row: Any, header: str | None = None, *, in_view: bool = True) -> str:
    """One export line from a raw row (seq, uuid, parent, role, type, subtype, ts, api id, usage, meta flags...).

    `header` (JSON text) goes first on the line as its `session` field.
    """
    seq, uuid, parent, role, mtype, subtype, ts, api_id, usage, is_meta, is_summary, meta, content, tokens = row
    damaged: list[str] = []
    usage = _spliced(usage, "usage", damaged)
    meta = _spliced(meta, "metadata", damaged)
    content = _spliced(content, "content", damaged)
    first = "" if header is None else f'"session":{header},'
    off = "" if in_view else OFF_VIEW
    if damaged:
        log.warning(
            "message seq %s (%s) is damaged in the database: its %s written as the raw stored text (a JSON string)",
            seq,
            uuid,
            " and ".join(damaged),
        )
        off += f'"damaged":{dumps(damaged)},'

    return (
        f'{{{first}"seq":{int(seq)},"uuid":{dumps(uuid)},"parent_uuid":{dumps(parent)},"type":{dumps(mtype)},'
        f'"subtype":{dumps(subtype)},"timestamp":{dumps(ts)},"api_message_id":{dumps(api_id)},'
        f'"usage":{usage or "null"},"is_meta":{"true" if is_meta else "false"},'
        f'"is_compact_summary":{"true" if is_summary else "false"},"metadata":{meta or "{}"},'
        f'"tokens":{int(tokens)},{off}'
        f'"message":{{"role":{dumps(role)},"content":{content}}}}}\n'
    )


def _spliced(value: Any, name: str, damaged: list[str]) -> Any:
    """A stored JSON value as the text to splice into a line; one that does not parse (a row damaged outside
    sessionstore) becomes its raw text as a JSON string, and `name` is added to `damaged`."""
    if value is None:
        return None
    try:
        text = text_of(value)
    except TextCorrupt:
        damaged.append(name)
        return "null"
    if is_stored_json(text):
        return text
    damaged.append(name)
    return dumps(text)


def export_markdown(session: "Session", out: TextSink, redactor: "Redactor | None" = None) -> int:
    """Write a readable transcript; boundaries become dividers with their summaries.

    With a `redactor`, the title, each message's content and each summary pass through it.
    """
    clean = _cleaner(redactor)
    found = boundaries(session)
    boundary_seqs = {b.boundary_seq for b in found}
    summary_seqs = {b.summary_seq for b in found if b.summary_seq is not None}
    dividers: dict[int, list[Boundary]] = {}
    for b in found:
        dividers.setdefault(_divider_after(b), []).append(b)
    out.write(f"# {markdown_inline(clean(session.title or 'Session'))} ({markdown_inline(session.id)})\n\n")
    note = fork_note(session)
    if note:
        out.write(f"> {markdown_inline(note)}\n\n")
    count = 0
    for message in session.transcript():
        count += 1
        shown = _shown_content(message, message.seq in summary_seqs) if message.seq not in boundary_seqs else None
        if shown is not None:
            out.write(_message_markdown(message, clean(shown)))
        for b in dividers.get(message.seq, ()):
            out.write(_divider(b, clean(b.summary or "(no summary)")))
    return count


def _divider_after(b: Boundary) -> int:
    """The seq whose message the divider of `b` follows: the boundary message, or for a background API
    compaction the last message of the request it replaced (what came after was not replaced)."""
    sent_through = b.sent_through
    return sent_through if sent_through is not None and sent_through < b.boundary_seq else b.boundary_seq


def _shown_content(message: "StoredMessage", is_summary: bool) -> Any:
    """What the markdown shows of a message: all of it, or for a boundary's summary (which its divider
    quotes) only what an API reply holds beside its compaction block; None when nothing is left."""
    if not is_summary:
        return message.content
    if isinstance(message.content, str):
        return None
    rest = [b for b in message.content if not (isinstance(b, dict) and b.get("type") == COMPACTION)]
    return rest if rest and len(rest) < len(message.content) else None


def _cleaner(redactor: "Redactor | None") -> Callable[[Any], Any]:
    """What stored values go through before an export writes them: the redactor, else nothing."""
    return redactor.value if redactor is not None else _as_is


def _as_is(value: Any) -> Any:
    return value


def _divider(b: Any, summary_text: str) -> str:
    """The horizontal rule a boundary becomes, its summary quoted below (an API boundary's says it is the API's)."""
    head = (
        f"\n---\n\n## ✂ Compaction {b.index} — {markdown_inline(b.kind)}, {markdown_inline(b.trigger)}: "
        f"{b.pre_tokens:,} → {b.post_tokens:,} tokens, {b.messages_summarized} messages summarized\n\n"
    )
    label = "Summary (the API's compaction block)" if b.kind in API_KINDS else "Summary"
    return head + f"<details><summary>{label}</summary>\n\n" + _quoted(summary_text) + "\n\n</details>\n\n---\n\n"


def _quoted(text: str) -> str:
    """Markdown `text` as a block quote (its open code fence closed, raw HTML escaped)."""
    body = markdown_body(closed_fences(text))
    return "\n".join("> " + line if line else ">" for line in body.splitlines())


def _compaction_markdown(block: dict[str, Any]) -> str:
    """A compaction block outside a boundary: its summary quoted, or that the server's compaction failed.

    Its encrypted copy and signature are for the API to read back, never shown."""
    summary = compaction_summary(block)
    if summary is None:
        return "**compaction** failed: the server returned no summary; the view did not change"
    return "**compaction** by the API\n\n" + _quoted(summary)


def _message_markdown(m: "StoredMessage", content: Any) -> str:
    """One message (its `content` as given) as a heading plus its blocks, a blank line between blocks."""
    label = m.subtype or m.type
    parts = [f"### {markdown_inline(label)} · {markdown_inline(m.timestamp or '')}\n"]
    for chunk in _blocks_markdown(content):
        parts.append(chunk.rstrip("\n") + "\n")
    return "\n".join(parts) + "\n"


def _fence(text: str, lang: str = "") -> str:
    """A code fence long enough not to be closed by the text inside (controls shown as text)."""
    text = visible(text)
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text}\n{ticks}"


_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def closed_fences(text: str) -> str:
    """Markdown `text` with a code fence it leaves open closed at its end.

    An unterminated fence in one message would turn every later message into
    code; CommonMark closes a fence with a line of the same character at
    least as long, so that line is appended when the text ends inside one.
    """
    opener: str | None = None
    for line in text.splitlines():
        match = _FENCE_LINE.match(line)
        if match is None:
            continue
        marker, rest = match.groups()
        if opener is None:
            if not (marker[0] == "`" and "`" in rest):
                opener = marker
        elif marker[0] == opener[0] and len(marker) >= len(opener) and not rest.strip():
            opener = None
    return text if opener is None else f"{text.rstrip(chr(10))}\n{opener}"


def _blocks_markdown(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield markdown_body(closed_fences(content))
        return
    for block in content:
        kind = block.get("type")
        if kind == "text":
            yield markdown_body(closed_fences(block.get("text", "")))
        elif kind == "thinking":
            yield "<details><summary>thinking</summary>\n\n" + _fence(block.get("thinking", "")) + "\n\n</details>"
        elif kind == "tool_use":
            head = f"**tool_use** {code_span(str(block.get('name')))} ({markdown_inline(str(block.get('id')))})"
            yield head + "\n\n" + _fence(json.dumps(block.get("input"), ensure_ascii=False, indent=2), "json")
        elif kind == "tool_result":
            inner = block.get("content")
            text = (
                inner
                if isinstance(inner, str)
                else "\n".join(b.get("text", f"[{b.get('type')}]") for b in (inner or []) if isinstance(b, dict))
            )
            status = " (error)" if block.get("is_error") else ""
            target = markdown_inline(str(block.get("tool_use_id")))
            yield f"**tool_result**{status} for {target}\n\n" + _fence(text or "")
        elif kind == "server_tool_use":
            head = f"**server_tool_use** {code_span(str(block.get('name')))} ({markdown_inline(str(block.get('id')))})"
            yield head + "\n\n" + _fence(json.dumps(block.get("input"), ensure_ascii=False, indent=2), "json")
        elif kind == "document" and document_text(block):
            yield "**document**\n\n" + _fence(document_text(block))
        elif kind == COMPACTION:
            yield _compaction_markdown(block)
        else:
            yield f"[{markdown_inline(str(kind))}]"


def export_claude_code(
    session: "Session", out: ByteSink, redactor: "Redactor | None" = None, *, as_recorded: bool = False
) -> int:
    """A Claude Code JSONL its own loader can follow: an imported file's lines byte-for-byte, then the rest.

    Every other message is written in Claude Code's line shape with the file's
    one sessionId, each hanging (`parentUuid`) from the entry before it in the
    first view it appeared in; a boundary has no parent, names the view it
    replaced as `logicalParentUuid` and the run it kept as `preservedSegment`
    (see links.py), so following the chain from the last message gives the
    active view, and from each boundary's logical parent the view before it.
    The file is written to a spool and read back first: one that would import
    as another view or history raises `UnfaithfulExport`, and nothing reaches `out`.
    `as_recorded` writes it all the same: every recorded message, for Claude Code to resume,
    without the view edits (snips) and history shapes its format cannot say.
    With a `redactor`, every line (the imported file's too) passes through it whole.
    """
    with tempfile.TemporaryDirectory(prefix="sessionstore-export-") as folder:
        spool = os.path.join(folder, "session.jsonl")
        with open(spool, "wb") as raw:
            count = _write_claude_code(session, raw if redactor is None else _RedactedLines(raw, redactor))
        if not as_recorded:
            check_claude_code(session, spool)
        with open(spool, "rb") as raw:
            shutil.copyfileobj(raw, out, 1 << 20)
    return count


class _RedactedLines:
    """A byte sink taking whole JSON lines, each passed through a redactor on its way to `out`."""

    def __init__(self, out: BinaryIO, redactor: "Redactor") -> None:
        self.out = out
        self.redactor = redactor

    def write(self, line: bytes) -> int:
        """Write one line (the writers below write exactly one per call)."""
        return self.out.write(self.redactor.json_line(line))


def _write_claude_code(session: "Session", out: ByteSink) -> int:
    """The Claude Code lines of `session` (see `export_claude_code`), unchecked."""
    count = 0
    after_seq = 0
    session_id = session.id
    if session.metadata.get("imported_from") == "claude-code":
        count += _copy_source_lines(session, out)
        after_seq = int(session.metadata.get("imported_last_seq", 0))
        session_id = _file_session_id(session) or session_id
    for message, link in linked_transcript(session, after_seq=after_seq):
        line = claude_code_line(session, message, link=link, session_id=session_id)
        out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        count += 1
    return count


def _source_lines(session: "Session", batch: int) -> Iterator[bytes]:
    """Every raw line of the imported file, in order, read `batch` rows at a time (keyset paging)."""
    for _, raw in session_lines(session.db, session.id, batch):
        yield raw


def _copy_source_lines(session: "Session", out: ByteSink) -> int:
    """Every raw line of the imported file, in order, streamed in batches."""
    count = 0
    for raw in _source_lines(session, 1000):
        out.write(raw)
        count += 1
    return count


def _file_session_id(session: "Session") -> str | None:
    """The sessionId the imported Claude Code file's own lines carry (lines appended later keep it)."""
    for raw in _source_lines(session, 100):
        try:
            found = json.loads(raw).get("sessionId")
        except (ValueError, AttributeError):
            continue
        if isinstance(found, str) and found:
            return found
    return None


def claude_code_line(
    session: "Session", m: "StoredMessage", *, link: Link | None = None, session_id: str | None = None
) -> dict[str, Any]:
    """One transcript message in Claude Code's JSONL entry shape."""
    entry: dict[str, Any] = {
        "parentUuid": link.parent if link is not None else m.parent_uuid,
        "isSidechain": False,
        "userType": "external",
        "cwd": session.cwd,
        "sessionId": session_id or session.id,
        "type": m.type,
        "uuid": m.uuid,
        "timestamp": m.timestamp,
    }
    if m.role == "system":
        entry["subtype"] = m.subtype
        entry["content"] = m.content if isinstance(m.content, str) else json.dumps(m.content)
        if m.subtype == "compact_boundary":
            entry["compactMetadata"] = _compact_metadata(m, link)
            if link is not None:
                entry["logicalParentUuid"] = link.logical_parent
        return entry
    if m.type == "attachment" and isinstance(m.content, str):
        entry["attachment"] = {"type": m.metadata.get("attachment") or "sessionstore", "content": m.content}
        return entry
    if m.type == "attachment":
        entry["type"] = "user"
    message: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "assistant":
        message = {"id": m.api_message_id, "type": "message", "role": "assistant"}
        model = m.metadata.get("model") or session.model
        if isinstance(model, str) and model:  # what a re-import reads the session's model (and cost) from
            message["model"] = model
        message["content"] = m.content
        if m.usage is not None:
            message["usage"] = m.usage
    entry["message"] = message
    if m.is_meta:
        entry["isMeta"] = True
    if m.is_compact_summary:
        entry["isCompactSummary"] = True
    return entry


def _compact_metadata(m: "StoredMessage", link: Link | None) -> dict[str, Any]:
    """trigger, preTokens and, when the compaction kept a run, its preservedSegment."""
    meta: dict[str, Any] = {"trigger": m.metadata.get("trigger"), "preTokens": m.metadata.get("pre_tokens")}
    b = link.boundary if link is not None else None
    if b is None or link is None:
        return meta
    meta.update(trigger=b.trigger, preTokens=b.pre_tokens)
    meta[KIND_FIELD] = b.kind
    if link.segment is not None:
        head, anchor, tail = link.segment
    elif b.head_uuid and b.tail_uuid and b.anchor_uuid:
        head, anchor, tail = b.head_uuid, b.anchor_uuid, b.tail_uuid
    else:
        return meta
    meta["preservedSegment"] = {"headUuid": head, "anchorUuid": anchor, "tailUuid": tail}
    return meta


def token_points(
    session: "Session", max_points: int = 600, *, found: list[Boundary] | None = None
) -> list[tuple[int, int]]:
    """(seq, context tokens) across the conversation, dropping at each compaction.

    A boundary's post-compaction figure already counts the summary and attachments the
    same rewrite recorded right after it, so those are not added again. `found` is the
    session's boundaries when the caller already has them.
    """
    drops = {b.boundary_seq: b.post_tokens for b in (boundaries(session) if found is None else found)}
    step = max(1, session.refresh_state().last_seq // max_points)
    points: list[tuple[int, int]] = []
    running = 0
    last = 0
    in_rewrite = False
    while True:
        rows = session.db.all(
            "SELECT seq, tokens, type, is_compact_summary FROM messages WHERE session_id = :id AND seq > :after "
            "ORDER BY seq LIMIT 5000",
            {"id": session.id, "after": last},
        )
        if not rows:
            break
        for seq, tokens, mtype, is_summary in rows:
            seq = int(seq)
            if seq in drops:
                points.append((seq, running))
                running = drops[seq]
                points.append((seq, running))
                in_rewrite = True
                continue
            if in_rewrite and (is_summary or mtype == "attachment"):
                continue
            in_rewrite = False
            running += int(tokens)
            if seq % step == 0:
                points.append((seq, running))
        last = int(rows[-1][0])
    if last and (not points or points[-1][0] != last):
        points.append((last, running))
    return points


def export_html(session: "Session", out: TextSink, redactor: "Redactor | None" = None) -> int:
    """The self-contained HTML history browser (see export_html.render_html); returns the message count.

    Raw rows go straight to the renderer: only the columns the page shows are
    read, only each message's content is decoded, and no StoredMessage is built.
    With a `redactor`, the title, summaries and each message's content pass through it.
    """
    from sessionstore.interchange.export_html import render_html_rows

    clean = _cleaner(redactor)
    found = boundaries(session)
    ranges = _summarized_ranges(session) if found else {}
    marks = []
    for b in found:
        marks.append(
            {
                "index": b.index,
                "uuid": b.boundary_uuid,
                "seq": b.boundary_seq,
                "kind": b.kind,
                "trigger": b.trigger,
                "pre_tokens": b.pre_tokens,
                "post_tokens": b.post_tokens,
                "summary": clean(b.summary or ""),
                "summarized_seqs": ranges.get(b.id),
            }
        )
    note = fork_note(session)
    title = clean(session.title or session.id) + (f" ({note})" if note else "")
    return render_html_rows(
        out,
        title=title,
        rows=_html_rows(session),
        boundaries=marks,
        token_points=token_points(session, found=found),
        usage=usage_line(session),
        clean=None if redactor is None else redactor.value,
    )


def usage_line(session: "Session") -> str:
    """What the session's API responses used and cost, in one line for the page header ("" without any)."""
    from sessionstore.prices import load_prices
    from sessionstore.usage import cost_text, hit_rate_text, session_usage

    prices = load_prices(session.store.config.prices or None)
    usage = session_usage(session.store, [session.id], prices=prices)[session.id]
    if not usage.responses:
        return ""
    line = (
        f"API usage: {usage.responses:,} responses · input {usage.input_tokens:,} · cache write "
        f"{usage.cache_write:,} (5m {usage.cache_write_5m:,}, 1h {usage.cache_write_1h:,}) · cache read "
        f"{usage.cache_read:,} · output {usage.output_tokens:,} · cache hit {hit_rate_text(usage)} · "
    )
    if usage.unpriced_models:
        line += (
            f"cost unknown ({', '.join(sorted(usage.unpriced_models))} not in the price table; "
            f"the rest ${usage.cost_usd_known:,.2f})"
        )
    else:
        line += f"cost {cost_text(usage)}"
    return line + f" (prices of {prices.date})"


def _html_rows(session: "Session") -> Iterator[Any]:
    """The transcript as export_html.ROW_COLUMNS rows (only what the page shows), in batches: constant memory."""
    from sessionstore.interchange.export_html import ROW_COLUMNS
    from sessionstore.storage.write.session import TRANSCRIPT_BATCH

    return iter_message_rows(session.db, session.id, batch=TRANSCRIPT_BATCH, columns=ROW_COLUMNS)


def _summarized_ranges(session: "Session") -> dict[int, tuple[int, int] | None]:
    """(first, last) seq each compaction of the session replaced, by compaction id (one query)."""
    rows = session.db.all("SELECT id, summarized_seqs_json FROM compactions WHERE session_id = :id", {"id": session.id})
    ranges: dict[int, tuple[int, int] | None] = {}
    for compaction_id, seqs_json in rows:
        seqs = json.loads(seqs_json) if seqs_json else []
        ranges[int(compaction_id)] = (min(seqs), max(seqs)) if seqs else None
    return ranges
