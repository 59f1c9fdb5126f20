"""Scoring compaction strategies on recorded sessions, and re-compacting one boundary for a diff.

For each recorded boundary (and the current view of a session without one),
the span that boundary summarized is rebuilt from the exact view before it
and handed to each strategy; nothing is written (every read runs in a
read-only snapshot, every summary stays in memory). Per strategy: tokens
after / before and, per fact kind of the facts gate, the share of the span's
facts the strategy kept verbatim, before any gate ran. Strategies:

* extractive: the offline summarizer;
* gated: the extractive summary after the facts gate, held to the session's summary budget, as a
  compaction writes it: its facts count as kept verbatim or by a recall reference that names
  them, and it reports the user messages lost (neither);
* anthropic: the model summarizer through the real SDK (only when asked);
* recorded: the summary another summarizer wrote: the original tool's (imported boundaries) or
  the API's (an API boundary, whose summary is its compaction block's content);
* mask: the span itself with every tool result cleared but the last five;
* user-only: the user's messages, newest first, within the 20k budget.

Each span names its boundary's kind and trigger (`api-on-demand`, `manual`; `full`, `auto`...), so
the API's compactions read apart from ours.
"""

from __future__ import annotations

import difflib
import statistics
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, Sequence

from sessionstore.compaction.facts import (
    FACT_KINDS,
    Facts,
    apply_gate,
    budgeted_user_messages,
    missing_facts,
    span_facts,
)
from sessionstore.compaction.full import pending_turn_start
from sessionstore.compaction.microcompact import CLEARED_TEXT
from sessionstore.compaction.prompt import summary_message_text
from sessionstore.compaction.summarize import summarize_with_retry
from sessionstore.compaction.summarizers.base import Summarizer
from sessionstore.compaction.summarizers.extractive import collect_activity
from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.read.history import Boundary, boundaries, view_at
from sessionstore.storage.read.recall import content_as_text
from sessionstore.storage.write.apicompaction import API_KINDS
from sessionstore.storage.write.session import Session
from sessionstore.storage.codecs.tokens import estimate_content
from sessionstore.storage.core.types import ViewEntry

STRATEGIES: tuple[str, ...] = ("extractive", "gated", "anthropic", "recorded", "mask", "user-only")
DEFAULT_STRATEGIES: tuple[str, ...] = ("extractive", "gated", "recorded", "mask", "user-only")
RECOMPACT_STRATEGIES: tuple[str, ...] = ("extractive", "anthropic", "mask", "user-only")
MASK_KEEP_RECENT = 5
IMPORTED_PREFIX = "imported:"


class EvalError(SessionStoreError, ValueError):
    """An evaluation that cannot run as asked (unknown strategy, nothing to evaluate)."""


@dataclass(frozen=True, slots=True)
class Span:
    """What one boundary summarized (or what a compaction would summarize now)."""

    boundary: int | None
    entries: list[ViewEntry]
    recorded: str | None
    imported: bool
    #: The boundary's compaction kind and trigger (None for the current view).
    kind: str | None = None
    trigger: str | None = None

    @property
    def tokens(self) -> int:
        return sum(e.tokens for e in self.entries if e.message.is_sent)

    @property
    def summarized_elsewhere(self) -> bool:
        """True when another summarizer wrote the recorded summary (an imported tool's, or the API's block)."""
        return self.imported or self.kind in API_KINDS


@dataclass(frozen=True, slots=True)
class StrategyScore:
    """One strategy on one span: size and fact retention (share kept verbatim, None when no facts)."""

    strategy: str
    tokens_before: int
    tokens_after: int
    checked: dict[str, int]
    retention: dict[str, float | None]
    #: `gated` only: user messages neither verbatim nor named by a recall reference.
    lost_user_messages: int | None = None

    @property
    def ratio(self) -> float:
        return self.tokens_after / self.tokens_before if self.tokens_before else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(self.ratio, 4),
            "checked": dict(self.checked),
            "retention": {k: (None if v is None else round(v, 4)) for k, v in self.retention.items()},
            **({"lost_user_messages": self.lost_user_messages} if self.lost_user_messages is not None else {}),
        }


@dataclass(slots=True)
class SpanEval:
    """Every strategy on one span."""

    session: str
    boundary: int | None
    imported: bool
    kind: str | None = None
    trigger: str | None = None
    scores: dict[str, StrategyScore] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "boundary": self.boundary,
            "kind": self.kind,
            "trigger": self.trigger,
            "imported": self.imported,
            "strategies": {name: s.to_dict() for name, s in self.scores.items()},
        }


