"""Pinned messages: standing rules a caller marks to be carried verbatim through every compaction.

A pin is a row beside the transcript (the message itself is never changed). All pins of a
session share one budget (`pins_max_tokens`, default 5% of the window): a pin that would go
over it is refused with `PinBudgetExceeded` and nothing is written. Compaction reads the pins
(bounded by that budget) and carries each one that leaves the view, in order, in the summary
message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from ..core.errors import MessageNotFound, SessionStoreError
from ..codecs.fastjson import loads_stored
from ..read.recall import content_as_text
from ..engine.resolve import resolve_message
from ..codecs.tokens import estimate_text

if TYPE_CHECKING:
    from ..engine.db import Database
    from .session import Session


class PinBudgetExceeded(SessionStoreError, ValueError):
    """A pin would take the session's pinned messages over their token budget; nothing was written."""

    def __init__(self, session_id: str, tokens: int, used: int, budget: int):
        super().__init__(
            f"pin refused: the message takes {tokens:,} tokens and session {session_id}'s pins already take "
            f"{used:,} of their {budget:,}-token budget (SESSIONSTORE_PINS_MAX_TOKENS); unpin one or shorten it"
        )
        self.tokens = tokens
        self.used = used
        self.budget = budget


@dataclass(frozen=True, slots=True)
class Pin:
    """One pinned message: where it is in the transcript, its text and what it costs."""

    seq: int
    uuid: str
    role: str
    text: str
    tokens: int
    source: str = "caller"

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "uuid": self.uuid,
            "role": self.role,
            "text": self.text,
            "tokens": self.tokens,
            "source": self.source,
        }


def pin_text(content: Any) -> str:
    """The text a pin carries: the message's content as plain text."""
    return content_as_text(content).strip()


def pin_cost(text: str) -> int:
    """Tokens a pinned text takes where it is carried (its text plus its header line)."""
    return estimate_text(text) + 12


def pins_budget(session: "Session") -> int:
    """The session's pin budget in tokens."""
    return session.store.config.pins_budget(session.context_window)


def list_pins(session: "Session") -> list[Pin]:
    """The session's pinned messages, oldest first (bounded by the pin budget)."""
    rows = session.db.all(
        "SELECT p.seq, p.uuid, m.role, m.content_json, p.tokens, p.source FROM pins p "
        "JOIN messages m ON m.session_id = p.session_id AND m.seq = p.seq "
        "WHERE p.session_id = :id ORDER BY p.seq",
        {"id": session.id},
    )
    return [Pin(int(r[0]), r[1], r[2], pin_text(loads_stored(r[3])), int(r[4]), r[5]) for r in rows]


def pinned_tokens(db: "Database", session_id: str) -> int:
    """What the session's pins take now (one indexed aggregate)."""
    row = db.one("SELECT COALESCE(SUM(tokens), 0) FROM pins WHERE session_id = :id", {"id": session_id})
    return int(row[0])


def insert_pin(
    db: "Database",
    session_id: str,
    seq: int,
    uuid: str,
    tokens: int,
    budget: int,
    *,
    source: str = "caller",
    refuse: bool = True,
) -> bool:
    """Pin message `seq` inside the caller's write transaction; False when already pinned or (auto) over budget.

    With `refuse`, a pin over budget raises PinBudgetExceeded (the caller's transaction rolls back).
    """
    if db.one("SELECT 1 FROM pins WHERE session_id = :id AND seq = :seq", {"id": session_id, "seq": seq}):
        return False
    used = pinned_tokens(db, session_id)
    if used + tokens > budget:
        if refuse:
            raise PinBudgetExceeded(session_id, tokens, used, budget)
        return False
    db.execute(
        "INSERT INTO pins (session_id, seq, uuid, tokens, pinned_at, source) "
        "VALUES (:id, :seq, :uuid, :tokens, :at, :source)",
        {"id": session_id, "seq": seq, "uuid": uuid, "tokens": tokens, "at": time.time(), "source": source},
    ).close()
    return True


def pin(session: "Session", uuid: str) -> Pin:
    """Pin the message `uuid` names (a seq, uuid or unique uuid start; idempotent); PinBudgetExceeded when the
    budget cannot take it."""
    message = session.message(resolve_message(session, uuid)[1])
    text = pin_text(message.content)
    if not text:
        raise SessionStoreError(f"message {message.uuid} has no text to carry; only a message with text can be pinned")
    tokens = pin_cost(text)
    budget = pins_budget(session)
    session.db.run_write(
        lambda db: insert_pin(db, session.id, message.seq, message.uuid, tokens, budget),
        session_id=session.id,
        point="pin",
    )
    return Pin(message.seq, message.uuid, message.role, text, tokens)


def unpin(session: "Session", uuid: str) -> bool:
    """Unpin the message `uuid` names (as `pin` takes it); False when it was not pinned. MessageNotFound for none."""
    message = session.message(resolve_message(session, uuid)[1])

    def body(db: "Database") -> bool:
        cur = db.execute(
            "DELETE FROM pins WHERE session_id = :id AND seq = :seq", {"id": session.id, "seq": message.seq}
        )
        removed = cur.rowcount
        cur.close()
        return bool(removed)

    return bool(session.db.run_write(body, session_id=session.id, point="unpin"))


def carried_pins(pins: Sequence[Pin], kept: set[int]) -> list[Pin]:
    """The pins a compaction must carry: every one whose message does not stay verbatim in the view."""
    return [p for p in pins if p.seq not in kept]


__all__ = [
    "MessageNotFound",
    "Pin",
    "PinBudgetExceeded",
    "carried_pins",
    "insert_pin",
    "list_pins",
    "pin",
    "pin_cost",
    "pin_text",
    "pins_budget",
    "unpin",
]
