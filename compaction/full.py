"""Full compaction: summarize the whole view; keep only an in-flight turn verbatim.

The summary is computed from a snapshot, outside any write transaction; the
rewrite commits only if no other rewrite won meanwhile, and messages appended
while the summarizer ran follow the summary in the new view.
"""

from __future__ import annotations

from typing import Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import ViewEntry

from .attachments import carried_attachments, file_attachments
from .commit import CompactionOutcome, commit_compaction
from .pinned_summary import summarize_with_pins
from .rounds import adjust_split
from .errors import NothingToCompact
from .summarizers.base import Summarizer

__all__ = ["NothingToCompact", "compact_full", "pending_turn_start"]


def pending_turn_start(entries: Sequence[ViewEntry]) -> int:
    """Where to cut so an assistant turn still waiting for tool results stays verbatim."""
    answered: set[str] = set()
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if entry.role == "user" and not isinstance(entry.content, str):
            answered.update(str(b.get("tool_use_id")) for b in entry.content if b.get("type") == "tool_result")
        if entry.role == "assistant":
            ids = (
                []
                if isinstance(entry.content, str)
                else [b["id"] for b in entry.content if b.get("type") == "tool_use"]
            )
            if any(i not in answered for i in ids):
                return adjust_split(entries, index, direction="earlier")
            return len(entries)
    return len(entries)


def compact_full(
    session: Session,
    summarizer: Summarizer,
    *,
    trigger: str = "manual",
    custom_instructions: str | None = None,
    config: Config | None = None,
    kind: str = "full",
) -> CompactionOutcome:
    """Summarize the active view and rewrite it as [boundary, summary, in-flight turn, attachments]."""
    config = config or session.store.config
    snapshot = session.snapshot()
    entries = snapshot.entries
    cut = pending_turn_start(entries)
    summarized, kept = entries[:cut], entries[cut:]
    if not any(e.message.is_sent for e in summarized):
        raise NothingToCompact(f"session {session.id} has nothing to compact yet")
    pins, gated = summarize_with_pins(
        session, summarizer, summarized, kept, config=config, custom_instructions=custom_instructions
    )
    attachments = file_attachments(entries, kept, cwd=session.cwd, config=config) + carried_attachments(entries, config)
    return commit_compaction(
        session,
        snapshot,
        summarized=summarized,
        kept=kept,
        summary_text=gated.text,
        truncated=gated.truncated,
        kind=kind,
        trigger=trigger,
        layout="suffix",
        summarizer=summarizer.name,
        custom_instructions=custom_instructions,
        attachments=attachments,
        gated=gated,
        recall_note=config.recall_note,
        pins=pins,
    )
