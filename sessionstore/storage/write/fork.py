"""Forks: a new session whose view is a view another session had, with a record of where it came from.

A fork holds its own copy of the forked view's messages (same uuids, envelopes and
content bytes, renumbered 1..n in view order) and of the replaced content its entries
showed. Cost and bytes follow the forked view, never the parent's history. The copy is
what lets a fork outlive its parent: messages are per-session rows that a deleted
session takes with it, so a fork that referenced them would lose its view with the
parent. Everything the parent recorded outside the view (what earlier compactions
summarized) stays with the parent, reachable through the lineage row.

The cut: `at` a message gives the view as it stood right after that message (the
temporal rows of the version the message was recorded in, cut after its entry);
`before_boundary` K gives exactly the view before boundary K; neither gives the
active view. A cut that would leave a tool_use without its result, or split one
streamed response, is refused with the nearest valid points on either side.

A view that starts with a boundary (what every compaction leaves) is forked with
its compaction: the fork's boundary 1 is the parent's row as the fork sees it.
It replaced the fork's version 0, which is empty, summarized nothing of the
fork, and names the boundary it was copied from (`copied_from`), whose session
keeps the view before it; a cut before it is refused with that pointer. A
boundary message no compaction named would read, in any export read back, as
one more boundary.
"""

from __future__ import annotations

import json
import time
import uuid as uuid_mod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..core.errors import SessionStoreError
from ..core.faults import fault_in
from ..engine.resolve import resolve_message
from ..records.rows import dumps
from ..core.types import BOUNDARY_SUBTYPE, ViewEntry
from ..records.validate import tool_result_ids, tool_use_ids

if TYPE_CHECKING:
    from ..engine.db import Database
    from .session import Session

#: Gap between the sort keys of a fork's view rows (the same spacing rewrites use).
KEY_GAP = 1 << 16

#: The compaction metadata key of a boundary a fork copied with its view: {"session_id", "boundary"} of the source.
COPIED_FROM = "copied_from"

#: The kinds of cut a lineage row records.
KINDS = ("message", "boundary", "current")

_COPIED_COLUMNS = (
    "uuid, parent_uuid, role, type, subtype, timestamp, api_message_id, usage_json, is_meta, "
    "is_compact_summary, metadata_json, content_json, tokens"
)
_COPY_MESSAGE = (
    f"INSERT INTO messages (session_id, seq, {_COPIED_COLUMNS}) "
    f"SELECT :fork, :seq, {_COPIED_COLUMNS} FROM messages WHERE session_id = :parent AND seq = :old"
)
_COPY_REPLACEMENT = (
    "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, created_at) "
    "SELECT :fork, tool_use_id, kind, replacement, blob_sha256, original_size, created_at FROM replacements "
    "WHERE session_id = :parent AND tool_use_id = :tool"
)
#: The blobs of the copied replacements, as the fork's owner's (blobs are kept per owner since revision
#: 0009; forking a session shared with you copies its spilled results into your own).
_COPY_BLOBS = (
    "INSERT INTO blobs (sha256, size, compression, data, created_at) "
    "SELECT b.sha256, b.size, b.compression, b.data, b.created_at FROM blobs b JOIN replacements r "
    "ON r.blob_sha256 = b.sha256 AND r.owner = b.owner WHERE r.session_id = :parent AND r.tool_use_id = :tool "
    "ON CONFLICT (owner, sha256) DO NOTHING"
)
_LINEAGE_COLUMNS = (
    "f.session_id, f.parent_id, f.kind, f.view_version, f.message_uuid, f.message_seq, f.boundary_index, "
    "f.entries, f.created_at, p.id, p.title"
)


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """A message of the parent after which a fork may be cut."""

    uuid: str
    seq: int

    def __str__(self) -> str:
        return f"{self.uuid} (seq {self.seq})"


