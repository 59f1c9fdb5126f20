"""Sessions built in cycles (append whole tool-using turns, then compact keeping a suffix), for the history and fork benches.

Each cycle appends about `messages` messages cut after a final answer, then commits a boundary, a
~2,000-character summary and the newest ~`keep` entries from a user prompt on (invariant 3 holds),
so every view before a boundary holds the same number of entries whatever the session's length.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from sessionstore import SessionStore
from sessionstore.storage.write.rewrite import Add, CompactionRecord, Keep, commit_rewrite
from sessionstore.storage.write.session import Session
from sessionstore.storage.records.validate import normalize
from tests.support.messages import conversation

SUMMARY = ("## Primary request and intent\nFix the flaky integration test and rename parse_cfg. " * 25)[:2000]


@dataclass(frozen=True)
class CycleShape:
    """How one cycle looks: messages generated, distinct seeds cycled through, entries kept verbatim."""

    messages: int
    seeds: int
    keep: int


def whole_turns(shape: CycleShape, cycle: int) -> list[dict[str, Any]]:
    """About `shape.messages` messages of tool-using turns, cut after a final answer."""
    msgs = list(conversation(shape.messages, seed=cycle % shape.seeds, prefix=f"cycle {cycle}: "))
    end = max(
        i for i, m in enumerate(msgs) if m["role"] == "assistant" and all(b.get("type") == "text" for b in m["content"])
    )
    return msgs[: end + 1]


def compact_keeping_suffix(session: Session, cycle: int, keep: int) -> None:
    """Boundary + summary, then the newest ~`keep` entries from a user prompt on."""
    snap = session.snapshot()
    entries = snap.entries
    start = max(0, len(entries) - keep)
    while start < len(entries) and not (
        entries[start].role == "user"
        and isinstance(entries[start].content, str)
        and not entries[start].message.is_compact_summary
    ):
        start += 1
    kept = entries[start:]
    summarized = [e.seq for e in entries[:start] if e.type != "system" and not e.message.is_compact_summary]
    boundary = normalize(
        {
            "role": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "metadata": {"trigger": "auto"},
        }
    )
    summary = normalize({"role": "user", "content": f"{SUMMARY} (cycle {cycle})", "is_compact_summary": True})
    plan = [Add(boundary), Add(summary), *(Keep(e.seq) for e in kept)]
    record = CompactionRecord(
        kind="session-memory",
        trigger="auto",
        boundary_uuid=boundary.uuid,
        summary_uuid=summary.uuid,
        summarized_seqs=summarized,
        head_uuid=kept[0].uuid if kept else None,
        anchor_uuid=summary.uuid,
        tail_uuid=kept[-1].uuid if kept else None,
        summarizer="bench",
    )
    commit_rewrite(
        session, base_version=snap.view_version, snapshot_last_seq=snap.last_seq, plan=plan, compaction=record
    )


def build(
    store: SessionStore, shape: CycleShape, cycles: int, title: str, log: Callable[[str], None], log_every: int
) -> Session:
    """A session of `cycles` cycles, then one more cycle appended (left uncompacted)."""
    session = store.create_session(title=title)
    started = time.perf_counter()
    for cycle in range(cycles):
        session.append_many(whole_turns(shape, cycle))
        compact_keeping_suffix(session, cycle, shape.keep)
        if cycle and cycle % log_every == 0:
            log(f"  {cycle:,} cycles, {session.last_seq:,} messages ({time.perf_counter() - started:.0f} s)")
    session.append_many(whole_turns(shape, cycles))
    return session
