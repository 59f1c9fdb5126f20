"""Holding a gated summary to its token budget: newest facts verbatim, older ones condensed.

Whatever wrote the summary, the text that enters the view is at most
`summary_max_tokens`. When the span's must-keep facts do not all fit, the
newest of each kind are listed verbatim and the rest become one line per kind
with a count and a `recall` reference over the boundaries whose stretch of the
transcript holds them (`412 earlier files touched (recall -b 3..40 --query PATH)`).
A condensed group is carried in the summary's metadata as a count and a seq
range, so the next compaction reads a constant amount, not every earlier list.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Callable

from sessionstore.compaction.facts import (
    FACT_KINDS,
    GATE_HEADING,
    KIND_TITLES,
    Condensed,
    Facts,
    GateReport,
    SummaryIndex,
)
from sessionstore.compaction.summarizers.carried import SECTION_HEADING
from sessionstore.storage.codecs.tokens import estimate_text

#: Which boundary's stretch of the transcript a seq lies in (1 + boundaries recorded before it).
EraOf = Callable[[int], int]
#: The kinds in the order they get the budget left after the summary's own text.
PRIORITY: tuple[str, ...] = ("user_messages", "open_items", "failures", "paths")
#: Share of the budget a summarizer's own text keeps at least when the facts do not fit beside it
#: (it is cut only as far as the facts need, never below this share).
BODY_SHARE = 0.5
#: What a condensed group's reference line says, and the placeholder the reader fills in.
NOUNS = {
    "user_messages": ("earlier user messages", "TEXT"),
    "paths": ("earlier files touched", "PATH"),
    "failures": ("earlier failed tool results", "LINE"),
    "open_items": ("earlier open items", "TEXT"),
}
CUT_MARK = "[… {n} lines cut to fit the summary budget]"
_REFERENCE = re.compile(r"\(recall -b (\d+)\.\.(\d+) --query [A-Z]+\)")


@dataclass(frozen=True, slots=True)
class Budgeted:
    """A summary held to its budget: the text, the gate's report, and the facts it keeps."""

    text: str
    report: GateReport
    facts: Facts


def reference_line(kind: str, group: Condensed, era_of: EraOf) -> str:
    """`- 412 earlier files touched (recall -b 3..40 --query PATH)`: a condensed group as one bullet."""
    noun, placeholder = NOUNS[kind]
    first, last = era_of(group.first_seq), era_of(group.last_seq)
    return f"- {group.count} {noun} (recall -b {first}..{max(first, last)} --query {placeholder})"


def references_in(text: str) -> list[tuple[int, int]]:
    """The boundary ranges of the recall references a summary names."""
    return [(int(a), int(b)) for a, b in _REFERENCE.findall(text)]


def hold_to_budget(body: str, facts: Facts, *, max_tokens: int, era_of: EraOf, also_held: str = "") -> Budgeted:
    """The gate within `max_tokens`: the body (cut when it must be), missing facts, condensed references.

    Linear in the body and the facts: the body is indexed once, each fact is a lookup and one
    estimate; the text is estimated whole only to confirm the result. With nothing missing,
    nothing condensed and the body within budget, the body is returned unchanged. `also_held` is text
    the summary message carries beside the summary (the pinned messages): a fact in it counts as held.
    """
    era_of = _cached(era_of)
    index = SummaryIndex(f"{body}\n{also_held}")
    present = {k: _held(index, facts, k) for k in FACT_KINDS}
    missing = {k: [f for f, held in zip(facts.of(k), present[k], strict=True) if not held] for k in FACT_KINDS}
    body_tokens = estimate_text(body)
    if not any(missing.values()) and not facts.condensed and body_tokens <= max_tokens:
        report = GateReport(_checked(facts), missing, 0, summary_tokens=body_tokens, budget=max_tokens)
        return Budgeted(body, report, facts)
    costs = {k: _Costs(facts.of(k)) for k in FACT_KINDS}
    overhead = estimate_text(GATE_HEADING) + _reference_reserve() + 8
    needed = overhead + _missing_cost(costs, present, cap=max_tokens)
    if body_tokens + needed <= max_tokens:
        everything = {k: list(range(len(facts.of(k)))) for k in FACT_KINDS}
        whole = _render(body, facts, everything, present, dict(facts.condensed), era_of)
        if estimate_text(whole) <= max_tokens:
            return _result(whole, body, facts, missing, present, dict(facts.condensed), {}, max_tokens, False, era_of)
    body_cut = False
    body_cap = max(int(max_tokens * BODY_SHARE), max_tokens - needed)
    if body_tokens > body_cap:
        body, body_cut = fit_body(body, body_cap), True
        body_tokens = estimate_text(body)
        index = SummaryIndex(f"{body}\n{also_held}")
        present = {k: _held(index, facts, k) for k in FACT_KINDS}
        missing = {k: [f for f, held in zip(facts.of(k), present[k], strict=True) if not held] for k in FACT_KINDS}
    chosen = _choose(facts, present, costs, max_tokens - body_tokens - overhead)
    while True:
        condensed, newly = _condense(facts, present, chosen)
        text = _render(body, facts, chosen, present, condensed, era_of)
        if estimate_text(text) <= max_tokens or not any(chosen.values()):
            break
        _drop_oldest(chosen)
    if estimate_text(text) > max_tokens:
        text = fit_body(text, max_tokens)
    return _result(text, body, facts, missing, present, condensed, newly, max_tokens, body_cut, era_of)