class InvalidForkPoint(SessionStoreError, ValueError):
    """The cut would leave the fork's view invalid for the API; `nearest` holds the valid points around it."""

    def __init__(self, message: str, nearest: Sequence[ForkPoint] = ()):
        super().__init__(message)
        self.nearest = list(nearest)


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a fork came from: its parent, the kind of cut and the point."""

    session_id: str
    parent_id: str
    kind: str
    view_version: int
    message_uuid: str | None
    message_seq: int | None
    boundary_index: int | None
    entries: int
    created_at: float
    #: False once the parent was deleted (the fork stays whole).
    parent_exists: bool
    parent_title: str | None

    @property
    def point(self) -> str:
        """The cut in words: `at <uuid>`, `before boundary K` or `current view`."""
        if self.kind == "message":
            return f"at {self.message_uuid}"
        if self.kind == "boundary":
            return f"before boundary {self.boundary_index}"
        return f"current view (version {self.view_version})"

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (`sessions --json`, `history --json` header, `stats --json`)."""
        return {
            "parent_id": self.parent_id,
            "parent_exists": self.parent_exists,
            "kind": self.kind,
            "view_version": self.view_version,
            "message_uuid": self.message_uuid,
            "message_seq": self.message_seq,
            "boundary_index": self.boundary_index,
            "entries": self.entries,
            "created_at": self.created_at,
        }


@dataclass(slots=True)
class _Cut:
    """The view a fork will hold and where it was read from."""

    entries: list[ViewEntry]
    kind: str
    view_version: int
    message_uuid: str | None = None
    message_seq: int | None = None
    boundary_index: int | None = None


def fork(
    parent: "Session", *, at: str | int | None = None, before_boundary: int | None = None, title: str | None = None
) -> dict[str, Any]:
    """The session row of a new session holding the parent's view at `at` / before boundary `before_boundary` / now.

    `Session.fork` wraps it in a handle (this module is below the handle: it takes one, never makes one).

    One transaction, reading the parent's view from one snapshot (SQLite: the write lock) so no rewrite
    moves it while it is read; the fork is the forking role's session, also from one shared read-only.
    """
    if at is not None and before_boundary is not None:
        raise SessionStoreError("fork at a message or before a boundary, not both")
    if title is not None and "\x00" in title:
        raise SessionStoreError("title contains a NUL character")
    fork_id = str(uuid_mod.uuid4())

    def body(db: "Database") -> dict[str, Any]:
        if not db.is_sqlite:
            # One snapshot for the whole read: the parent's row is not locked, since a role may fork a
            # session shared with it read-only (SQLite's write transaction already excludes writers).
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").close()
        cut = _read_cut(parent, at, before_boundary)
        return _write_fork(db, parent, fork_id, cut, title)

    try:
        # Not locked by the parent's id: the fork's rows are the forking role's own, not the parent owner's.
        row = parent.db.run_write(body, point="fork")
    finally:
        parent.invalidate()
    return row


def _read_cut(parent: "Session", at: str | int | None, before_boundary: int | None) -> _Cut:
    """The entries the fork will hold, read from the parent's temporal view rows."""
    from ..read import history

    if before_boundary is not None:
        replaced, floor = history.boundary_floor(parent, before_boundary)
        _refuse_copied(parent, int(before_boundary))
        return _Cut(
            history._view_at(parent, replaced, floor), "boundary", replaced, boundary_index=int(before_boundary)
        )
    state = parent.refresh_state()
    if at is None:
        return _Cut(parent.active_entries(), "current", state.view_version)
    seq, uuid = resolve_message(parent, at)
    version = state.view_version if seq > state.base_seq else _first_version(parent, seq)
    if version is None:
        raise InvalidForkPoint(
            f"message {uuid} (seq {seq}) never entered a view of session {parent.id}; fork at a message that did",
            _nearest_in_transcript(parent, seq),
        )
    entries = history.view_at(parent, version)
    index = next((i for i, e in enumerate(entries) if e.seq == seq), None)
    if index is None:  # unreachable for a consistent store: the version was found by this message's row
        raise InvalidForkPoint(f"message {uuid} (seq {seq}) is not in view version {version}")
    _check_cut(entries, index)
    return _Cut(entries[: index + 1], "message", version, message_uuid=uuid, message_seq=seq)


