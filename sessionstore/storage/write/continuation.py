"""Local writes to an imported session go to its local continuation, so capture never stops.

An imported session is *source-side*: it holds its source file's lines and
nothing else, so the file's later lines (the tool still writing it, a longer
copy) always flow into it and its Claude Code export stays the file byte for
byte. A local write (append, the pipeline's markers and spills, a compaction)
to a source-side session is made on its *local continuation* instead: a fork
of its active view taken at the first such write (the fork point is recorded
in the lineage, `session_forks`), marked `{"continues": <source-side id>}`.
When the file's view starts with its latest compact boundary, that compaction
is the continuation's boundary 1 (see fork.py), so the continuation's own
compactions are numbered after it, as a re-import of its export numbers them.
Later local writes to the source-side session go to the same continuation;
`sessions`, `history` and the exports show the lineage.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .session import Session

#: The continuation's metadata key naming the source-side session it continues.
CONTINUES = "continues"


def is_source_side(session: "Session") -> bool:
    """True for a session an import created and feeds (a dict lookup: no query)."""
    return bool(session.metadata.get("imported_from"))


def continuation_of(session: "Session", *, create: bool = True) -> "Session | None":
    """The local continuation of a source-side session: the latest one, or a new fork of its view now."""
    found = _latest(session)
    if found is not None or not create:
        return found
    local = session.fork(title=session.title)
    meta = {CONTINUES: session.id}
    session.db.run_write(
        lambda db: db.execute(
            "UPDATE sessions SET metadata_json = :m WHERE id = :id", {"m": json.dumps(meta), "id": local.id}
        ).close()
    )
    local.metadata = meta
    return local


def _latest(session: "Session") -> "Session | None":
    rows = session.db.all(
        "SELECT f.session_id, s.metadata_json FROM session_forks f JOIN sessions s ON s.id = f.session_id "
        "WHERE f.parent_id = :id ORDER BY f.created_at DESC",
        {"id": session.id},
    )
    for sid, meta in rows:
        if json.loads(meta or "{}").get(CONTINUES) == session.id:
            return session.store.get(str(sid))
    return None


def before_local_write(session: "Session") -> None:
    """Point `session` at its local continuation when it is source-side (the write then lands there)."""
    if is_source_side(session):
        target = continuation_of(session)
        assert target is not None
        session.become(target)
