"""Paged, read-only reads for browsers: a window of a view by position, never a whole view.

Each function costs what it returns: a page of rows is one index range scan
(the active view's explicit rows by key, its implicit tail by seq, a past
view's rows valid at one version), and a row carries only a short preview of
its content (the first PREVIEW_CHARS characters of the stored JSON, decoded
as a partial document). Nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import jiter

from ..core.blocktypes import COMPACTION, compaction_line
from ..core.errors import MessageNotFound, SessionStoreError
from ..records.rows import MESSAGE_COLUMNS, stored_from_row
from ..records.state import load_state
from ..core.types import StoredMessage

if TYPE_CHECKING:
    from ..engine.db import Database
    from .history import Boundary
    from ..write.session import Session

#: Characters of stored content JSON a list row reads (enough for a one-line preview).
PREVIEW_CHARS = 1200
#: Rows scanned at most when looking for a session's first or latest typed user message.
USER_SCAN_LIMIT = 200

_ROW_COLUMNS = "m.seq, m.uuid, m.role, m.type, m.subtype, m.timestamp, m.is_compact_summary, m.is_meta"


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One line of the sessions list: the session row and its counters, no transcript read."""

    id: str
    title: str | None
    cwd: str | None
    model: str | None
    messages: int
    view_tokens: int
    boundaries: int
    created_at: float
    updated_at: float
    source: str
    context_window: int
    #: Timestamp of the newest transcript message (as recorded, ISO 8601), if any.
    last_timestamp: str | None = None


@dataclass(frozen=True, slots=True)
class ViewRow:
    """One position of a view as a list shows it: envelope, tokens and a one-line preview."""

    position: int
    seq: int
    uuid: str
    role: str
    type: str
    subtype: str | None
    timestamp: str | None
    tokens: int
    replaced: bool
    is_compact_summary: bool
    is_meta: bool
    preview: str


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """(seq, context tokens) where the curve is known from the store's own records."""

    seq: int
    tokens: int


# ------------------------------------------------------------------ sessions


#: A session's last activity as `SessionStore.list` orders by it (appends do not write the session row).
_UPDATED = (
    "COALESCE((SELECT m.written_at FROM messages m WHERE m.session_id = s.id AND m.seq > s.last_seq "
    "AND m.seq = (SELECT MAX(x.seq) FROM messages x WHERE x.session_id = s.id)), s.updated_at)"
)
_SESSION_SQL = (
    "SELECT s.id, s.title, s.cwd, s.model, "
    f"(SELECT COUNT(*) FROM compactions c WHERE c.session_id = s.id), s.created_at, {_UPDATED} AS updated, "
    "s.metadata_json, s.context_window FROM sessions s "
)


def list_sessions(db: "Database", *, text: str = "", limit: int = 100, offset: int = 0) -> list[SessionRow]:
    """Sessions newest first (as `sessions` lists them), narrowed to those whose id, title, cwd, model or host
    has `text`; a word `host:NAME` keeps the sessions captured on that host only."""
    clauses: list[str] = []
    params: dict[str, object] = {"limit": int(limit), "offset": int(offset)}
    words = text.split()
    hosts = [w[len("host:") :] for w in words if w.lower().startswith("host:") and len(w) > len("host:")]
    rest = " ".join(w for w in words if not w.lower().startswith("host:"))
    if hosts:
        clauses.append("s.host = :host")
        params["host"] = hosts[-1]
    if rest:
        clauses.append(
            "(lower(s.id) LIKE :f ESCAPE '\\' OR lower(s.title) LIKE :f ESCAPE '\\' "
            "OR lower(s.cwd) LIKE :f ESCAPE '\\' OR lower(s.model) LIKE :f ESCAPE '\\' "
            "OR lower(s.host) LIKE :f ESCAPE '\\')"
        )
        params["f"] = "%" + _like_escape(rest.lower()) + "%"
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = db.all(
        f"SELECT * FROM ({_SESSION_SQL}{where}) t ORDER BY updated DESC, id LIMIT :limit OFFSET :offset", params
    )
    return [_session_row(db, r) for r in rows]


