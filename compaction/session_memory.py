"""Session memory: keep running notes, and compact with them instead of an LLM summary.

The notes are updated (extractively by default) once the view reaches 10,000
tokens, then after every further 5,000 tokens and 3 tool calls. Compaction
keeps the messages after the last one the notes cover, widened backwards for
context, and puts the notes where a summary would go. It returns None — the
caller falls back to full compaction — when there are no usable notes or the
result would still be over the threshold.
"""

from __future__ import annotations

from typing import Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.write.memory import SessionMemory, load_memory, save_memory
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import ViewEntry

from .commit import CompactionOutcome, commit_compaction, summary_budget
from .pinning import plan_pins
from .errors import CompactionWouldNotShrink
from .memory_notes import count_tool_calls, is_empty_template, should_update, truncate_sections, update_notes
from .messages import is_boundary
from .rounds import kept_suffix_start
from .summarize import gate_notes

SUMMARIZER_NAME = "session-memory"


def _after(entries: Sequence[ViewEntry], seq: int) -> list[ViewEntry]:
    """Entries newer than `seq`, found from the end (the view is ordered by recency)."""
    start = len(entries)
    while start > 0 and entries[start - 1].seq > seq:
        start -= 1
    return list(entries[start:])


def maybe_update_memory(
    session: Session, entries: Sequence[ViewEntry], view_tokens: int, config: Config
) -> SessionMemory | None:
    """Fold new entries into the notes when the trigger says so; returns the notes written."""
    memory = load_memory(session)
    covers = memory.covers_seq if memory else 0
    fresh = [e for e in _after(entries, covers) if e.message.is_sent]
    if not fresh:
        return None
    if not should_update(
        view_tokens,
        memory.tokens_at_update if memory else 0,
        count_tool_calls(fresh),
        memory is not None,
        init_tokens=config.memory_init_tokens,
        update_tokens=config.memory_update_tokens,
        update_tool_calls=config.memory_update_tool_calls,
    ):
        return None
    notes = update_notes(memory.notes if memory else "", fresh)
    last = fresh[-1]
    return save_memory(
        session,
        notes,
        covers_seq=last.seq,
        covers_uuid=last.uuid,
        tokens=view_tokens,
        tool_calls=count_tool_calls(fresh),
    )


def compact_with_memory(
    session: Session, *, trigger: str = "auto", config: Config | None = None, threshold: int | None = None
) -> CompactionOutcome | None:
    """Replace the covered part of the view with the notes; None means "use full compaction"."""
    config = config or session.store.config
    memory = load_memory(session)
    if memory is None or is_empty_template(memory.notes):
        return None
    snapshot = session.snapshot()
    entries = snapshot.entries
    floor = max((i + 1 for i, e in enumerate(entries) if is_boundary(e)), default=0)
    covered_end = len(entries) - len(_after(entries, memory.covers_seq))
    if covered_end <= floor:
        return None
    start = kept_suffix_start(
        entries,
        min_tokens=config.memory_keep_min_tokens,
        min_text_messages=config.memory_keep_min_text_messages,
        max_tokens=config.memory_keep_max_tokens,
        floor_index=floor,
        start=covered_end,
    )
    if start > covered_end or start <= 0:
        return None
    summarized, kept = entries[:start], entries[start:]
    if not any(e.message.is_sent for e in summarized):
        return None
    notes = truncate_sections(
        memory.notes, per_section_tokens=config.memory_section_tokens, total_tokens=config.memory_total_tokens
    )
    pins = plan_pins(session, summarized, kept, auto=config.auto_pin_instructions)
    gated = gate_notes(notes, summarized, cwd=session.cwd, config=config, budget=summary_budget(session, config, pins))
    notes = gated.text if gated is not None else notes
    if threshold is not None:
        from sessionstore.storage.codecs.tokens import estimate_text

        if sum(e.tokens for e in kept) + estimate_text(notes) >= threshold:
            return None
    try:
        return commit_compaction(
            session,
            snapshot,
            summarized=summarized,
            kept=kept,
            summary_text=notes,
            truncated=False,
            kind="session-memory",
            trigger=trigger,
            layout="suffix",
            summarizer=SUMMARIZER_NAME,
            gated=gated,
            recall_note=config.recall_note,
            pins=pins,
        )
    except CompactionWouldNotShrink:
        return None