def _refuse_copied(parent: "Session", index: int) -> None:
    """Refuse a cut before a boundary this session copied when it was forked: the view before it is the source's."""
    row = parent.db.one(
        "SELECT metadata_json FROM compactions WHERE session_id = :id AND ordinal = :k", {"id": parent.id, "k": index}
    )
    copied = json.loads(row[0] or "{}").get(COPIED_FROM) if row is not None else None
    if not isinstance(copied, dict):
        return
    source, number = copied.get("session_id"), copied.get("boundary")
    where = f"its boundary {number}" if number is not None else "one of its boundaries"
    raise InvalidForkPoint(
        f"boundary {index} of session {parent.id} came with its view from session {source} ({where}); "
        f"the view before it is that session's: fork {source} --before-boundary {number if number else 'K'}"
    )


def _first_version(parent: "Session", seq: int) -> int | None:
    """The view version in which message `seq` entered the view: its oldest temporal row."""
    row = parent.db.one(
        "SELECT MIN(valid_from) FROM view_entries WHERE session_id = :id AND seq = :seq", {"id": parent.id, "seq": seq}
    )
    return None if row is None or row[0] is None else int(row[0])


def valid_cuts(entries: Sequence[ViewEntry]) -> list[bool]:
    """For each entry, whether a view cut right after it is whole for the API.

    A cut is whole when every tool_use before it has its result before it and it does not
    fall between two stored pieces of one streamed response.
    """
    pending: set[str] = set()
    out = []
    for i, entry in enumerate(entries):
        if entry.role == "assistant":
            pending.update(tool_use_ids(entry.content))
        elif entry.role == "user":
            pending.difference_update(tool_result_ids(entry.content))
        following = entries[i + 1] if i + 1 < len(entries) else None
        api_id = entry.message.api_message_id
        split = (
            following is not None
            and entry.role == "assistant"
            and following.role == "assistant"
            and api_id is not None
            and following.message.api_message_id == api_id
        )
        out.append(not pending and not split)
    return out


def _check_cut(entries: list[ViewEntry], index: int) -> None:
    """Raise InvalidForkPoint, naming the nearest valid cuts, unless the cut after `index` is whole."""
    ok = valid_cuts(entries)
    if ok[index]:
        return
    before = next((i for i in range(index - 1, -1, -1) if ok[i]), None)
    after = next((i for i in range(index + 1, len(entries)) if ok[i]), None)
    labelled = [
        (label, ForkPoint(entries[i].uuid, entries[i].seq))
        for label, i in (("before", before), ("after", after))
        if i is not None
    ]
    nearest = [p for _, p in labelled]
    target = entries[index]
    why = _why_not(entries, index)
    shown = (
        "; nearest valid points: " + ", ".join(f"{label} {p}" for label, p in labelled)
        if nearest
        else "; no message of that view is a valid point"
    )
    raise InvalidForkPoint(f"cannot fork right after message {target.uuid} (seq {target.seq}): {why}{shown}", nearest)


def _why_not(entries: list[ViewEntry], index: int) -> str:
    """Why the cut after `index` is not whole, in words."""
    pending: list[str] = []
    for entry in entries[: index + 1]:
        if entry.role == "assistant":
            pending += tool_use_ids(entry.content)
        elif entry.role == "user":
            answered = set(tool_result_ids(entry.content))
            pending = [p for p in pending if p not in answered]
    if pending:
        return f"tool_use {', '.join(pending[:3])} would have no tool_result"
    return "it would split one streamed assistant response"


