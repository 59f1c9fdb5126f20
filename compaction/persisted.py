"""The pipeline's per-session state, persisted so a restarted process resumes where the last one was.

Every layer keeps what it has looked at (budget: results seen; snip: where to rescan, notices;
microcompact: tool names and registered results). That state is valid for one view version and
a prefix of its entries, and appends only add entries, so a state saved at version v covering
n entries lets the first prepare() of a new process look at the entries after n only. It is
derived data: a missing, older or foreign state (another version, another configuration)
is ignored and the layers rescan, which rebuilds it.

Saved when the version changed or at least SAVE_EVERY more entries were scanned, so the
upsert costs a fraction of a write per model call and a restart rescans at most that many.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sessionstore.storage.engine.config import Config
from sessionstore.storage.write.session import Session

from .budget import BudgetState
from .microcompact import MicroState
from .pipeline_state import PipelineState
from .snip import SnipState

#: Entries scanned since the last save before the state is saved again.
SAVE_EVERY = 256
#: Bumped when the saved shape changes (older states are then ignored).
FORMAT = 1


def fingerprint(config: Config) -> list[Any]:
    """The configuration a state depends on: which tools' results microcompact registers."""
    return [FORMAT, sorted(config.compactable_tools)]


def dumps_state(state: PipelineState, config: Config) -> str:
    """The state as JSON (replacement decisions are not in it: they are rows of their own)."""
    return json.dumps(
        {
            "config": fingerprint(config),
            "usage_index": state.usage_index,
            "memory_tokens": state.memory_tokens,
            "budget": {"seen": sorted(state.budget.seen), "resume": state.budget.resume},
            "snip": {"rescan_from": state.snip.rescan_from, "notices": state.snip.notices},
            "micro": {
                "names": state.micro.names,
                "registered": state.micro.registered,
                "last_assistant_at": state.micro.last_assistant_at,
                "scanned": state.micro.scanned,
            },
        },
        separators=(",", ":"),
    )


def load_state(session: Session, view_version: int, entries: int, config: Config) -> PipelineState | None:
    """The saved state when it is for this version, covers at most `entries` and this configuration."""
    row = session.db.one(
        "SELECT view_version, scanned, state_json FROM pipeline_states WHERE session_id = :id", {"id": session.id}
    )
    if row is None or int(row[0]) != view_version or int(row[1]) > entries:
        return None
    try:
        data = json.loads(row[2])
        if data.get("config") != fingerprint(config):
            return None
        state = PipelineState(view_version, scanned=int(row[1]))
        state.usage_index = data["usage_index"]
        state.memory_tokens = data["memory_tokens"]
        state.budget = BudgetState(seen=set(data["budget"]["seen"]), resume=int(data["budget"]["resume"]))
        state.snip = SnipState(rescan_from=int(data["snip"]["rescan_from"]), notices=dict(data["snip"]["notices"]))
        micro = data["micro"]
        state.micro = MicroState(
            names=dict(micro["names"]),
            registered=list(micro["registered"]),
            last_assistant_at=micro["last_assistant_at"],
            scanned=int(micro["scanned"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    state.saved = (view_version, state.scanned)
    return state


def save_if_due(session: Session, state: PipelineState, config: Config) -> None:
    """Upsert the state when its version changed or SAVE_EVERY more entries were scanned since the last save."""
    saved = state.saved
    if saved is not None and saved[0] == state.view_version and state.scanned - saved[1] < SAVE_EVERY:
        return
    params = {
        "id": session.id,
        "v": state.view_version,
        "n": state.scanned,
        "state": dumps_state(state, config),
        "now": time.time(),
    }
    session.db.run_write(
        lambda db: db.execute(
            "INSERT INTO pipeline_states (session_id, view_version, scanned, state_json, saved_at) "
            "VALUES (:id, :v, :n, :state, :now) ON CONFLICT (session_id) DO UPDATE SET "
            "view_version = excluded.view_version, scanned = excluded.scanned, state_json = excluded.state_json, "
            "saved_at = excluded.saved_at",
            params,
        ).close()
    )
    state.saved = (state.view_version, state.scanned)
