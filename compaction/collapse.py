"""Layer 4 (off by default): context collapse, folding the oldest API rounds into short entries.

When the window's fill passes `collapse_start_ratio` (90%) of the effective
window, the oldest API rounds are folded into one *collapse entry*: a user
message holding a short extractive summary of the span (its user requests,
the tools it ran, its last assistant text), with metadata
`{"collapse": true, "span": [first_uuid, last_uuid]}`. Each fold is its own
rewrite, recorded in the commit log: an appended `system` message with
subtype `collapse_commit` whose metadata lists the folded uuids and the tokens
freed. No `compactions` row is written (a collapse is not a compaction).

Folds always start at the oldest entries, after the leading collapse entries
and summaries of earlier folds and compactions, and never touch the last
`KEEP_ROUNDS` (2) API rounds. Round boundaries never cut a tool call or a
streamed response, and the fold becomes a user message in front of a round
that opens with an assistant message, so the view stays valid. System
entries of the span are not folded: they stay, right after the collapse
entry. Past `collapse_block_ratio` (95%) the pipeline raises `ContextFull`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from sessionstore.storage.core.types import ViewEntry
from sessionstore.storage.records.validate import normalize

from .pressure import usage_credit
from .rounds import group_rounds
from .working import WorkingView, blocks, iso, system_marker

SUBTYPE = "collapse_commit"
KEEP_ROUNDS = 2
#: What a collapse entry is assumed to cost when choosing how much to fold.
SUMMARY_ALLOWANCE_TOKENS = 400
SUMMARY_MAX_CHARS = 1_500
LINE_MAX_CHARS = 160
MAX_REQUESTS_LISTED = 6


@dataclass(frozen=True, slots=True)
class FoldInfo:
    """One fold: what went into which collapse entry, and what it freed."""

    collapse_uuid: str
    folded_uuids: list[str]
    tokens_freed: int
    commit: int

    def to_dict(self) -> dict[str, object]:
        return {
            "collapse_uuid": self.collapse_uuid,
            "messages": len(self.folded_uuids),
            "span": [self.folded_uuids[0], self.folded_uuids[-1]],
            "tokens_freed": self.tokens_freed,
            "commit": self.commit,
        }


def is_collapse_entry(entry: ViewEntry) -> bool:
    """A collapse entry written by an earlier fold."""
    return entry.role == "user" and bool(entry.message.metadata.get("collapse"))


def _leading_end(entries: Sequence[ViewEntry]) -> int:
    """End of the leading run of system entries, collapse entries and compaction summaries."""
    index = 0
    while index < len(entries):
        entry = entries[index]
        if not (entry.role == "system" or is_collapse_entry(entry) or entry.message.is_compact_summary):
            break
        index += 1
    return index


def choose_span(entries: Sequence[ViewEntry], need: int) -> tuple[int, int] | None:
    """[first, end) of the oldest rounds to fold to free about `need` tokens; None if none may go."""
    first = _leading_end(entries)
    groups = group_rounds(entries[first:])
    rounds = [i for i, g in enumerate(groups) if _opens_with_assistant(g)]
    if len(rounds) <= KEEP_ROUNDS:
        return None
    foldable = groups[: rounds[-KEEP_ROUNDS]]
    end = first
    freed = -SUMMARY_ALLOWANCE_TOKENS
    has_round = False
    for group in foldable:
        end += len(group)
        freed += sum(e.tokens for e in group if e.role != "system")
        has_round = has_round or _opens_with_assistant(group)
        if has_round and freed >= need:
            break
    return (first, end) if has_round else None


def _opens_with_assistant(group: Sequence[ViewEntry]) -> bool:
    for entry in group:
        if entry.role != "system":
            return entry.role == "assistant"
    return False


def summarize_span(span: Sequence[ViewEntry]) -> str:
    """A short extractive summary: user requests, tools run, the last assistant text."""
    sent = [e for e in span if e.role != "system"]
    requests = [_first_line(t) for t in (_text(e) for e in sent if e.role == "user") if t]
    tools: dict[str, list[str]] = {}
    for entry in sent:
        for block in blocks(entry):
            if block.get("type") == "tool_use":
                tools.setdefault(str(block.get("name")), []).append(_tool_hint(block.get("input")))
    answers = [t for t in (_text(e) for e in sent if e.role == "assistant") if t]
    lines = [f"[Collapsed {len(sent)} earlier messages]"]
    lines += [f"User: {r}" for r in requests[-MAX_REQUESTS_LISTED:]]
    for name, hints in tools.items():
        shown = ", ".join(dict.fromkeys(h for h in hints if h))
        lines.append(f"Tool {name} x{len(hints)}" + (f": {shown}" if shown else ""))
    if answers:
        lines.append(f"Assistant: {_first_line(answers[-1])}")
    text = "\n".join(_clip(line) for line in lines)
    return text[:SUMMARY_MAX_CHARS]


def _text(entry: ViewEntry) -> str:
    if isinstance(entry.content, str):
        return entry.content.strip()
    return "\n".join(str(b.get("text", "")) for b in entry.content if b.get("type") == "text").strip()


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _tool_hint(tool_input: object) -> str:
    """The most telling input field of a tool call (a path, a command, a pattern)."""
    if not isinstance(tool_input, dict):
        return ""
    for key in ("file_path", "path", "command", "pattern", "url", "query"):
        if isinstance(tool_input.get(key), str):
            return _clip(tool_input[key], 60)
    return ""


def _clip(text: str, limit: int = LINE_MAX_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fold_once(work: WorkingView, tokens: int, target: int, usage_index: int | None, now: datetime) -> FoldInfo | None:
    """Fold the oldest rounds enough to get under `target` (or as far as allowed)."""
    span_bounds = choose_span(work.entries, tokens - target)
    if span_bounds is None:
        return None
    first, end = span_bounds
    span = work.entries[first:end]
    folded = [i for i in range(first, end) if work.entries[i].role != "system"]
    uuids = [work.entries[i].uuid for i in folded]
    commit = sum(1 for e in work.entries[:first] if is_collapse_entry(e)) + 1
    entry = normalize(
        {
            "role": "user",
            "content": summarize_span(span),
            "timestamp": iso(now),
            "metadata": {"collapse": True, "span": [uuids[0], uuids[-1]], "messages": len(uuids), "commit": commit},
        }
    )
    freed_by_index = {i: work.entries[i].tokens for i in folded}
    usage_uuid = work.entries[usage_index].uuid if usage_index is not None else None
    credit = usage_credit(work.entries, usage_index, freed_by_index)
    before = work.tokens
    work.remove(set(folded))
    added = work.insert(first, entry)
    if usage_index is not None and usage_index >= first:
        credit -= added.tokens
    freed = before - work.tokens
    work.append(
        system_marker(
            SUBTYPE,
            f"Collapse commit {commit}: folded {len(uuids)} messages into one entry, about {freed:,} tokens.",
            {
                "commit": commit,
                "collapse_uuid": entry.uuid,
                "span": [uuids[0], uuids[-1]],
                "folded_uuids": uuids,
                "tokens_freed": freed,
                "usage_uuid": usage_uuid,
                "usage_credit": max(credit, 0),
            },
            now,
        )
    )
    return FoldInfo(entry.uuid, uuids, freed, commit)
