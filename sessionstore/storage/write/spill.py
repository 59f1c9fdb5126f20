"""Reading spilled tool results back: the original bytes, a listing, a file for the agent.

The budget layer (compaction/budget.py) decides what to spill; this module
only reads decisions and blobs, so the CLI and agents can use it without the
pipeline. File names for `materialize_spill` are derived from the tool_use_id
by sanitizing and hashing it: whatever the id holds (`../`, `/`, NUL, a
thousand characters), the file lands directly inside the given directory.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..codecs.blobs import get_blob
from ..core.errors import SessionStoreError
from ..codecs.fastjson import loads_stored
from ..core.output import write_into_folder
from .replacements import get_replacement, list_with_blobs

if TYPE_CHECKING:
    from .session import Session

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
READABLE_PART = 48
HASH_PART = 16


class SpillNotFound(SessionStoreError, LookupError):
    """The tool result was never spilled in this session."""


@dataclass(frozen=True, slots=True)
class SpillInfo:
    """One spilled tool result: where its original is and what the view shows now."""

    tool_use_id: str
    kind: str
    original_size: int
    blob_sha256: str
    created_at: float
    #: The result is still in the active view (as a preview, or cleared); False once a compaction summarized it.
    in_view: bool = True

    @property
    def now(self) -> str:
        """What the active view shows of it: `spilled` (the preview), `cleared`, or `compacted` (nothing: summarized)."""
        return self.kind if self.in_view else "compacted"

    def to_dict(self) -> dict[str, object]:
        return {
            "tool_use_id": self.tool_use_id,
            "kind": self.kind,
            "in_view": self.in_view,
            "now": self.now,
            "original_size": self.original_size,
            "blob_sha256": self.blob_sha256,
            "created_at": self.created_at,
        }


def list_spills(session: "Session") -> list[SpillInfo]:
    """Every spilled tool result of the session, oldest first (cleared and compacted ones included).

    Each says whether the active view still holds it (`in_view`): a compaction that summarized
    the turn took it out, while its original stays readable with `spill_original`.
    """
    decisions = list_with_blobs(session.db, session.id)
    shown = results_in_view(session) if decisions else set()
    return [
        SpillInfo(
            r.tool_use_id,
            r.kind,
            int(r.original_size or 0),
            str(r.blob_sha256),
            r.created_at,
            in_view=r.tool_use_id in shown,
        )
        for r in decisions
    ]


def results_in_view(session: "Session") -> set[str]:
    """The tool_use_ids of the tool results in the session's active view (what `stats` and `spill list` count).

    Tool results are only rewritten (spilled, cleared) in the view's explicit rows; messages
    appended since are in the view as they were sent, so they count too.
    """
    db, sid = session.db, {"id": session.id}
    state = session.refresh_state()
    rows = db.all(
        "SELECT content_json FROM view_entries WHERE session_id = :id AND valid_to IS NULL "
        "AND content_json LIKE '%tool_result%'",
        sid,
    )
    rows += db.all(
        "SELECT content_json FROM messages WHERE session_id = :id AND seq > :base "
        "AND unpacked(content_json) LIKE '%tool_result%'",
        {**sid, "base": state.base_seq},
    )
    found: set[str] = set()
    for (text,) in rows:
        content = loads_stored(text)
        if isinstance(content, list):
            found.update(
                str(b["tool_use_id"])
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result" and "tool_use_id" in b
            )
    return found


def spill_original(session: "Session", tool_use_id: str) -> bytes:
    """The spilled result's original content, byte for byte (UTF-8 of its text)."""
    decision = get_replacement(session.db, session.id, tool_use_id)
    if decision is None or decision.blob_sha256 is None:
        raise SpillNotFound(f"tool result {tool_use_id!r} was not spilled in session {session.id}")
    return get_blob(session.db, decision.blob_sha256)


def spill_filename(tool_use_id: str) -> str:
    """A file name that is safe on any filesystem and unique per tool_use_id."""
    readable = _UNSAFE.sub("_", tool_use_id).strip("_-")[:READABLE_PART] or "result"
    digest = hashlib.sha256(tool_use_id.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_PART]
    return f"spill-{readable}-{digest}.txt"


def materialize_spill(session: "Session", tool_use_id: str, directory: str | os.PathLike[str]) -> Path:
    """Write the original to a file directly inside `directory` (created if needed); returns its path."""
    return write_into_folder(directory, spill_filename(tool_use_id), spill_original(session, tool_use_id))