def _nearest_in_transcript(parent: "Session", seq: int) -> list[ForkPoint]:
    """The closest messages before and after `seq` that did enter a view (suggestions only)."""
    out = []
    for op, order in (("<", "DESC"), (">", "ASC")):
        row = parent.db.one(
            f"SELECT m.seq, m.uuid FROM messages m WHERE m.session_id = :id AND m.seq {op} :seq AND EXISTS "
            "(SELECT 1 FROM view_entries v WHERE v.session_id = m.session_id AND v.seq = m.seq) "
            f"ORDER BY m.seq {order} LIMIT 1",
            {"id": parent.id, "seq": seq},
        )
        if row is not None:
            out.append(ForkPoint(row[1], int(row[0])))
    return out


def _write_fork(db: "Database", parent: "Session", fork_id: str, cut: _Cut, title: str | None) -> dict[str, Any]:
    """Insert the fork's session row, its copy of the view, its replacements and its lineage row."""
    from .rewrite import tail_state_for

    now = time.time()
    row = {
        "id": fork_id,
        "title": title if title is not None else parent.title,
        "cwd": parent.cwd,
        "model": parent.model,
        "context_window": parent.context_window,
        "created_at": now,
        "updated_at": now,
        "parent_id": None,
        "metadata_json": "{}",
        "host": parent.store.config.host_name(),
    }
    # The fork is the forking role's session (PostgreSQL: current_user), made on this machine.
    row["owner"] = db.one(
        "INSERT INTO sessions (id, title, cwd, model, context_window, created_at, updated_at, parent_id, "
        "metadata_json, host) VALUES (:id, :title, :cwd, :model, :context_window, :created_at, :updated_at, "
        ":parent_id, :metadata_json, :host) RETURNING owner",
        row,
    )[0]
    entries = cut.entries
    db.executemany(
        _COPY_MESSAGE,
        [{"fork": fork_id, "seq": i + 1, "parent": parent.id, "old": e.seq} for i, e in enumerate(entries)],
    )
    fault_in(db, "after_messages")
    explicit = _explicit_prefix(entries)
    replaced = [dumps(e.content) if e.replaced else None for e in entries]
    # A view that starts with a boundary is a compaction's result: the fork records it as its boundary 1
    # (see _copy_leading_compaction), so its own view is version 1 and version 0, before it, is empty.
    version = 1 if _starts_with_boundary(entries) else 0
    db.insert_rows(
        "view_entries",
        ("session_id", "valid_from", "key", "seq", "valid_to", "content_json", "tokens"),
        [(fork_id, version, (i + 1) * KEY_GAP, i + 1, None, replaced[i], entries[i].tokens) for i in range(explicit)],
    )
    if version:
        _copy_leading_compaction(db, parent, fork_id, entries, now)
    tools = sorted({t for e in entries if e.replaced and e.role == "user" for t in _replaced_results(e)})
    copies = [{"fork": fork_id, "parent": parent.id, "tool": t} for t in tools]
    db.executemany(_COPY_BLOBS, [{"parent": c["parent"], "tool": c["tool"]} for c in copies])
    db.executemany(_COPY_REPLACEMENT, copies)
    fault_in(db, "after_view_rows")
    tail = tail_state_for(db, fork_id, [(i + 1, replaced[i]) for i in range(len(entries))])
    db.execute(
        "UPDATE sessions SET last_seq = :last, base_seq = :base, view_version = :version, view_tokens = :tokens, "
        "explicit_count = :base, tail_state = :tail WHERE id = :id",
        {
            "last": len(entries),
            "base": explicit,
            "version": version,
            "tokens": sum(e.tokens for e in entries),
            "tail": tail.dumps(),
            "id": fork_id,
        },
    ).close()
    db.execute(
        "INSERT INTO session_forks (session_id, parent_id, kind, view_version, message_uuid, message_seq, "
        "boundary_index, entries, created_at) VALUES (:id, :parent, :kind, :version, :uuid, :seq, :boundary, "
        ":entries, :now)",
        {
            "id": fork_id,
            "parent": parent.id,
            "kind": cut.kind,
            "version": cut.view_version,
            "uuid": cut.message_uuid,
            "seq": cut.message_seq,
            "boundary": cut.boundary_index,
            "entries": len(entries),
            "now": now,
        },
    ).close()
    return row


