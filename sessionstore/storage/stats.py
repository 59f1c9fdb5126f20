"""Counts that describe one session, for `stats` and `doctor`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session


def session_stats(session: "Session") -> dict[str, Any]:
    """Messages, view entries and tokens, stored bytes and boundaries of one session."""
    db = session.db
    state = session.refresh_state()
    sid = {"id": session.id}
    msg_count, msg_bytes = db.one(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(content_json)), 0) FROM messages WHERE session_id = :id", sid
    )
    implicit = state.last_seq - state.base_seq
    boundaries = db.one("SELECT COUNT(*) FROM compactions WHERE session_id = :id", sid)[0]
    spills = db.one(
        "SELECT COUNT(*) FROM replacements WHERE session_id = :id AND kind = 'spilled'", sid
    )[0]
    return {
        "session": session.id,
        "messages": int(msg_count),
        "view_entries": state.explicit_count + implicit,
        "view_tokens": state.view_tokens,
        "view_version": state.view_version,
        "context_window": session.context_window,
        "content_bytes": int(msg_bytes),
        "boundaries": int(boundaries),
        "spills": int(spills),
    }
