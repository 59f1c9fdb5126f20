"""History by compaction boundary: what each compaction replaced, and any past view.

A past view is a version range over the temporal `view_entries` rows: the
rows valid at version v (valid_from <= v < valid_to), in key order. A rewrite
materializes the implicit tail of the version it replaces, so every replaced
version is fully explicit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from ..core.blocktypes import compaction_block, compaction_summary
from ..core.errors import SessionStoreError
from ..records.rows import MESSAGE_COLUMNS, stored_from_row
from ..records.state import entries_for_rows
from ..core.types import StoredMessage, ViewEntry

if TYPE_CHECKING:
    from ..write.session import Session


class BoundaryNotFound(SessionStoreError, LookupError):
    """No boundary with that index in the session."""


#: Largest boundary number a database column holds; paging past it finds nothing instead of overflowing.
ORDINAL_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Boundary:
    """One compaction, as `history` lists it (index counts from 1)."""

    index: int
    id: int
    boundary_seq: int
    boundary_uuid: str
    summary_seq: int | None
    timestamp: str | None
    created_at: float
    kind: str
    trigger: str
    pre_tokens: int
    post_tokens: int
    messages_summarized: int
    replaced_version: int
    head_uuid: str | None
    anchor_uuid: str | None
    tail_uuid: str | None
    custom_instructions: str | None
    summarizer: str | None
    summary: str | None
    metadata: dict[str, Any]
    #: The summary's first characters, when it was listed without the full text (a page of `history`).
    summary_preview: str | None = None

    @property
    def preserved_segment(self) -> dict[str, str | None] | None:
        if not (self.head_uuid or self.tail_uuid):
            return None
        return {"head_uuid": self.head_uuid, "anchor_uuid": self.anchor_uuid, "tail_uuid": self.tail_uuid}

    @property
    def sent_through(self) -> int | None:
        """The last seq of the request a background API compaction replaced (see `request_end`), else None."""
        return request_end(self.kind, self.metadata)

    @property
    def summary_line(self) -> str:
        """The summary's first informative line (the boilerplate lead and section headings skipped)."""
        return first_informative_line(self.summary if self.summary is not None else (self.summary_preview or ""))

    def to_dict(self, preview_chars: int | None = None) -> dict[str, Any]:
        """JSON shape for `history --json`.

        With `preview_chars`, `summary` is cut to that many characters and
        `summary_truncated` says so; `summary_chars` is the full length when the
        whole summary was read (`history SESSION --boundary K --summary` prints it).
        """
        summary = self.summary if self.summary is not None else self.summary_preview
        truncated = preview_chars is not None and summary is not None and len(summary) > preview_chars
        if truncated and summary is not None and preview_chars is not None:
            summary = summary[:preview_chars] + "…"
        return {
            "index": self.index,
            "boundary_uuid": self.boundary_uuid,
            "boundary_seq": self.boundary_seq,
            "summary_seq": self.summary_seq,
            "timestamp": self.timestamp,
            "kind": self.kind,
            "trigger": self.trigger,
            "pre_tokens": self.pre_tokens,
            "post_tokens": self.post_tokens,
            "messages_summarized": self.messages_summarized,
            "replaced_version": self.replaced_version,
            "preserved_segment": self.preserved_segment,
            "custom_instructions": self.custom_instructions,
            "summarizer": self.summarizer,
            "summary_line": self.summary_line,
            "summary": summary,
            "summary_truncated": truncated,
            "summary_chars": len(self.summary) if self.summary is not None else None,
            "facts_gate": self.metadata.get("facts_gate"),
        }


#: The kind of a compaction the API made while the conversation went on (apicompaction.API_KINDS).
BACKGROUND_KIND = "api-background"


def request_end(kind: str, metadata: dict[str, Any]) -> int | None:
    """For a background API compaction, the last seq of the request it compacted; None for any other boundary.

    The messages after it were appended while the request was in flight: they were neither sent nor
    replaced, and they follow the compaction message in the view it made (though written before it).
    """
    sent = metadata.get("sent_through")
    return sent if kind == BACKGROUND_KIND and isinstance(sent, int) else None


#: Lines that open every summary and so tell boundaries apart by nothing.
_BOILERPLATE = (
    "This session is being continued from a previous conversation",
    "Carried from the earlier summary:",
    "(newest first)",
    "Let me chronologically analyze",
)
#: A numbered heading ("1. Primary Request and Intent:") or a bare title ("Analysis:", "Summary:").
_HEADING = re.compile(r"^\W*(\d+\.\s+[A-Za-z][A-Za-z /&-]*|[A-Za-z][A-Za-z /&-]{0,40}:)\W*$")