class _Costs:
    """Each fact's tokens as listed (estimate + bullet), estimated on first use: a span of thousands of
    facts lists a few hundred, so only those (and the sum up to the budget) are ever estimated."""

    def __init__(self, facts: tuple[str, ...]):
        self.facts = facts
        self.known: dict[int, int] = {}

    def __getitem__(self, index: int) -> int:
        cost = self.known.get(index)
        if cost is None:
            cost = self.known[index] = estimate_text(self.facts[index]) + 2
        return cost


def _missing_cost(costs: dict[str, _Costs], present: dict[str, list[bool]], *, cap: int) -> int:
    """The tokens of every fact not held, counted only until they pass `cap` (past it, all that matters
    is that they do not fit: the budget is then split, never spent on them all)."""
    total = 0
    for kind in FACT_KINDS:
        for index, held in enumerate(present[kind]):
            if not held:
                total += costs[kind][index]
                if total > cap:
                    return total
    return total


def _cached(era_of: EraOf) -> EraOf:
    """`era_of` remembering its answers for one compaction (each is a database read)."""
    seen: dict[int, int] = {}

    def lookup(seq: int) -> int:
        if seq not in seen:
            seen[seq] = era_of(seq)
        return seen[seq]

    return lookup


def _checked(facts: Facts) -> dict[str, int]:
    return {k: len(facts.of(k)) for k in FACT_KINDS}


def _held(index: SummaryIndex, facts: Facts, kind: str) -> list[bool]:
    return [index.holds(kind, f, facts.cwd) for f in facts.of(kind)]


@functools.cache
def _reference_reserve() -> int:
    """Tokens the reference lines can take: one line with the largest figures per kind."""
    big = Condensed(10**9, 0, 0)
    return sum(
        estimate_text(reference_line(k, big, lambda _s: 10**6)) + estimate_text(KIND_TITLES[k]) + 2 for k in FACT_KINDS
    )


def _newest_first(facts: Facts, kind: str) -> list[int]:
    """Indexes of the kind's facts, newest first (user messages are stored newest first already)."""
    indexes = list(range(len(facts.of(kind))))
    return indexes if kind == "user_messages" else indexes[::-1]


def _choose(facts: Facts, present: dict[str, list[bool]], costs: dict[str, _Costs], room: int) -> dict[str, list[int]]:
    """Per kind, the missing facts listed verbatim: an equal share each first, then what is left, newest first."""
    chosen: dict[str, list[int]] = {k: [] for k in FACT_KINDS}
    queues = {k: [i for i in _newest_first(facts, k) if not present[k][i]] for k in FACT_KINDS}
    left = max(0, room)
    for rank, kind in enumerate(PRIORITY):
        share = left // (len(PRIORITY) - rank)
        spent = _take(queues[kind], costs[kind], chosen[kind], share)
        left -= spent
    for kind in PRIORITY:
        left -= _take(queues[kind], costs[kind], chosen[kind], left)
    return chosen


def _take(queue: list[int], costs: _Costs, into: list[int], room: int) -> int:
    """Move facts from the front of `queue` into `into` while they fit `room`; the tokens spent."""
    spent = taken = 0
    while taken < len(queue) and spent + costs[queue[taken]] <= room:
        spent += costs[queue[taken]]
        taken += 1
    into.extend(queue[:taken])
    del queue[:taken]
    return spent


