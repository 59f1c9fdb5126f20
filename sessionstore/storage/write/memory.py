"""Storage of the session notes: the running markdown and the last message they cover."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..records.validate import storable_text

if TYPE_CHECKING:
    from ..engine.db import Database
    from .session import Session


@dataclass(frozen=True, slots=True)
class SessionMemory:
    """The notes, the seq/uuid of the last message they cover, and the update trigger's counters."""

    notes: str
    covers_seq: int
    covers_uuid: str | None
    tokens_at_update: int
    tool_calls_at_update: int
    updated_at: float


def load_memory(session: "Session") -> SessionMemory | None:
    """The session's notes, or None when none were written yet."""
    row = session.db.one(
        "SELECT notes, covers_seq, covers_uuid, tokens_at_update, tool_calls_at_update, updated_at "
        "FROM session_memory WHERE session_id = :id",
        {"id": session.id},
    )
    if row is None:
        return None
    return SessionMemory(row[0], int(row[1]), row[2], int(row[3]), int(row[4]), float(row[5]))


def save_memory(
    session: "Session", notes: str, *, covers_seq: int, covers_uuid: str | None, tokens: int, tool_calls: int
) -> SessionMemory:
    """Insert or replace the notes in one transaction."""
    now = time.time()
    notes = storable_text(notes)
    params = {
        "id": session.id,
        "notes": notes,
        "seq": covers_seq,
        "uuid": covers_uuid,
        "tokens": tokens,
        "calls": tool_calls,
        "now": now,
    }

    def write(db: "Database") -> None:
        db.execute(
            "INSERT INTO session_memory (session_id, notes, covers_seq, covers_uuid, tokens_at_update, "
            "tool_calls_at_update, updated_at) VALUES (:id, :notes, :seq, :uuid, :tokens, :calls, :now) "
            "ON CONFLICT (session_id) DO UPDATE SET notes = excluded.notes, covers_seq = excluded.covers_seq, "
            "covers_uuid = excluded.covers_uuid, tokens_at_update = excluded.tokens_at_update, "
            "tool_calls_at_update = excluded.tool_calls_at_update, updated_at = excluded.updated_at",
            params,
        ).close()

    session.db.run_write(write)
    return SessionMemory(notes, covers_seq, covers_uuid, tokens, tool_calls, now)