def _starts_with_boundary(entries: Sequence[ViewEntry]) -> bool:
    """True when the view's first entry is a compaction boundary (the view a compaction left)."""
    return bool(entries) and entries[0].role == "system" and entries[0].subtype == BOUNDARY_SUBTYPE


def _copy_leading_compaction(
    db: "Database", parent: "Session", fork_id: str, entries: Sequence[ViewEntry], now: float
) -> None:
    """Record the compaction whose boundary starts the forked view as the fork's boundary 1.

    Without it the fork would hold a boundary message no compaction names, which every reader
    of its transcript (an export read back, `import jsonl`, Claude Code's loader) takes for one
    more boundary. The row is the parent's, as the fork sees it: it replaced version 0, which
    is empty (nothing before it is the fork's), summarized nothing of the fork, and names the
    parent and the parent's boundary number in its metadata, where the view before it is kept.
    """
    first = entries[0]
    found = db.one(
        "SELECT kind, trigger, pre_tokens, post_tokens, summary_seq, head_uuid, anchor_uuid, tail_uuid, "
        "custom_instructions, summarizer, created_at, ordinal FROM compactions "
        "WHERE session_id = :parent AND boundary_seq = :seq",
        {"parent": parent.id, "seq": first.seq},
    )
    new_seq = {e.seq: i + 1 for i, e in enumerate(entries)}
    uuids = {e.uuid for e in entries}
    summary_at = _summary_position(entries, found[4] if found is not None else None)
    shown_tokens = sum(e.tokens for e in entries[: (summary_at if summary_at is not None else 0) + 1])
    meta = first.message.metadata
    if found is not None:
        kind, trigger, pre, post, _summary, head, anchor, tail, instructions, summarizer, created, ordinal = found
    else:  # a boundary no compaction of the parent names (a fork made before forks recorded one)
        kind, trigger, pre, post = "full", meta.get("trigger") or "auto", meta.get("pre_tokens"), shown_tokens
        head = anchor = tail = instructions = summarizer = ordinal = None
        created = now
    segment = (head, anchor, tail) if head and anchor and tail and {head, anchor, tail} <= uuids else (None,) * 3
    db.execute(
        "INSERT INTO compactions (session_id, boundary_seq, summary_seq, replaced_version, kind, trigger, "
        "pre_tokens, post_tokens, messages_summarized, summarized_seqs_json, head_uuid, anchor_uuid, tail_uuid, "
        "custom_instructions, summarizer, created_at, metadata_json, ordinal, view_floor) VALUES (:id, 1, :summary, "
        "0, :kind, :trigger, :pre, :post, 0, '[]', :head, :anchor, :tail, :instructions, :summarizer, :created, "
        ":meta, 1, 0)",
        {
            "id": fork_id,
            "summary": new_seq[entries[summary_at].seq] if summary_at is not None else None,
            "kind": kind,
            "trigger": trigger if isinstance(trigger, str) and trigger else "auto",
            "pre": pre if isinstance(pre, int) and not isinstance(pre, bool) else 0,
            "post": int(post) if post is not None else shown_tokens,
            "head": segment[0],
            "anchor": segment[1],
            "tail": segment[2],
            "instructions": instructions,
            "summarizer": summarizer,
            "created": float(created),
            "meta": dumps({COPIED_FROM: {"session_id": parent.id, "boundary": ordinal}}),
        },
    ).close()