def session_row(db: "Database", session_id: str) -> SessionRow:
    """One session's list row by exact id; raises SessionStoreError when absent."""
    row = db.one(f"{_SESSION_SQL}WHERE s.id = :id", {"id": session_id})
    if row is None:
        raise SessionStoreError(f"no session {session_id!r}")
    return _session_row(db, row)


def _session_row(db: "Database", r: Sequence[Any]) -> SessionRow:
    """A list row; the counters come from the session's view state (the store's own reading of it)."""
    state = load_state(db, r[0])
    last = db.one(
        "SELECT timestamp FROM messages WHERE session_id = :id AND seq = :seq", {"id": r[0], "seq": state.last_seq}
    )
    meta = json.loads(r[7] or "{}")
    return SessionRow(
        id=r[0],
        title=r[1],
        cwd=r[2],
        model=r[3],
        messages=state.last_seq,
        view_tokens=state.view_tokens,
        boundaries=int(r[4]),
        created_at=float(r[5]),
        updated_at=float(r[6]),
        source=str(meta.get("imported_from") or "native"),
        context_window=int(r[8]),
        last_timestamp=last[0] if last else None,
    )


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def typed_user_text(session: "Session", *, latest: bool) -> str | None:
    """The first (or latest) user message a person typed, as text (never a compaction's summary); scans at
    most USER_SCAN_LIMIT rows."""
    order = "DESC" if latest else "ASC"
    rows = session.db.all(
        f"SELECT substr(unpacked(content_json), 1, {PREVIEW_CHARS}) FROM messages "
        "WHERE session_id = :id AND role = 'user' AND type = 'user' AND NOT is_compact_summary "
        f"ORDER BY seq {order} LIMIT {USER_SCAN_LIMIT}",
        {"id": session.id},
    )
    for (prefix,) in rows:
        text = typed_text(partial_content(prefix))
        if text:
            return text
    return None


def typed_text(content: Any) -> str:
    """The text of a message a person typed (not tool results, not command echoes)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    else:
        return ""
    text = text.strip()
    if text.startswith("<") and (text.startswith("<command-") or text.startswith("<local-command")):
        return ""
    return text


@dataclass(frozen=True, slots=True)
class BoundaryBrief:
    """A compaction in one line: what a preview pane shows without reading its summary."""

    kind: str
    trigger: str
    pre_tokens: int
    post_tokens: int
    messages_summarized: int
    created_at: float


def recent_boundaries(db: "Database", session_id: str, limit: int = 3) -> list[BoundaryBrief]:
    """The session's latest `limit` compactions, newest first (one index range scan)."""
    rows = db.all(
        "SELECT kind, trigger, pre_tokens, post_tokens, messages_summarized, created_at FROM compactions "
        "WHERE session_id = :id ORDER BY boundary_seq DESC LIMIT :n",
        {"id": session_id, "n": int(limit)},
    )
    return [BoundaryBrief(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), float(r[5])) for r in rows]


def boundary_total(db: "Database", session_id: str) -> int:
    """How many compactions the session has (an index range count)."""
    row = db.one("SELECT COUNT(*) FROM compactions WHERE session_id = :id", {"id": session_id})
    return int(row[0]) if row else 0


def summarized_seqs(db: "Database", compaction_id: int) -> frozenset[int]:
    """The transcript seqs one compaction summarized (its own record; no message is read)."""
    row = db.one("SELECT summarized_seqs_json FROM compactions WHERE id = :id", {"id": int(compaction_id)})
    return frozenset(int(s) for s in json.loads(row[0])) if row and row[0] else frozenset()


# --------------------------------------------------------------------- views


def active_count(session: "Session") -> int:
    """Entries in the active view, from the session row alone."""
    state = session.refresh_state()
    return state.explicit_count + (state.last_seq - state.base_seq)