def first_informative_line(summary: str, limit: int = 200) -> str:
    """The first line of `summary` that is not the continuation lead, a numbered heading or a carried note."""
    for raw in summary.splitlines():
        line = raw.strip().lstrip("-* ").strip()
        if not line or line.startswith(_BOILERPLATE) or _HEADING.match(line):
            continue
        return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


#: A summary preview is cut from this many characters of its stored JSON, never decoding the rest.
PREVIEW_SOURCE_CHARS = 1000

_BOUNDARY_COLUMNS = (
    "c.id, c.boundary_seq, b.uuid, c.summary_seq, b.timestamp, c.created_at, c.kind, c.trigger, "
    "c.pre_tokens, c.post_tokens, c.messages_summarized, c.replaced_version, c.head_uuid, c.anchor_uuid, "
    "c.tail_uuid, c.custom_instructions, c.summarizer, {summary}, c.metadata_json, c.ordinal"
)
_BOUNDARY_FROM = (
    "FROM compactions c JOIN messages b ON b.session_id = c.session_id AND b.seq = c.boundary_seq "
    "LEFT JOIN messages s ON s.session_id = c.session_id AND s.seq = c.summary_seq "
)


def boundaries(
    session: "Session", *, limit: int | None = None, offset: int = 0, summaries: bool = True
) -> list[Boundary]:
    """The session's compactions, oldest first: all of them, or one page of `limit` after `offset`.

    With `summaries=False` only a preview of each summary is read (`summary_preview`), so a
    page costs its own rows, not the summaries' full text.
    """
    summary = (
        "unpacked(s.content_json)" if summaries else f"SUBSTR(unpacked(s.content_json), 1, {PREVIEW_SOURCE_CHARS})"
    )
    sql = (
        f"SELECT {_BOUNDARY_COLUMNS.format(summary=summary)} {_BOUNDARY_FROM}"
        "WHERE c.session_id = :id AND c.ordinal > :after"
    )
    params: dict[str, Any] = {"id": session.id, "after": min(max(0, int(offset)), ORDINAL_MAX)}
    if limit is not None:
        sql += " AND c.ordinal <= :upto"
        params["upto"] = min(params["after"] + max(0, int(limit)), ORDINAL_MAX)
    rows = session.db.all(sql + " ORDER BY c.ordinal", params)
    return [_boundary(row, full_summary=summaries) for row in rows]


def boundary_count(session: "Session") -> int:
    """How many boundaries the session has (one index lookup)."""
    row = session.db.one("SELECT MAX(ordinal) FROM compactions WHERE session_id = :id", {"id": session.id})
    return int(row[0] or 0)


def boundary(session: "Session", index: int) -> Boundary:
    """Boundary number `index` (from 1), one indexed lookup; raises BoundaryNotFound."""
    row = session.db.one(
        f"SELECT {_BOUNDARY_COLUMNS.format(summary='unpacked(s.content_json)')} {_BOUNDARY_FROM}"
        "WHERE c.session_id = :id AND c.ordinal = :k",
        {"id": session.id, "k": _ordinal(session, index)},
    )
    if row is None:
        raise _not_found(session, index)
    return _boundary(row)


def _ordinal(session: "Session", index: int) -> int:
    """`index` as a boundary number a column can hold; BoundaryNotFound otherwise (never an OverflowError)."""
    k = int(index)
    if not 1 <= k <= ORDINAL_MAX:
        raise _not_found(session, k)
    return k


def _not_found(session: "Session", index: int) -> BoundaryNotFound:
    """The error naming how many boundaries the session has."""
    count = boundary_count(session)
    return BoundaryNotFound(
        f"session {session.id} has {count} boundar{'y' if count == 1 else 'ies'}; there is no boundary {index}"
    )


def _boundary(row: Any, *, full_summary: bool = True) -> Boundary:
    summary_json = row[17]
    summary = preview = None
    if summary_json and full_summary:
        summary = _text_of(json.loads(summary_json))
    elif summary_json:
        preview = _preview_of(summary_json)
    return Boundary(
        index=int(row[19]),
        id=int(row[0]),
        boundary_seq=int(row[1]),
        boundary_uuid=row[2],
        summary_seq=int(row[3]) if row[3] is not None else None,
        timestamp=row[4],
        created_at=float(row[5]),
        kind=row[6],
        trigger=row[7],
        pre_tokens=int(row[8]),
        post_tokens=int(row[9]),
        messages_summarized=int(row[10]),
        replaced_version=int(row[11]),
        head_uuid=row[12],
        anchor_uuid=row[13],
        tail_uuid=row[14],
        custom_instructions=row[15],
        summarizer=row[16],
        summary=summary,
        metadata=json.loads(row[18] or "{}"),
        summary_preview=preview,
    )


_TEXT_FIELD = re.compile(r'"(?:text|content)"\s*:\s*"')


