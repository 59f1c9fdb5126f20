"""The auto-compact circuit breaker: consecutive failures, counted on the session row.

Kept in the database so a restarted agent does not retry a compaction that
keeps failing; any successful compaction (auto or manual) resets it to 0 in
its own rewrite transaction.
"""

from __future__ import annotations

from sessionstore.storage.engine.db import Database
from sessionstore.storage.write.session import Session


def compact_failures(session: Session) -> int:
    """How many auto-compactions failed in a row for this session."""
    row = session.db.one("SELECT compact_failures FROM sessions WHERE id = :id", {"id": session.id})
    return int(row[0]) if row else 0


def record_compact_failure(session: Session) -> int:
    """Count one more failure (one transaction); returns the new count."""

    def bump(db: Database) -> int:
        db.execute(
            "UPDATE sessions SET compact_failures = compact_failures + 1 WHERE id = :id", {"id": session.id}
        ).close()
        return int(db.one("SELECT compact_failures FROM sessions WHERE id = :id", {"id": session.id})[0])

    return session.db.run_write(bump)