def _summary_position(entries: Sequence[ViewEntry], parent_summary_seq: Any) -> int | None:
    """Where the leading boundary's summary is in the view: the parent's, else the first summary before another boundary."""
    if parent_summary_seq is not None:
        found = next((i for i, e in enumerate(entries) if e.seq == int(parent_summary_seq)), None)
        if found is not None:
            return found
    for i, e in enumerate(entries[1:], 1):
        if e.subtype == BOUNDARY_SUBTYPE and e.role == "system":
            return None
        if e.message.is_compact_summary:
            return i
    return None


def _replaced_results(entry: ViewEntry) -> list[str]:
    """The tool_use ids whose result this entry shows differently from its message (cleared, spilled).

    Only their decisions go with the fork: a decision the parent made later, for a result this
    view still shows whole, would change the forked view on its next prepare.
    """
    original = (
        {
            b.get("tool_use_id"): b
            for b in entry.message.content
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        if isinstance(entry.message.content, list)
        else {}
    )
    return [
        b["tool_use_id"]
        for b in entry.content
        if isinstance(b, dict) and b.get("type") == "tool_result" and original.get(b.get("tool_use_id")) != b
    ]


def _explicit_prefix(entries: Sequence[ViewEntry]) -> int:
    """How many leading entries need explicit view rows: up to the last one that differs from its message.

    The rest belong to the view implicitly (seq past base_seq), as appended messages do.
    """
    last = 0
    for i, e in enumerate(entries):
        if e.replaced or e.tokens != e.message.tokens:
            last = i + 1
    return last


# ----------------------------------------------------------------- lineage


def lineage(db: "Database", session_id: str) -> Lineage | None:
    """The lineage row of `session_id`, or None when it is no fork."""
    found = lineages(db, [session_id])
    return found.get(session_id)


def lineages(db: "Database", session_ids: Iterable[str]) -> dict[str, Lineage]:
    """{session id: Lineage} for the forks among `session_ids` (one query per 500 ids)."""
    ids = list(dict.fromkeys(session_ids))
    out: dict[str, Lineage] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        params = {f"s{i}": sid for i, sid in enumerate(chunk)}
        marks = ", ".join(f":s{i}" for i in range(len(chunk)))
        for row in db.all(
            f"SELECT {_LINEAGE_COLUMNS} FROM session_forks f LEFT JOIN sessions p "
            f"ON p.id = f.parent_id WHERE f.session_id IN ({marks})",
            params,
        ):
            out[row[0]] = _lineage(row)
    return out


def ancestry(db: "Database", session_id: str, *, limit: int = 100) -> list[Lineage]:
    """The chain of forks from `session_id` up: its own lineage, its parent's, ... (at most `limit`)."""
    chain: list[Lineage] = []
    seen = {session_id}
    current = lineage(db, session_id)
    while current is not None and len(chain) < limit:
        chain.append(current)
        if current.parent_id in seen or not current.parent_exists:
            break
        seen.add(current.parent_id)
        current = lineage(db, current.parent_id)
    return chain


def forks_of(db: "Database", session_id: str, *, limit: int = 100) -> list[Lineage]:
    """The forks made from `session_id`, oldest first (at most `limit`)."""
    rows = db.all(
        f"SELECT {_LINEAGE_COLUMNS} FROM session_forks f LEFT JOIN sessions p ON p.id = f.parent_id "
        f"WHERE f.parent_id = :id ORDER BY f.created_at, f.session_id LIMIT {int(limit)}",
        {"id": session_id},
    )
    return [_lineage(r) for r in rows]


def _lineage(row: Any) -> Lineage:
    return Lineage(
        session_id=row[0],
        parent_id=row[1],
        kind=row[2],
        view_version=int(row[3]),
        message_uuid=row[4],
        message_seq=int(row[5]) if row[5] is not None else None,
        boundary_index=int(row[6]) if row[6] is not None else None,
        entries=int(row[7]),
        created_at=float(row[8]),
        parent_exists=row[9] is not None,
        parent_title=row[10],
    )
