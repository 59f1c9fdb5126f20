"""Persisted replacement decisions: what a tool result shows instead of its content.

Invariant 6 of DESIGN.md: once a tool result is spilled or cleared, every later
call (and every later process) shows exactly the same replacement text, so the
prompt-cache prefix stays stable. The decision is keyed by tool_use_id.

A spill that is later cleared keeps its blob reference, so the original stays
reachable through `spill cat` after microcompact cleared the preview.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from ..engine.db import Database

SPILLED = "spilled"
CLEARED = "cleared"

_COLUMNS = "tool_use_id, kind, replacement, blob_sha256, original_size, created_at"


@dataclass(frozen=True, slots=True)
class Replacement:
    """One decision: the text a tool_result block carries instead of its content."""

    tool_use_id: str
    kind: str
    text: str
    blob_sha256: str | None = None
    original_size: int | None = None
    created_at: float = 0.0


def _from_row(row: Sequence[Any]) -> Replacement:
    return Replacement(row[0], row[1], row[2], row[3], None if row[4] is None else int(row[4]), float(row[5]))


def load_replacements(db: "Database", session_id: str) -> dict[str, Replacement]:
    """Every decision of a session, by tool_use_id."""
    rows = db.all(f"SELECT {_COLUMNS} FROM replacements WHERE session_id = :id", {"id": session_id})
    return {r[0]: _from_row(r) for r in rows}


def load_replacements_for(db: "Database", session_id: str, tool_use_ids: list[str]) -> dict[str, Replacement]:
    """The decisions for these tool results only (what an incremental scan needs), by tool_use_id."""
    found: dict[str, Replacement] = {}
    for start in range(0, len(tool_use_ids), 500):
        chunk = tool_use_ids[start : start + 500]
        params: dict[str, Any] = {"id": session_id, **{f"t{i}": tid for i, tid in enumerate(chunk)}}
        marks = ", ".join(f":t{i}" for i in range(len(chunk)))
        for row in db.all(
            f"SELECT {_COLUMNS} FROM replacements WHERE session_id = :id AND tool_use_id IN ({marks})", params
        ):
            found[row[0]] = _from_row(row)
    return found


def get_replacement(db: "Database", session_id: str, tool_use_id: str) -> Replacement | None:
    """The decision for one tool result, or None."""
    row = db.one(
        f"SELECT {_COLUMNS} FROM replacements WHERE session_id = :id AND tool_use_id = :tid",
        {"id": session_id, "tid": tool_use_id},
    )
    return None if row is None else _from_row(row)


def list_with_blobs(db: "Database", session_id: str) -> list[Replacement]:
    """Decisions that keep an original in the blob store (spills, cleared or not), oldest first."""
    rows = db.all(
        f"SELECT {_COLUMNS} FROM replacements WHERE session_id = :id AND blob_sha256 IS NOT NULL "
        "ORDER BY created_at, tool_use_id",
        {"id": session_id},
    )
    return [_from_row(r) for r in rows]


def save_spills(db: "Database", session_id: str, spills: Iterable[Replacement]) -> None:
    """Record spill decisions; an existing decision for the same id wins (first decision sticks)."""
    now = time.time()
    db.executemany(
        "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
        "created_at) VALUES (:sid, :tid, :kind, :text, :sha, :size, :now) "
        "ON CONFLICT (session_id, tool_use_id) DO NOTHING",
        [
            {
                "sid": session_id,
                "tid": r.tool_use_id,
                "kind": r.kind,
                "text": r.text,
                "sha": r.blob_sha256,
                "size": r.original_size,
                "now": now,
            }
            for r in spills
        ],
    )


def save_cleared(db: "Database", session_id: str, tool_use_ids: Iterable[str], text: str) -> None:
    """Record clear decisions; a spill becomes cleared but keeps its blob reference."""
    now = time.time()
    db.executemany(
        "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, created_at) "
        "VALUES (:sid, :tid, :kind, :text, :now) "
        "ON CONFLICT (session_id, tool_use_id) DO UPDATE SET kind = excluded.kind, "
        "replacement = excluded.replacement",
        [{"sid": session_id, "tid": tid, "kind": CLEARED, "text": text, "now": now} for tid in tool_use_ids],
    )