def active_rows(session: "Session", start: int, count: int) -> list[ViewRow]:
    """Active-view positions [start, start + count): explicit rows by key, then the implicit tail by seq."""
    start, count = max(0, int(start)), max(0, int(count))
    out: list[ViewRow] = []
    with session.db.read() as db:
        state = session.refresh_state()
        if start < state.explicit_count:
            rows = db.all(
                f"SELECT {_ROW_COLUMNS}, v.tokens, v.content_json IS NOT NULL, "
                f"substr(COALESCE(v.content_json, unpacked(m.content_json)), 1, {PREVIEW_CHARS}) "
                "FROM view_entries v JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq "
                "WHERE v.session_id = :id AND v.valid_to IS NULL ORDER BY v.key LIMIT :n OFFSET :off",
                {"id": session.id, "n": count, "off": start},
            )
            out.extend(_view_row(start + i, r) for i, r in enumerate(rows))
        implicit_start = max(start, state.explicit_count) - state.explicit_count
        left = count - len(out)
        if left > 0 and state.base_seq + implicit_start < state.last_seq:
            first = state.base_seq + implicit_start + 1
            rows = db.all(
                f"SELECT {_ROW_COLUMNS}, m.tokens, 0, substr(unpacked(m.content_json), 1, {PREVIEW_CHARS}) "
                "FROM messages m WHERE m.session_id = :id AND m.seq >= :a AND m.seq <= :b ORDER BY m.seq",
                {"id": session.id, "a": first, "b": min(state.last_seq, first + left - 1)},
            )
            base = state.explicit_count + implicit_start
            out.extend(_view_row(base + i, r) for i, r in enumerate(rows))
    return out


_VALID_AT = (
    "v.session_id = :id AND v.valid_from >= :floor AND v.valid_from <= :ver "
    "AND (v.valid_to IS NULL OR v.valid_to > :ver)"
)


def past_count(session: "Session", version: int, floor: int = 0, through: int | None = None) -> int:
    """Entries of the view as it stood at the end of `version` (an explicit, replaced version).

    `floor` is the oldest valid_from among that view's rows when known (the boundary's
    recorded view floor, history.boundary_floor): the scan then covers that view, not the history.
    `through` keeps the rows up to that seq (`_through`).
    """
    clause, bound = _through(through)
    row = session.db.one(
        f"SELECT COUNT(*) FROM view_entries v WHERE {_VALID_AT}{clause}",
        {"id": session.id, "ver": version, "floor": min(floor, version), **bound},
    )
    return int(row[0]) if row else 0


def _through(through: int | None) -> tuple[str, dict[str, int]]:
    """The condition and parameter that keep a past view's rows up to seq `through` (none when None).

    A background API compaction replaced its view only up to the last message its request sent
    (history.request_end): what followed was appended meanwhile and was never replaced.
    """
    return ("", {}) if through is None else (" AND v.seq <= :through", {"through": int(through)})


#: A past view spread over at most this many valid_from versions is paged run by run (see past_rows).
MERGE_RUNS = 16


def past_rows(
    session: "Session",
    version: int,
    start: int,
    count: int,
    *,
    key_range: tuple[int, int] | None = None,
    floor: int = 0,
    through: int | None = None,
) -> list[ViewRow]:
    """Positions [start, start + count) of the view at `version` (see past_count), optionally only keys in `key_range`
    and seqs up to `through`.

    With a known floor, the view's rows lie in a few valid_from runs, each already in key order in
    the primary key: the page's keys are merged from the first start + count of each run, so a
    page near the top costs the page, not a sort of the whole view.
    """
    floor = min(floor, version)
    extra, bound = _through(through)
    bounds = {"id": session.id, "ver": version, "floor": floor, **bound}
    if key_range is not None:
        extra += " AND v.key >= :klo AND v.key <= :khi"
        bounds.update(klo=key_range[0], khi=key_range[1])
    start, count = max(0, int(start)), max(0, int(count))
    if floor > 0 and version - floor < MERGE_RUNS:
        keys = _merged_keys(session, version, floor, start + count, extra, bounds)[start : start + count]
        if not keys:
            return []
        rows = session.db.all(
            f"SELECT {_ROW_COLUMNS}, v.tokens, v.content_json IS NOT NULL, "
            f"substr(COALESCE(v.content_json, unpacked(m.content_json)), 1, {PREVIEW_CHARS}) "
            "FROM view_entries v JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq "
            f"WHERE {_VALID_AT} AND v.key IN ({','.join(str(k) for k in keys)}) ORDER BY v.key",
            bounds,
        )
        return [_view_row(start + i, r) for i, r in enumerate(rows)]
    rows = session.db.all(
        f"SELECT {_ROW_COLUMNS}, v.tokens, v.content_json IS NOT NULL, "
        f"substr(COALESCE(v.content_json, unpacked(m.content_json)), 1, {PREVIEW_CHARS}) FROM "
        f"(SELECT v.key, v.seq, v.tokens, v.content_json FROM view_entries v WHERE {_VALID_AT}{extra} "
        "ORDER BY v.key LIMIT :n OFFSET :off) v "
        "JOIN messages m ON m.session_id = :id AND m.seq = v.seq ORDER BY v.key",
        {**bounds, "n": count, "off": start},
    )
    return [_view_row(start + i, r) for i, r in enumerate(rows)]


