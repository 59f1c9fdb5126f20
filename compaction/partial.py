"""Partial compaction around a pivot message.

`from`: keep the prefix up to the pivot, summarize what follows (the prompt
cache of the prefix survives). `up_to`: summarize what precedes the pivot and
keep the suffix from it, leaving out earlier boundaries and summaries.
Split points move to keep invariant 3, never the other way, and the outcome
says where and why (`pivot_note`). A `from` prefix is followed by the summary
and an `up_to` suffix by nothing but the summary before it, so only whole API
rounds constrain the split: an `up_to` pivot inside a round summarizes up to
that round's start.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal, Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.core.errors import MessageNotFound
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import ViewEntry

from .commit import CompactionOutcome, Layout, commit_compaction
from .pinned_summary import summarize_with_pins
from .full import NothingToCompact
from .messages import is_boundary
from .rounds import adjust_split, split_problem
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
    if direction not in ("from", "up_to"):
        raise ValueError(f"direction must be 'from' or 'up_to', not {direction!r}")
    if not pivot_uuid or not pivot_uuid.strip():
        raise MessageNotFound("the pivot message uuid is empty")
    config = config or session.store.config
    snapshot = session.snapshot()
    entries = snapshot.entries
    index = next((i for i, e in enumerate(entries) if e.uuid == pivot_uuid), None)
    if index is None:
        raise MessageNotFound(f"message {pivot_uuid!r} is not in the active view of session {session.id}")
    cut, note = split_at_pivot(entries, index, direction)
    if direction == "from":
        kept, summarized = entries[:cut], entries[cut:]
        layout: Layout = "prefix"
    else:
        summarized = entries[:cut]
        kept = [e for e in entries[cut:] if not is_boundary(e) and not e.message.is_compact_summary]
        layout = "suffix"
    if not any(e.message.is_sent for e in summarized):
        side = "after" if direction == "from" else "before"
        raise NothingToCompact(f"nothing to summarize {side} message {pivot_uuid}" + (f" ({note})" if note else ""))
    pins, gated = summarize_with_pins(
        session, summarizer, summarized, kept, config=config, custom_instructions=custom_instructions
    )
    outcome = commit_compaction(
        session,
        snapshot,
        summarized=summarized,
        kept=kept,
        summary_text=gated.text,
        truncated=gated.truncated,
        kind=f"partial-{direction}",
        trigger=trigger,
        layout=layout,
        summarizer=summarizer.name,
        custom_instructions=custom_instructions,
        gated=gated,
        recall_note=config.recall_note,
        pins=pins,
    )
    return replace(outcome, pivot_uuid=pivot_uuid, pivot_note=note)


def split_at_pivot(entries: Sequence[ViewEntry], index: int, direction: Direction) -> tuple[int, str | None]:
    """The split for a pivot at `index`, and a sentence saying where and why it moved (None if it did not).

    `from` keeps entries[:cut] (the split moves later: more is kept); `up_to`
    keeps entries[cut:] after the summary (the split moves earlier, to the
    start of the pivot's round).
    """
    pivot = entries[index]
    if direction == "from":
        proposed = index + 1
        cut = adjust_split(entries, proposed, direction="later", opening="any")
        if cut == proposed:
            return cut, None
        why = split_problem(entries, proposed, "any")
        last = entries[cut - 1]
        return cut, (
            f"the split moved from after {pivot.uuid} to after {last.uuid} "
            f"({cut - proposed} more message(s) kept) because {why}"
        )
    cut = adjust_split(entries, index, direction="earlier", opening="after_user")
    if cut == index:
        return cut, None
    why = split_problem(entries, index, "after_user")
    first = entries[cut]
    return cut, (
        f"the split moved from before {pivot.uuid} to before {first.uuid} "
        f"({index - cut} more message(s) kept) because {why}"
    )
