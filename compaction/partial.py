"""Partial compaction around a pivot message.

`from`: keep the prefix up to the pivot, summarize what follows (the prompt
cache of the prefix survives). `up_to`: summarize what precedes the pivot and
keep the suffix from it, leaving out earlier boundaries and summaries.
Split points move to keep invariant 3, never the other way.
"""

from __future__ import annotations

from typing import Literal

from sessionstore.storage.config import Config
from sessionstore.storage.errors import MessageNotFound
from sessionstore.storage.session import Session

from .commit import CompactionOutcome, commit_compaction
from .full import NothingToCompact
from .messages import is_boundary
from .rounds import adjust_split
from .summarize import summarize_gated
from .summarizers.base import Summarizer

Direction = Literal["from", "up_to"]


def compact_partial(
    session: Session,
    summarizer: Summarizer,
    *,
    pivot_uuid: str,
    direction: Direction,
    trigger: str = "manual",
    custom_instructions: str | None = None,
    config: Config | None = None,
) -> CompactionOutcome:
    """Summarize one side of the pivot and keep the other verbatim, in one rewrite."""
    config = config or session.store.config
    snapshot = session.snapshot()
    entries = snapshot.entries
    index = next((i for i, e in enumerate(entries) if e.uuid == pivot_uuid), None)
    if index is None:
        raise MessageNotFound(f"message {pivot_uuid!r} is not in the active view of session {session.id}")
    if direction == "from":
        cut = adjust_split(entries, index + 1, direction="later")
        kept, summarized = entries[:cut], entries[cut:]
        layout = "prefix"
    elif direction == "up_to":
        cut = adjust_split(entries, index, direction="earlier")
        summarized = entries[:cut]
        kept = [e for e in entries[cut:] if not is_boundary(e) and not e.message.is_compact_summary]
        layout = "suffix"
    else:
        raise ValueError(f"direction must be 'from' or 'up_to', not {direction!r}")
    if not any(e.message.is_sent for e in summarized):
        raise NothingToCompact(
            f"nothing to summarize {'after' if direction == 'from' else 'before'} message {pivot_uuid}"
        )
    gated = summarize_gated(summarizer, summarized, cwd=session.cwd, config=config,
                            custom_instructions=custom_instructions)
    return commit_compaction(
        session, snapshot, summarized=summarized, kept=kept, summary_text=gated.text, truncated=gated.truncated,
        kind=f"partial-{direction}", trigger=trigger, layout=layout, summarizer=summarizer.name,
        custom_instructions=custom_instructions, gated=gated, recall_note=config.recall_note,
    )