def _merged_keys(
    session: "Session", version: int, floor: int, limit: int, extra: str, bounds: dict[str, Any]
) -> list[int]:
    """The first `limit` keys of the view at `version`, merged from its valid_from runs floor..version."""
    keys: list[int] = []
    for valid_from in range(floor, version + 1):
        keys.extend(
            int(r[0])
            for r in session.db.all(
                "SELECT v.key FROM view_entries v WHERE v.session_id = :id AND v.valid_from = :vf "
                f"AND (v.valid_to IS NULL OR v.valid_to > :ver){extra} ORDER BY v.key LIMIT :lim",
                {**bounds, "vf": valid_from, "lim": int(limit)},
            )
        )
    keys.sort()
    return keys[:limit]


def segment_keys(session: "Session", version: int, head_uuid: str, tail_uuid: str) -> tuple[int, int] | None:
    """The (first, last) view keys of the run head..tail in the view at `version`, or None if absent."""
    keys = []
    for uuid in (head_uuid, tail_uuid):
        row = session.db.one(
            "SELECT v.key FROM view_entries v JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq "
            f"WHERE {_VALID_AT} AND m.uuid = :uuid",
            {"id": session.id, "ver": version, "floor": 0, "uuid": uuid},
        )
        if row is None:
            return None
        keys.append(int(row[0]))
    return (min(keys), max(keys))


def segment_count(session: "Session", version: int, key_range: tuple[int, int]) -> int:
    """Entries of the view at `version` whose keys lie in `key_range`."""
    row = session.db.one(
        f"SELECT COUNT(*) FROM view_entries v WHERE {_VALID_AT} AND v.key >= :klo AND v.key <= :khi",
        {"id": session.id, "ver": version, "floor": 0, "klo": key_range[0], "khi": key_range[1]},
    )
    return int(row[0]) if row else 0


def active_position(session: "Session", seq: int) -> int | None:
    """The position of message `seq` in the active view, or None when a rewrite replaced it."""
    with session.db.read() as db:
        state = session.refresh_state()
        if state.base_seq < seq <= state.last_seq:
            return state.explicit_count + (seq - state.base_seq - 1)
        row = db.one(
            "SELECT key FROM view_entries WHERE session_id = :id AND valid_to IS NULL AND seq = :seq",
            {"id": session.id, "seq": seq},
        )
        if row is None:
            return None
        before = db.one(
            "SELECT COUNT(*) FROM view_entries WHERE session_id = :id AND valid_to IS NULL AND key < :key",
            {"id": session.id, "key": int(row[0])},
        )
    return int(before[0])


def past_position(session: "Session", version: int, seq: int, floor: int = 0, through: int | None = None) -> int | None:
    """The position of message `seq` in the view at `version` (see past_count), or None when not in it."""
    clause, bound = _through(through)
    bounds = {"id": session.id, "ver": version, "floor": min(floor, version), **bound}
    row = session.db.one(
        f"SELECT v.key FROM view_entries v WHERE {_VALID_AT}{clause} AND v.seq = :seq", {**bounds, "seq": seq}
    )
    if row is None:
        return None
    before = session.db.one(
        f"SELECT COUNT(*) FROM view_entries v WHERE {_VALID_AT}{clause} AND v.key < :key",
        {**bounds, "key": int(row[0])},
    )
    return int(before[0])