def session_spans(session: Session) -> list[Span]:
    """The span of every recorded boundary; the current view's span when there is none."""
    found = boundaries(session)
    if not found:
        entries = session.active_entries()
        span = entries[: pending_turn_start(entries)]
        return [Span(None, span, None, False)] if any(e.message.is_sent for e in span) else []
    return [boundary_span(session, b) for b in found]


def boundary_span(session: Session, b: Boundary) -> Span:
    """The entries boundary `b` summarized, from the exact view before it."""
    from sessionstore.storage.read.history import summarized_messages

    view = view_at(session, b.replaced_version)
    seqs = {m.seq for m in summarized_messages(session, b.index)}
    span = [e for e in view if e.seq in seqs] or view
    imported = (b.summarizer or "").startswith(IMPORTED_PREFIX)
    return Span(b.index, span, b.summary, imported, b.kind, b.trigger)


def strategy_text(
    strategy: str, span: Span, *, summarizer: Summarizer | None = None, budget: int = 20_000
) -> str | None:
    """What a strategy leaves of the span, as text (None when it does not apply to this span)."""
    if strategy == "recorded":
        return (span.recorded or "") if span.summarized_elsewhere else None
    if strategy == "mask":
        return "\n\n".join(content_as_text(e.content) for e in masked(span.entries) if e.message.is_sent)
    if strategy == "user-only":
        return "\n\n".join(budgeted_user_messages(collect_activity(span.entries).requests(), budget))
    if strategy in ("extractive", "anthropic"):
        if summarizer is None:
            raise EvalError(f"strategy {strategy} needs a summarizer")
        result, _ = summarize_with_retry(summarizer, span.entries)
        return result.text
    raise EvalError(f"unknown strategy {strategy!r}: use {', '.join(STRATEGIES)}")


def masked(entries: Sequence[ViewEntry], keep: int = MASK_KEEP_RECENT) -> list[ViewEntry]:
    """The entries with every tool result's content cleared but the last `keep`."""
    ids = [
        b.get("tool_use_id")
        for e in entries
        if e.role == "user" and isinstance(e.content, list)
        for b in e.content
        if b.get("type") == "tool_result"
    ]
    kept = set(ids[-keep:]) if keep else set()
    out = []
    for entry in entries:
        if entry.role != "user" or not isinstance(entry.content, list):
            out.append(entry)
            continue
        content = [
            dict(b, content=CLEARED_TEXT) if b.get("type") == "tool_result" and b.get("tool_use_id") not in kept else b
            for b in entry.content
        ]
        out.append(ViewEntry(entry.position, entry.message, content, estimate_content(content), replaced=True))
    return out


def score(strategy: str, text: str, span: Span, facts: Facts) -> StrategyScore:
    """Size and per-kind retention of one strategy's text.

    Sizes use the store's content estimator on both sides: for `mask`, the masked
    entries as they would be sent; for the others, the text as one message.
    """
    missing = missing_facts(text, facts)
    checked = {kind: len(facts.of(kind)) for kind in FACT_KINDS}
    retention = {kind: (1 - len(missing[kind]) / checked[kind]) if checked[kind] else None for kind in FACT_KINDS}
    if strategy == "mask":
        after = sum(estimate_content(e.content) for e in masked(span.entries) if e.message.is_sent)
    else:
        after = estimate_content(text)
    return StrategyScore(strategy, span.tokens, after, checked, retention)


def score_gated(session: Session, span: Span, facts: Facts, summarizer: Summarizer | None) -> StrategyScore:
    """The extractive summary held to the session's budget by the gate: facts kept verbatim or by reference."""
    from sessionstore.compaction.condense import hold_to_budget, reference_line
    from sessionstore.compaction.summarizers.extractive import ExtractiveSummarizer
    from sessionstore.storage.read.recall import era_of

    result, _ = summarize_with_retry(summarizer or ExtractiveSummarizer(), span.entries)
    limit = session.store.config.summary_budget(session.context_window)
    eras = partial(era_of, session)
    held = hold_to_budget(result.text, facts, max_tokens=limit, era_of=eras)
    missing = missing_facts(held.text, facts)
    referenced = {
        kind for kind, group in held.facts.condensed.items() if reference_line(kind, group, eras) in held.text
    }
    retention: dict[str, float | None] = {}
    lost: dict[str, int] = {}
    for kind in FACT_KINDS:
        condensed = set(held.report.condensed.get(kind, [])) if kind in referenced else set()
        lost[kind] = sum(1 for f in missing[kind] if f not in condensed)
        checked = len(facts.of(kind))
        retention[kind] = (1 - lost[kind] / checked) if checked else None
    return StrategyScore(
        "gated",
        span.tokens,
        estimate_content(held.text),
        {k: len(facts.of(k)) for k in FACT_KINDS},
        retention,
        lost_user_messages=lost["user_messages"],
    )


