"""History by compaction boundary: what each compaction replaced, and any past view.

A past view is a version range over the temporal `view_entries` rows: the
rows valid at version v (valid_from <= v < valid_to), in key order. A rewrite
materializes the implicit tail of the version it replaces, so every replaced
version is fully explicit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import SessionStoreError
from .rows import MESSAGE_COLUMNS, stored_from_row
from .session import entries_for_rows
from .types import StoredMessage, ViewEntry

if TYPE_CHECKING:
    from .session import Session


class BoundaryNotFound(SessionStoreError, LookupError):
    """No boundary with that index in the session."""


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

    @property
    def preserved_segment(self) -> dict[str, str | None] | None:
        if not (self.head_uuid or self.tail_uuid):
            return None
        return {"head_uuid": self.head_uuid, "anchor_uuid": self.anchor_uuid, "tail_uuid": self.tail_uuid}

    def to_dict(self, preview_chars: int | None = None) -> dict[str, Any]:
        """JSON shape for `history --json` (summary cut to a preview when asked)."""
        summary = self.summary
        if preview_chars is not None and summary is not None and len(summary) > preview_chars:
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
            "summary": summary,
            "facts_gate": self.metadata.get("facts_gate"),
        }


_BOUNDARY_SQL = (
    "SELECT c.id, c.boundary_seq, b.uuid, c.summary_seq, b.timestamp, c.created_at, c.kind, c.trigger, "
    "c.pre_tokens, c.post_tokens, c.messages_summarized, c.replaced_version, c.head_uuid, c.anchor_uuid, "
    "c.tail_uuid, c.custom_instructions, c.summarizer, s.content_json, c.metadata_json "
    "FROM compactions c JOIN messages b ON b.session_id = c.session_id AND b.seq = c.boundary_seq "
    "LEFT JOIN messages s ON s.session_id = c.session_id AND s.seq = c.summary_seq "
    "WHERE c.session_id = :id ORDER BY c.boundary_seq"
)


def boundaries(session: "Session", *, offset: int = 0, limit: int | None = None) -> list[Boundary]:
    """Every compaction of the session, oldest first (or one page of them)."""
    if limit is None and not offset:
        rows = session.db.all(_BOUNDARY_SQL, {"id": session.id})
    else:
        page = -1 if limit is None else int(limit)
        rows = session.db.all(f"{_BOUNDARY_SQL} LIMIT :limit OFFSET :offset",
                              {"id": session.id, "limit": page if page >= 0 else 2**62, "offset": int(offset)})
    return [_boundary(i, row) for i, row in enumerate(rows, offset + 1)]


def boundary_count(session: "Session") -> int:
    """How many compactions the session has had (one indexed count)."""
    return int(session.db.one("SELECT COUNT(*) FROM compactions WHERE session_id = :id", {"id": session.id})[0])


def boundary(session: "Session", index: int) -> Boundary:
    """Boundary number `index` (from 1); raises BoundaryNotFound."""
    found = boundaries(session)
    if not 1 <= index <= len(found):
        raise BoundaryNotFound(
            f"session {session.id} has {len(found)} boundar{'y' if len(found) == 1 else 'ies'}; "
            f"there is no boundary {index}"
        )
    return found[index - 1]


def _boundary(index: int, row: Any) -> Boundary:
    summary_json = row[17]
    summary = _text_of(json.loads(summary_json)) if summary_json else None
    return Boundary(
        index=index, id=int(row[0]), boundary_seq=int(row[1]), boundary_uuid=row[2],
        summary_seq=int(row[3]) if row[3] is not None else None, timestamp=row[4], created_at=float(row[5]),
        kind=row[6], trigger=row[7], pre_tokens=int(row[8]), post_tokens=int(row[9]),
        messages_summarized=int(row[10]), replaced_version=int(row[11]), head_uuid=row[12],
        anchor_uuid=row[13], tail_uuid=row[14], custom_instructions=row[15], summarizer=row[16],
        summary=summary, metadata=json.loads(row[18] or "{}"),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def view_at(session: "Session", version: int) -> list[ViewEntry]:
    """The view exactly as it stood at the end of `version`."""
    current = session.refresh_state()
    if version == current.view_version:
        return session.active_entries()
    if not 0 <= version < current.view_version:
        raise SessionStoreError(f"session {session.id} has no view version {version}")
    rows = session.db.all(
        "SELECT seq, content_json, tokens FROM view_entries "
        "WHERE session_id = :id AND valid_from <= :v AND (valid_to IS NULL OR valid_to > :v) ORDER BY key",
        {"id": session.id, "v": version},
    )
    return entries_for_rows(session.db, session.id, rows)


def view_before(session: "Session", index: int) -> list[ViewEntry]:
    """What the model saw just before boundary `index`."""
    return view_at(session, boundary(session, index).replaced_version)


def summarized_messages(session: "Session", index: int) -> list[StoredMessage]:
    """The transcript messages boundary `index` summarized, in order."""
    b = boundary(session, index)
    row = session.db.one("SELECT summarized_seqs_json FROM compactions WHERE id = :id", {"id": b.id})
    seqs = json.loads(row[0]) if row else []
    out: list[StoredMessage] = []
    for start in range(0, len(seqs), 500):
        chunk = ",".join(str(int(s)) for s in seqs[start:start + 500])
        rows = session.db.all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq IN ({chunk}) ORDER BY seq",
            {"id": session.id},
        )
        out.extend(stored_from_row(r) for r in rows)
    return out


def recall(session: "Session", boundary: int | None = None, **options: Any) -> Any:
    """The exact messages before a boundary within a token budget (see `sessionstore.storage.recall`)."""
    from .recall import recall as recall_view

    return recall_view(session, boundary, **options)
