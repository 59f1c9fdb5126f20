"""Calling a summarizer with the prompt-too-long fallback of full compaction.

When the summary request itself is over the model's window, the oldest API
rounds are dropped (enough to cover the token gap the error states, else 20%
of the rounds, always keeping at least one) and the call is retried, a
bounded number of times.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

from sessionstore.compaction.condense import EraOf, fit_body, hold_to_budget
from sessionstore.compaction.facts import Facts, GateReport, apply_gate, span_facts
from sessionstore.compaction.rounds import group_rounds
from sessionstore.compaction.summarizers.base import PromptTooLong, Summarizer, SummarizerError, SummaryResult
from sessionstore.storage.engine.config import Config
from sessionstore.storage.core.types import ViewEntry

#: Share of the rounds dropped per retry when the error states no token counts.
FALLBACK_DROP_SHARE = 0.2


class CompactionFailed(SummarizerError):
    """The summary request stayed too long after every allowed retry."""


def _round_tokens(round_: Sequence[ViewEntry]) -> int:
    """Tokens a round adds to the request (system entries are never sent)."""
    return sum(entry.tokens for entry in round_ if entry.message.is_sent)


def rounds_to_drop(rounds: Sequence[Sequence[ViewEntry]], gap: int | None) -> int:
    """How many of the oldest `rounds` to drop: cover `gap` tokens, else 20%; keep one."""
    droppable = len(rounds) - 1
    if droppable <= 0:
        return 0
    if not gap:
        return min(max(1, math.ceil(len(rounds) * FALLBACK_DROP_SHARE)), droppable)
    count, covered = 0, 0
    while count < droppable and covered < gap:
        covered += _round_tokens(rounds[count])
        count += 1
    return count


def _flatten(rounds: Sequence[Sequence[ViewEntry]]) -> list[ViewEntry]:
    """The entries of `rounds`, in order."""
    return [entry for round_ in rounds for entry in round_]


def summarize_with_retry(
    summarizer: Summarizer,
    entries: Sequence[ViewEntry],
    *,
    custom_instructions: str | None = None,
    max_retries: int = 3,
) -> tuple[SummaryResult, bool]:
    """Summarize `entries`, dropping the oldest rounds on PromptTooLong; (result, truncated).

    Raises `CompactionFailed` once `max_retries` retries were all too long;
    other summarizer errors propagate unchanged.
    """
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, not {max_retries}")
    rounds = group_rounds(entries)
    dropped, truncated = 0, False
    attempt = 0
    while True:
        try:
            result = summarizer.summarize(
                _flatten(rounds[dropped:]), custom_instructions=custom_instructions, truncated=truncated
            )
            return result, truncated
        except PromptTooLong as err:
            if attempt >= max_retries:
                raise CompactionFailed(_failure_message(max_retries, dropped, len(rounds), err)) from err
            more = rounds_to_drop(rounds[dropped:], err.gap)
            dropped += more
            truncated = truncated or more > 0
            attempt += 1


def _failure_message(retries: int, dropped: int, total: int, err: PromptTooLong) -> str:
    """What CompactionFailed says: how many retries, how much was dropped, the last error."""
    plural = "retry" if retries == 1 else "retries"
    return (
        f"compaction failed: the summary request was still too long after {retries} {plural} "
        f"(dropped the oldest {dropped} of {total} API rounds); last error: {err}"
    )


@dataclass(frozen=True, slots=True)
class GatedSummary:
    """A summary after the facts gate: the text that enters the view, and what the gate found."""

    result: SummaryResult
    truncated: bool
    facts: Facts | None
    report: GateReport | None

    @property
    def text(self) -> str:
        return self.result.text


@dataclass(frozen=True, slots=True)
class SummaryBudget:
    """What a compaction holds its summary to: the token budget and where condensed facts point."""

    max_tokens: int
    era_of: EraOf
    #: Text the summary message carries beside the summary (the pinned messages), counted as held.
    also_held: str = ""


def summarize_gated(
    summarizer: Summarizer,
    entries: Sequence[ViewEntry],
    *,
    cwd: str | None,
    config: Config,
    custom_instructions: str | None = None,
    budget: SummaryBudget | None = None,
) -> GatedSummary:
    """Summarize with the prompt-too-long fallback, then run the facts gate over the whole span.

    The gate sees every entry, also those of rounds dropped to fit the request,
    so a truncated summary still keeps their user messages and paths. With a `budget`, the
    gated text stays within it: the newest facts verbatim, the rest condensed into counts
    and recall references.
    """
    result, truncated = summarize_with_retry(
        summarizer, entries, custom_instructions=custom_instructions, max_retries=config.ptl_max_retries
    )
    return _gated(result, truncated, entries, cwd=cwd, config=config, budget=budget)


def gate_notes(
    notes: str, entries: Sequence[ViewEntry], *, cwd: str | None, config: Config, budget: SummaryBudget | None = None
) -> GatedSummary | None:
    """The facts gate over session notes that stand in for a summary (None when the gate is off and no budget)."""
    if not config.facts_gate_enabled and budget is None:
        return None
    return _gated(SummaryResult(text=notes, raw=notes), False, entries, cwd=cwd, config=config, budget=budget)


def _gated(
    result: SummaryResult,
    truncated: bool,
    entries: Sequence[ViewEntry],
    *,
    cwd: str | None,
    config: Config,
    budget: SummaryBudget | None,
) -> GatedSummary:
    """The facts gate (and the budget, when given) over one summary text."""
    if not config.facts_gate_enabled:
        if budget is None:
            return GatedSummary(result, truncated, None, None)
        return GatedSummary(
            dataclasses.replace(result, text=fit_body(result.text, budget.max_tokens)), truncated, None, None
        )
    facts = span_facts(entries, cwd=cwd, budget=config.user_messages_budget_tokens)
    if budget is None:
        text, report = apply_gate(result.text, facts)
        return GatedSummary(dataclasses.replace(result, text=text), truncated, facts, report)
    held = hold_to_budget(
        result.text, facts, max_tokens=budget.max_tokens, era_of=budget.era_of, also_held=budget.also_held
    )
    return GatedSummary(dataclasses.replace(result, text=held.text), truncated, held.facts, held.report)