def evaluate_span(
    session: Session, span: Span, strategies: Sequence[str], summarizers: dict[str, Summarizer], budget: int = 20_000
) -> SpanEval:
    """Every applicable strategy on one span; nothing written."""
    facts = span_facts(span.entries, cwd=session.cwd, budget=budget)
    out = SpanEval(session.id, span.boundary, span.imported, span.kind, span.trigger)
    for strategy in strategies:
        if strategy == "gated":
            out.scores[strategy] = score_gated(session, span, facts, summarizers.get("extractive"))
            continue
        text = strategy_text(strategy, span, summarizer=summarizers.get(strategy), budget=budget)
        if text is not None:
            out.scores[strategy] = score(strategy, text, span, facts)
    return out


def evaluate(
    sessions: Iterable[Session],
    strategies: Sequence[str],
    summarizers: dict[str, Summarizer],
    *,
    budget: int = 20_000,
    progress: Callable[[str], None] | None = None,
) -> list[SpanEval]:
    """Evaluate every span of every session."""
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise EvalError(f"unknown strategy {unknown[0]!r}: use {', '.join(STRATEGIES)}")
    results = []
    for session in sessions:
        spans = session_spans(session)
        for span in spans:
            if progress is not None:
                progress(f"{session.id[:8]} {span_name(span)}")
            results.append(evaluate_span(session, span, strategies, summarizers, budget))
    return results


def span_name(span: Span) -> str:
    """How a progress line names a span: the boundary with its kind and trigger, or the current view."""
    if span.boundary is None:
        return "current view"
    return f"boundary {span.boundary} ({span.kind}, {span.trigger})"


def medians(results: Sequence[SpanEval], strategies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per strategy: how many spans, median tokens after/before, median retention per kind."""
    out: dict[str, dict[str, Any]] = {}
    for strategy in strategies:
        scores = [r.scores[strategy] for r in results if strategy in r.scores]
        if not scores:
            continue
        retention = {}
        for kind in FACT_KINDS:
            values = [value for s in scores if (value := s.retention[kind]) is not None]
            retention[kind] = round(statistics.median(values), 4) if values else None
        out[strategy] = {
            "spans": len(scores),
            "ratio": round(statistics.median(s.ratio for s in scores), 4),
            "tokens": int(statistics.median(s.tokens_after for s in scores)),
            "retention": retention,
        }
        lost = [s.lost_user_messages for s in scores if s.lost_user_messages is not None]
        if lost:
            out[strategy]["lost_user_messages"] = sum(lost)
    return out


@dataclass(frozen=True, slots=True)
class Recompaction:
    """A boundary summarized again with another strategy: new text, its gate report, a diff."""

    session: str
    boundary: int
    strategy: str
    recorded: str
    summary: str
    gate: dict[str, Any]
    diff: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "boundary": self.boundary,
            "strategy": self.strategy,
            "recorded": self.recorded,
            "summary": self.summary,
            "facts_gate": self.gate,
            "diff": self.diff,
        }


def recompact(
    session: Session, index: int, strategy: str, *, summarizer: Summarizer | None = None, budget: int = 20_000
) -> Recompaction:
    """Summarize boundary `index`'s span again with `strategy`, gate it, diff it; nothing written."""
    if strategy not in RECOMPACT_STRATEGIES:
        raise EvalError(f"cannot recompact with {strategy!r}: use {', '.join(RECOMPACT_STRATEGIES)}")
    from sessionstore.storage.read.history import boundary

    b = boundary(session, index)
    span = boundary_span(session, b)
    text = strategy_text(strategy, span, summarizer=summarizer, budget=budget) or ""
    gated, report = apply_gate(text, span_facts(span.entries, cwd=session.cwd, budget=budget))
    new = summary_message_text(gated)
    recorded = b.summary or ""
    diff = "".join(
        difflib.unified_diff(
            (recorded + "\n").splitlines(keepends=True),
            (new + "\n").splitlines(keepends=True),
            fromfile=f"boundary {index} ({b.summarizer or 'recorded'})",
            tofile=f"boundary {index} ({strategy})",
        )
    )
    return Recompaction(session.id, index, strategy, recorded, new, report.to_dict(), diff)
