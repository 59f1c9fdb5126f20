"""Whether any Agent SDK key has entries not yet imported into its session: one indexed query, nothing heavy imported.

The command line asks before each command (`cli/common.open_store`), so it must cost a process
that never saw the Agent SDK nothing but the query (`ix_agent_sdk_keys_pending`, revision 0022).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessionstore.storage.engine.db import Database

#: A key is pending while this holds (the partial index's predicate).
PENDING = "imported_count < entry_count"


def has_pending(db: "Database") -> bool:
    """True when a key this role may see (row-level security) has entries not in its session yet."""
    return db.one(f"SELECT 1 FROM agent_sdk_keys WHERE {PENDING} LIMIT 1") is not None