def _preview_of(prefix: str) -> str:
    """The readable start of a summary from the first characters of its content JSON (maybe cut mid-way)."""
    try:
        return _text_of(json.loads(prefix))
    except ValueError:
        pass
    if prefix.startswith('"'):
        body = prefix[1:]
    else:
        found = _TEXT_FIELD.search(prefix)
        if found is None:
            return ""
        body = prefix[found.end() :]
    end = re.search(r'(?<!\\)(?:\\\\)*"', body)
    if end is not None:
        body = body[: end.end() - 1]
    for cut in range(0, 7):  # drop a trailing half escape sequence
        try:
            return str(json.loads('"' + body[: len(body) - cut] + '"'))
        except ValueError:
            continue
    return ""


def _text_of(content: Any) -> str:
    """A summary message's text: its text blocks, or the summary of the API's compaction block."""
    if isinstance(content, str):
        return content
    api_summary = compaction_summary(compaction_block(content))
    if api_summary is not None:
        return api_summary
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def view_at(session: "Session", version: int) -> list[ViewEntry]:
    """The view exactly as it stood at the end of `version`."""
    return _view_at(session, version, _floor_of(session, version))


def _view_at(session: "Session", version: int, floor: int) -> list[ViewEntry]:
    """The rows valid at `version`, read from valid_from in [floor, version] of the version-range index.

    `floor` is the oldest valid_from among that view's rows (0 when unknown), which bounds the
    scan to the rows written since the oldest one still shown, instead of the session's history.
    """
    current = session.refresh_state()
    if version == current.view_version:
        return session.active_entries()
    if not 0 <= version < current.view_version:
        raise SessionStoreError(f"session {session.id} has no view version {version}")
    rows = session.db.all(
        "SELECT seq, content_json, tokens FROM view_entries "
        "WHERE session_id = :id AND valid_from >= :floor AND valid_from <= :v "
        "AND (valid_to IS NULL OR valid_to > :v) ORDER BY key",
        {"id": session.id, "v": version, "floor": min(floor, version)},
    )
    return entries_for_rows(session.db, session.id, rows)


def _floor_of(session: "Session", version: int) -> int:
    """The recorded floor of a version a compaction replaced, else 0 (scan from the start)."""
    row = session.db.one(
        "SELECT view_floor FROM compactions WHERE session_id = :id AND replaced_version = :v "
        "AND view_floor IS NOT NULL ORDER BY ordinal LIMIT 1",
        {"id": session.id, "v": version},
    )
    return int(row[0]) if row else 0


def view_before(session: "Session", index: int) -> list[ViewEntry]:
    """What the model saw just before boundary `index`.

    For a background API compaction that is the request it compacted: the messages appended
    while the request was in flight were not part of it (they follow the compaction message).
    """
    found = boundary_floor(session, index)
    entries = _view_at(session, found[0], found[1])
    row = session.db.one(
        "SELECT kind, metadata_json FROM compactions WHERE session_id = :id AND ordinal = :k",
        {"id": session.id, "k": _ordinal(session, index)},
    )
    sent_through = request_end(row[0], json.loads(row[1] or "{}")) if row is not None else None
    if sent_through is not None:
        entries = [e for e in entries if e.seq <= sent_through]
    return entries


def view_tokens(entries: Iterable[ViewEntry]) -> int:
    """The tokens of a view: the sum of its entries' counts (the one figure `history -b K` prints and returns)."""
    return sum(e.tokens for e in entries)


def boundary_floor(session: "Session", index: int) -> tuple[int, int]:
    """(replaced_version, view_floor) of boundary `index`: one indexed lookup."""
    row = session.db.one(
        "SELECT replaced_version, view_floor FROM compactions WHERE session_id = :id AND ordinal = :k",
        {"id": session.id, "k": _ordinal(session, index)},
    )
    if row is None:
        boundary(session, index)  # raises BoundaryNotFound with the count
        raise AssertionError("unreachable")
    return int(row[0]), int(row[1] or 0)


def summarized_messages(session: "Session", index: int) -> list[StoredMessage]:
    """The transcript messages boundary `index` summarized, in order."""
    row = session.db.one(
        "SELECT summarized_seqs_json FROM compactions WHERE session_id = :id AND ordinal = :k",
        {"id": session.id, "k": _ordinal(session, index)},
    )
    if row is None:
        boundary(session, index)  # raises BoundaryNotFound with the count
    seqs = json.loads(row[0]) if row else []
    out: list[StoredMessage] = []
    for start in range(0, len(seqs), 500):
        chunk = ",".join(str(int(s)) for s in seqs[start : start + 500])
        rows = session.db.all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq IN ({chunk}) ORDER BY seq",
            {"id": session.id},
        )
        out.extend(stored_from_row(r) for r in rows)
    return out
