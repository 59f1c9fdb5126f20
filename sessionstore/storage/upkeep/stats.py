"""Counts that describe one session, for `stats` and `doctor`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..write.spill import list_spills

if TYPE_CHECKING:
    from ..write.session import Session


#: Table labels where the key alone could be misread (the two spill counts differ once a spill is cleared).
STAT_LABELS = {
    "spilled_now": "spilled now (view shows the preview)",
    "spilled_ever": "spilled ever (as `spill list` shows)",
    "forked_from": "forked from",
    "fork_point": "fork point",
    "forks": "forks made from it",
}


def stat_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for each figure of `session_stats` a person reads: the session id and unset ones left out.

    A session that is no fork has no `forked from`: the row is left out, never printed as None.
    """
    return [
        (STAT_LABELS.get(key, key.replace("_", " ")), f"{value:,}" if isinstance(value, int) else str(value))
        for key, value in stats.items()
        if key != "session" and value is not None
    ]


def session_stats(session: "Session") -> dict[str, Any]:
    """Messages, view entries and tokens, stored bytes, boundaries and spills of one session.

    `spilled_now` counts tool results whose entry in the active view still shows a
    spill preview (one a compaction summarized is no longer there); `spilled_ever` every result ever spilled (its original kept),
    including those microcompact cleared since: the count `spill list` shows.
    """
    db = session.db
    state = session.refresh_state()
    sid = {"id": session.id}
    msg_count, msg_bytes = db.one(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(unpacked(content_json))), 0) FROM messages WHERE session_id = :id", sid
    )
    implicit = state.last_seq - state.base_seq
    boundaries = db.one("SELECT COUNT(*) FROM compactions WHERE session_id = :id", sid)[0]
    spilled_ever = db.one("SELECT COUNT(*) FROM replacements WHERE session_id = :id AND blob_sha256 IS NOT NULL", sid)[
        0
    ]
    # Spilled and still shown: a compaction that summarized the result took its preview out of the view.
    spilled_now = sum(1 for s in list_spills(session) if s.now == "spilled")
    return {
        "session": session.id,
        "messages": int(msg_count),
        "view_entries": state.explicit_count + implicit,
        "view_tokens": state.view_tokens,
        "view_version": state.view_version,
        "context_window": session.context_window,
        "content_bytes": int(msg_bytes),
        "boundaries": int(boundaries),
        "spilled_now": int(spilled_now),
        "spilled_ever": int(spilled_ever),
        **_lineage_stats(session),
    }


def _lineage_stats(session: "Session") -> dict[str, Any]:
    """Where the session was forked from (None when it is no fork) and how many forks were made from it."""
    from ..write.fork import lineage

    info = lineage(session.db, session.id)
    forks = session.db.one("SELECT COUNT(*) FROM session_forks WHERE parent_id = :id", {"id": session.id})[0]
    return {
        "forked_from": info.parent_id if info else None,
        "fork_point": info.point if info else None,
        "forks": int(forks),
    }