def _drop_oldest(chosen: dict[str, list[int]]) -> None:
    """Give up a tenth (at least one) of the verbatim facts of the kind listing most, the oldest first."""
    kind = max(chosen, key=lambda k: len(chosen[k]))
    count = max(1, len(chosen[kind]) // 10)
    del chosen[kind][-count:]


def _condense(
    facts: Facts, present: dict[str, list[bool]], chosen: dict[str, list[int]]
) -> tuple[dict[str, Condensed], dict[str, list[str]]]:
    """Per kind, the carried group widened by every fact neither held nor listed; and those facts."""
    groups = dict(facts.condensed)
    newly: dict[str, list[str]] = {}
    for kind in FACT_KINDS:
        listed = set(chosen[kind])
        rest = [i for i in range(len(facts.of(kind))) if not present[kind][i] and i not in listed]
        if not rest:
            continue
        seqs = [facts.origins(kind)[i] for i in rest]
        group = Condensed(len(rest), min(seqs), max(seqs))
        groups[kind] = group.merged(groups.get(kind))
        newly[kind] = [facts.of(kind)[i] for i in rest]
    return groups, newly


def _render(
    body: str,
    facts: Facts,
    chosen: dict[str, list[int]],
    present: dict[str, list[bool]],
    condensed: dict[str, Condensed],
    era_of: EraOf,
) -> str:
    """The body, then the gate's section: per kind the listed facts and its reference line."""
    parts = []
    for kind in FACT_KINDS:
        listed = sorted(i for i in chosen[kind] if not present[kind][i])
        lines = [f"- {facts.of(kind)[i]}" for i in listed]
        if kind in condensed:
            lines.append(reference_line(kind, condensed[kind], era_of))
        if lines:
            parts.append(KIND_TITLES[kind])
            parts.extend(lines)
    if not parts:
        return body
    return f"{body.rstrip()}\n\n{GATE_HEADING}\n" + "\n".join(parts)


def _result(
    text: str,
    body: str,
    facts: Facts,
    missing: dict[str, list[str]],
    present: dict[str, list[bool]],
    condensed: dict[str, Condensed],
    newly: dict[str, list[str]],
    max_tokens: int,
    body_cut: bool,
    era_of: EraOf,
) -> Budgeted:
    """The report and the facts the summary keeps verbatim (with their seqs) plus the condensed groups."""
    gone = {k: set(newly.get(k, ())) for k in FACT_KINDS}
    keep = {k: [i for i, f in enumerate(facts.of(k)) if f not in gone[k]] for k in FACT_KINDS}
    kept = Facts(
        **{k: tuple(facts.of(k)[i] for i in keep[k]) for k in FACT_KINDS},
        cwd=facts.cwd,
        seqs={k: tuple(facts.origins(k)[i] for i in keep[k]) for k in FACT_KINDS},
        condensed=condensed,
    )
    references = {
        k: {
            "count": g.count,
            "first_boundary": era_of(g.first_seq),
            "last_boundary": max(era_of(g.first_seq), era_of(g.last_seq)),
        }
        for k, g in condensed.items()
    }
    tokens = estimate_text(text)
    added = tokens - estimate_text(body) if text != body else 0
    report = GateReport(
        checked=_checked(facts),
        missing=missing,
        added_tokens=max(0, added),
        condensed=newly,
        references=references,
        summary_tokens=tokens,
        budget=max_tokens,
        body_cut=body_cut,
    )
    return Budgeted(text, report, kept)


def fit_body(text: str, max_tokens: int) -> str:
    """`text` within `max_tokens`: the largest sections lose their last lines first, each marked as cut.

    Sections are the numbered summary headings (text without them is one section); a section
    keeps at least its heading line. A line whose removal would free far more than is over is cut
    inside instead (ending in `…`), so a summary a little over keeps nearly all of itself. Whatever
    is still over is cut at the end.
    """
    if estimate_text(text) <= max_tokens:
        return text
    sections = [list(lines) for lines in _sections(text)]
    costs = [[estimate_text(line) + 1 for line in lines] for lines in sections]
    cut = [0] * len(sections)
    total, marks = sum(map(sum, costs)), 0
    order = sorted(range(len(sections)), key=lambda i: -sum(costs[i]))
    for i in order:
        while len(sections[i]) - cut[i] > 1 and (over := total + MARK_TOKENS * marks - max_tokens) > 0:
            last = len(sections[i]) - cut[i] - 1
            if costs[i][last] - over > LINE_CUT_MIN_TOKENS:
                sections[i][last] = longest_prefix(sections[i][last], costs[i][last] - 1 - over, "…")
                total -= over
                break
            marks += cut[i] == 0
            cut[i] += 1
            total -= costs[i][last]
        if total + MARK_TOKENS * marks <= max_tokens:
            break
    pieces = []
    for lines, n in zip(sections, cut, strict=True):
        kept = lines[: len(lines) - n]
        pieces.append("\n".join(kept + ([CUT_MARK.format(n=n)] if n else [])))
    return longest_prefix("\n".join(pieces), max_tokens)


#: What a section's cut mark line is counted as while cutting.
MARK_TOKENS = 12

#: A line is cut inside, not dropped, when the part of it that fits is more than this many tokens.
LINE_CUT_MIN_TOKENS = 8


def longest_prefix(text: str, max_tokens: int, tail: str = "") -> str:
    """`text` whole if it fits `max_tokens`, else its longest start (then `tail`) that does, ending at a word."""
    if estimate_text(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_text(text[:middle] + tail) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    start = text[:low]
    space = start.rfind(" ")
    if space > len(start) - WORD_BACKOFF_CHARS:
        start = start[:space]
    out = start.rstrip() + tail if start.strip() else ""
    while out and estimate_text(out) > max_tokens:
        out = out[:-1]
    return out


#: How far back `longest_prefix` looks for a space to end on a whole word.
WORD_BACKOFF_CHARS = 20


def _sections(text: str) -> list[list[str]]:
    """The text's lines grouped by numbered section heading (the lines before the first are one group)."""
    starts = [m.start() for m in SECTION_HEADING.finditer(text)]
    bounds = ([0] if not starts or starts[0] > 0 else []) + starts + [len(text)]
    return [text[a:b].rstrip("\n").split("\n") for a, b in pairwise(bounds) if text[a:b].strip()]
