"""A session's view state and view rows, read from the database without a session handle.

`ViewState` is the O(1) part of a session row that tells whether a cached view is current;
`entries_for_rows` turns view rows into `ViewEntry` objects. The write path (session,
rewrite, API compaction), the read path (history, paging) and `doctor` all read them, so
they live below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import SessionNotFound
from ..codecs.fastjson import loads_stored
from .rows import MESSAGE_COLUMNS, stored_from_row
from ..core.types import StoredMessage, ViewEntry
from .validate import TailState

if TYPE_CHECKING:
    from ..engine.db import Database

#: The session's view state in one indexed read. The session row holds the figures as of its
#: last rewrite or import (a checkpoint at sessions.last_seq); an append does not write it but
#: records the new figures on its own transcript row, so a newer last message overrides them.
#: The last seq is looked up by the parameter, not by `s.id`: under row-level security PostgreSQL
#: will not use a qual holding a correlated subquery as an index condition (it is not leakproof),
#: and read every message of the session instead (tests/test_rls_plans.py).
STATE_SQL = (
    "SELECT s.last_seq, s.base_seq, s.view_version, s.view_tokens, s.explicit_count, s.tail_state, "
    "m.seq, m.view_tokens, m.tail_state, COALESCE(m.written_at, s.updated_at) "
    "FROM sessions s LEFT JOIN messages m ON m.session_id = s.id AND m.seq > s.last_seq "
    "AND m.seq = (SELECT MAX(x.seq) FROM messages x WHERE x.session_id = :id) "
    "WHERE s.id = :id"
)


@dataclass(frozen=True, slots=True)
class ViewState:
    """The O(1) part of a session row that tells whether a cached view is current."""

    last_seq: int
    base_seq: int
    view_version: int
    view_tokens: int
    explicit_count: int
    tail: TailState

    @classmethod
    def from_row(cls, row: Any) -> "ViewState":
        """From a STATE_SQL row: the last appended message's figures when it is past the checkpoint."""
        if row[6] is not None and row[7] is not None:
            return cls(int(row[6]), int(row[1]), int(row[2]), int(row[7]), int(row[4]), TailState.loads(row[8]))
        return cls(int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4]), TailState.loads(row[5]))


@dataclass(frozen=True, slots=True)
class ViewSnapshot:
    """A consistent read of the view: what a rewrite is computed from and checked against."""

    entries: list[ViewEntry]
    view_version: int
    last_seq: int
    view_tokens: int


def load_state(db: "Database", session_id: str, *, for_update: bool = False) -> ViewState:
    """Read the session's view state; raises SessionNotFound.

    `for_update` locks the row on PostgreSQL first (SQLite's BEGIN IMMEDIATE already serializes
    writers), so the read that follows sees every append committed before the lock.
    """
    if for_update and not db.is_sqlite:
        db.execute("SELECT id FROM sessions WHERE id = :id FOR UPDATE", {"id": session_id}).close()
    row = db.one(STATE_SQL, {"id": session_id})
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    return ViewState.from_row(row)


#: Above this many separate seq runs, messages are fetched by id lists instead of ranges.
MAX_RUNS = 64


def entries_for_rows(db: "Database", session_id: str, rows: list[Any]) -> list[ViewEntry]:
    """ViewEntries for view rows (seq, replacement json, tokens), in the rows' order.

    A view is a few long runs of consecutive seqs (what a compaction kept, then what
    followed), so its messages are read as a few index range scans rather than one
    lookup per entry.
    """
    messages = _messages_by_seq(db, session_id, sorted({int(r[0]) for r in rows}))
    out = []
    for position, (seq, replaced, tokens) in enumerate(rows):
        message = messages[int(seq)]
        if replaced is None:
            out.append(ViewEntry(position, message, message.content, int(tokens)))
        else:
            out.append(ViewEntry(position, message, loads_stored(replaced), int(tokens), replaced=True))
    return out


def _messages_by_seq(db: "Database", session_id: str, seqs: list[int]) -> dict[int, StoredMessage]:
    """The messages with these seqs, read run by run."""
    runs: list[tuple[int, int]] = []
    for seq in seqs:
        if runs and seq == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], seq)
        else:
            runs.append((seq, seq))
    found: dict[int, StoredMessage] = {}
    if len(runs) <= MAX_RUNS:
        for first, last in runs:
            for row in db.all(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq >= :a AND seq <= :b "
                "ORDER BY seq",
                {"id": session_id, "a": first, "b": last},
            ):
                found[int(row[0])] = stored_from_row(row)
        return found
    for start in range(0, len(seqs), 500):
        chunk = ",".join(str(s) for s in seqs[start : start + 500])
        for row in db.all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq IN ({chunk})", {"id": session_id}
        ):
            found[int(row[0])] = stored_from_row(row)
    return found