def replacing_boundary(session: "Session", seq: int) -> int | None:
    """The index (from 1) of the compaction that took message `seq` out of the view, if one did."""
    row = session.db.one(
        "SELECT MAX(valid_to) FROM view_entries WHERE session_id = :id AND seq = :seq AND valid_to IS NOT NULL",
        {"id": session.id, "seq": seq},
    )
    if row is None or row[0] is None:
        return None
    found = session.db.one(
        "SELECT boundary_seq FROM compactions WHERE session_id = :id AND replaced_version = :v",
        {"id": session.id, "v": int(row[0]) - 1},
    )
    if found is None:
        return None
    index = session.db.one(
        "SELECT COUNT(*) FROM compactions WHERE session_id = :id AND boundary_seq <= :b",
        {"id": session.id, "b": int(found[0])},
    )
    return int(index[0])


# ------------------------------------------------------------------ messages


@dataclass(frozen=True, slots=True)
class ShownMessage:
    """A transcript message and the content a view showed for it (a replacement, or its own)."""

    message: StoredMessage
    content: Any
    replaced: bool


def message_at(session: "Session", seq: int, *, version: int | None = None) -> ShownMessage:
    """Message `seq` with the content the active view (or the view at `version`) shows for it."""
    row = session.db.one(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq = :seq",
        {"id": session.id, "seq": seq},
    )
    if row is None:
        raise MessageNotFound(f"no message with seq {seq} in session {session.id}")
    message = stored_from_row(row)
    if version is None:
        shown = session.db.one(
            "SELECT content_json FROM view_entries WHERE session_id = :id AND valid_to IS NULL AND seq = :seq",
            {"id": session.id, "seq": seq},
        )
    else:
        shown = session.db.one(
            f"SELECT v.content_json FROM view_entries v WHERE {_VALID_AT} AND v.seq = :seq",
            {"id": session.id, "ver": version, "floor": 0, "seq": seq},
        )
    if shown is not None and shown[0] is not None:
        return ShownMessage(message, json.loads(shown[0]), True)
    return ShownMessage(message, message.content, False)


# ------------------------------------------------------------------ timeline


def timeline(session: "Session", found: "Sequence[Boundary]") -> list[TimelinePoint]:
    """The context-token curve from the store's records: each boundary's before/after, then today's total.

    It costs the boundaries, not the transcript: between two recorded points
    the view only grew by appends, so a drawing joins them with a rising line.
    """
    state = session.refresh_state()
    points = [TimelinePoint(0, 0)]
    for b in found:
        points.append(TimelinePoint(b.boundary_seq, b.pre_tokens))
        points.append(TimelinePoint(b.boundary_seq, b.post_tokens))
    if state.last_seq > points[-1].seq or len(points) == 1:
        points.append(TimelinePoint(state.last_seq, state.view_tokens))
    return points


# ------------------------------------------------------------------ previews


def partial_content(prefix: str | None) -> Any:
    """Decode the start of a content JSON document (strings cut short are kept, as far as they go)."""
    if not prefix:
        return ""
    try:
        return jiter.from_json(prefix.encode("utf-8", "surrogatepass"), partial_mode="trailing-strings")
    except ValueError:
        return prefix


def preview_text(content: Any) -> str:
    """One line saying what a content holds: its text, tool calls by name, tool results by their text."""
    if isinstance(content, str):
        return " ".join(content.split())
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict):
            parts.append(_block_preview(block))
    return " ".join(p for p in parts if p)


def _block_preview(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return " ".join(str(block.get("text", "")).split())
    if kind == "tool_use":
        return f"⚙ {block.get('name', '?')} {_input_preview(block.get('input'))}".rstrip()
    if kind == "tool_result":
        mark = "⤶ error: " if block.get("is_error") else "⤶ "
        return mark + preview_text(block.get("content") or "")
    if kind in ("thinking", "redacted_thinking"):
        return "(thinking)"
    if kind == COMPACTION:
        return compaction_line(block)
    return f"[{kind}]"


def _input_preview(value: Any) -> str:
    """The first string of a tool input: usually the command, path or pattern."""
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, str) and item.strip():
                return " ".join(item.split())
    return ""


def _view_row(position: int, r: Sequence[Any]) -> ViewRow:
    return ViewRow(
        position=position,
        seq=int(r[0]),
        uuid=r[1],
        role=r[2],
        type=r[3],
        subtype=r[4],
        timestamp=r[5],
        is_compact_summary=bool(r[6]),
        is_meta=bool(r[7]),
        tokens=int(r[8]),
        replaced=bool(r[9]),
        preview=preview_text(partial_content(r[10]))[:400],
    )
