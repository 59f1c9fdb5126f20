"""One message and everything the store knows about it: envelope, usage, view place, spills, boundaries.

What `sessionstore show S UUID|SEQ` prints and a search hit's `open` names.
A message is named by its seq, its uuid, or a unique start of its uuid (the
short ids `view` and `history -b` print). Cost: a handful of indexed lookups
plus one pass over the session's compaction rows (one per boundary).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.errors import MessageNotFound
from .paging import active_position
from ..engine.resolve import AmbiguousMessage, resolve_message
from ..records.rows import MESSAGE_COLUMNS, stored_from_row
from ..core.types import StoredMessage

if TYPE_CHECKING:
    from ..write.session import Session

__all__ = ["AmbiguousMessage", "MessageInfo", "find_message", "message_info"]


@dataclass
class MessageInfo:
    """A message with where it stands: in the active view or not, its spilled results, its boundaries."""

    session_id: str
    message: StoredMessage
    in_view: bool
    #: Spilled or cleared tool results of this message: tool_use_id, kind, original size.
    spills: list[dict[str, Any]] = field(default_factory=list)
    #: One entry per boundary the message belongs to: {"boundary": K, "as": "boundary"|"summary"|"summarized"|"kept"}.
    boundaries: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "message": self.message.to_dict(),
            "tokens": self.message.tokens,
            "in_view": self.in_view,
            "spills": self.spills,
            "boundaries": self.boundaries,
        }


def find_message(session: "Session", ref: str) -> StoredMessage:
    """The message `ref` names: a seq, a uuid, or a unique start of a uuid (see `resolve_message`)."""
    seq, _ = resolve_message(session, ref)
    row = session.db.one(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq = :seq", {"id": session.id, "seq": seq}
    )
    if row is None:
        raise MessageNotFound(f"message {ref!r} of session {session.id} is gone (deleted while it was read)")
    return stored_from_row(row)


def message_info(session: "Session", ref: str) -> MessageInfo:
    """Everything `show` prints about the message `ref` names."""
    msg = find_message(session, ref)
    # The view is its open rows plus every message appended since the last rewrite (no row of its own).
    in_view = active_position(session, msg.seq) is not None
    return MessageInfo(session.id, msg, in_view, _spills(session, msg), _boundaries(session, msg))


def _result_ids(msg: StoredMessage) -> list[str]:
    """The tool_use ids this message's tool results answer."""
    if not isinstance(msg.content, list):
        return []
    return [
        str(b.get("tool_use_id"))
        for b in msg.content
        if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id")
    ]


def _spills(session: "Session", msg: StoredMessage) -> list[dict[str, Any]]:
    ids = _result_ids(msg)
    if not ids:
        return []
    marks = ", ".join(f":t{i}" for i in range(len(ids)))
    rows = session.db.all(
        f"SELECT tool_use_id, kind, original_size, blob_sha256 FROM replacements WHERE session_id = :id "
        f"AND tool_use_id IN ({marks}) ORDER BY tool_use_id",
        {"id": session.id, **{f"t{i}": t for i, t in enumerate(ids)}},
    )
    return [{"tool_use_id": r[0], "kind": r[1], "original_size": r[2], "blob_sha256": r[3]} for r in rows]


def _boundaries(session: "Session", msg: StoredMessage) -> list[dict[str, Any]]:
    """The boundaries whose record names this message: as their boundary, summary, or summarized or kept message."""
    rows = session.db.all(
        "SELECT ordinal, boundary_seq, summary_seq, summarized_seqs_json, kind, "
        "replaced_version FROM compactions WHERE session_id = :id ORDER BY ordinal",
        {"id": session.id},
    )
    found: list[dict[str, Any]] = []
    for ordinal, boundary_seq, summary_seq, seqs_json, kind, replaced in rows:
        role = None
        if int(boundary_seq) == msg.seq:
            role = "boundary"
        elif summary_seq is not None and int(summary_seq) == msg.seq:
            role = "summary"
        elif msg.seq in set(json.loads(seqs_json or "[]")):
            role = "summarized"
        elif _kept(session, msg, int(replaced)):
            role = "kept"
        if role:
            found.append({"boundary": int(ordinal), "as": role, "kind": kind})
    return found


def _kept(session: "Session", msg: StoredMessage, replaced: int) -> bool:
    """True when the message was in the view a compaction replaced (and, not summarized, was kept)."""
    return (
        session.db.one(
            "SELECT 1 FROM view_entries WHERE session_id = :id AND seq = :seq AND valid_from <= :v "
            "AND (valid_to IS NULL OR valid_to > :v)",
            {"id": session.id, "seq": msg.seq, "v": replaced},
        )
        is not None
    )
