"""Layer 1, every call: the tool-result budget.

Per user message (what the API receives: consecutive user entries merge into
one), a fresh tool result longer than `tool_result_max_chars` is spilled; and
while the message's tool results, as they would be sent, exceed
`tool_results_per_message_chars`, the largest fresh ones are spilled too.

Spilling stores the result's full text once in the blob store and shows a
`<persisted-output>` block instead: the original size, a preview of the first
`spill_preview_bytes` bytes (cut on a UTF-8 character boundary) and the
reference (the tool_use_id) under which `sessionstore spill cat` and
`materialize_spill` find the original.

"Fresh" means not yet decided: neither recorded in `replacements` nor looked
at by an earlier call of this pipeline. Earlier results are never spilled by
the per-message rule afterwards, so an already sent prefix stays byte-stable.
Counting the message as it is sent keeps this stable across a restart too:
after any decision the message is within budget, so re-deciding it finds
nothing to do. A result with a recorded decision whose view shows something
else gets the recorded text again (invariant 6).

Only text results are spilled (a string, or a list of text blocks, which is
spilled as the texts joined by newlines); results with images or documents
count toward the message but stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessionstore.storage.codecs.blobs import blob_sha
from sessionstore.storage.engine.config import Config
from sessionstore.storage.write.replacements import SPILLED, Replacement
from sessionstore.storage.records.validate import storable_text

from .working import LayerReport, Spill, WorkingView, blocks

OPEN_TAG = "<persisted-output>"
CLOSE_TAG = "</persisted-output>"


@dataclass(slots=True)
class BudgetState:
    """What earlier calls decided, for incremental scans."""

    decisions: dict[str, Replacement] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    resume: int = 0


@dataclass(slots=True)
class _Result:
    """One tool_result block of a user message."""

    entry: int
    block: int
    tool_use_id: str
    size: int
    text: str | None
    fresh: bool


def result_text(block: dict[str, Any]) -> str | None:
    """The text of a text-only tool result (None when it holds images or documents)."""
    content = block.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    return None


def result_size(block: dict[str, Any]) -> int:
    """Characters of text a tool result sends (non-text blocks count zero)."""
    content = block.get("content")
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return 0


def preview(data: bytes, limit: int) -> str:
    """At most `limit` bytes of `data`, never ending inside a UTF-8 character."""
    if len(data) <= limit:
        return data.decode("utf-8", "surrogatepass")
    cut = limit
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut].decode("utf-8", "surrogatepass")


def spill_text(tool_use_id: str, data: bytes, preview_bytes: int) -> str:
    """The `<persisted-output>` text shown instead of a spilled result (a pure function)."""
    head = preview(data, preview_bytes)
    shown = len(head.encode("utf-8", "surrogatepass"))
    return (
        f"{OPEN_TAG}\n"
        f"Output too large ({len(data):,} bytes). The full output is saved under reference "
        f"{tool_use_id!r} (sessionstore spill cat SESSION REFERENCE).\n"
        f"Preview (first {shown:,} bytes):\n"
        f"{storable_text(head)}\n"
        f"{CLOSE_TAG}"
    )


def encode(text: str) -> bytes:
    """The bytes a text result is stored as."""
    return text.encode("utf-8", "surrogatepass")


def apply_budget(work: WorkingView, state: BudgetState, config: Config) -> LayerReport:
    """Spill what the budget requires among user messages from `state.resume` on."""
    report = LayerReport("budget", tokens_before=work.tokens)
    changes: dict[int, dict[int, str]] = {}
    groups = _user_groups(work, state.resume)
    for group in groups:
        _decide_group(work, state, config, group, changes, report)
    state.resume = groups[-1][0] if groups and groups[-1][-1] == _last_sent(work) else len(work.entries)
    for index, replaced in changes.items():
        _rewrite_entry(work, index, replaced)
    report.acted = bool(changes)
    report.tokens_after = work.tokens
    return report


def _last_sent(work: WorkingView) -> int:
    """Index of the last user or assistant entry (-1 when none)."""
    for index in range(len(work.entries) - 1, -1, -1):
        if work.entries[index].role != "system":
            return index
    return -1


def _user_groups(work: WorkingView, start: int) -> list[list[int]]:
    """Indexes of user entries from `start`, grouped by the API message they merge into."""
    groups: list[list[int]] = []
    current: list[int] = []
    for index in range(start, len(work.entries)):
        role = work.entries[index].role
        if role == "user":
            current.append(index)
        elif role == "assistant" and current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _results(work: WorkingView, state: BudgetState, group: list[int]) -> list[_Result]:
    """The tool results of one user message, with what the budget needs to know."""
    found = []
    for index in group:
        for b, block in enumerate(blocks(work.entries[index])):
            if block.get("type") != "tool_result":
                continue
            tid = str(block.get("tool_use_id"))
            fresh = tid not in state.seen and tid not in state.decisions
            found.append(_Result(index, b, tid, result_size(block), result_text(block), fresh))
    return found


def _decide_group(
    work: WorkingView,
    state: BudgetState,
    config: Config,
    group: list[int],
    changes: dict[int, dict[int, str]],
    report: LayerReport,
) -> None:
    """Reapply recorded decisions, then spill over-long and over-budget fresh results."""
    results = _results(work, state, group)
    sizes: dict[str, int] = {}
    for r in results:
        decided = state.decisions.get(r.tool_use_id)
        if decided is not None:
            _reapply(work, r, decided, changes, report)
            sizes[r.tool_use_id] = len(decided.text)
        else:
            sizes[r.tool_use_id] = r.size
    spillable = [r for r in results if r.fresh and r.text is not None]
    for r in spillable:
        if r.size > config.tool_result_max_chars:
            sizes[r.tool_use_id] = _spill(work, state, config, r, changes, report, "max_chars")
    remaining = sorted((r for r in spillable if r.tool_use_id not in state.decisions), key=lambda r: -r.size)
    for r in remaining:
        if sum(sizes.values()) <= config.tool_results_per_message_chars:
            break
        sizes[r.tool_use_id] = _spill(work, state, config, r, changes, report, "per_message")
    state.seen.update(r.tool_use_id for r in results)


def _reapply(
    work: WorkingView, r: _Result, decided: Replacement, changes: dict[int, dict[int, str]], report: LayerReport
) -> None:
    """Show the recorded replacement again where the view shows something else."""
    block = blocks(work.entries[r.entry])[r.block]
    if block.get("content") != decided.text:
        changes.setdefault(r.entry, {})[r.block] = decided.text
        report.details["reapplied"] = report.details.get("reapplied", 0) + 1
        report.items += 1


def _spill(
    work: WorkingView,
    state: BudgetState,
    config: Config,
    r: _Result,
    changes: dict[int, dict[int, str]],
    report: LayerReport,
    rule: str,
) -> int:
    """Decide to spill one result; returns the size it will be sent with."""
    assert r.text is not None
    data = encode(r.text)
    text = spill_text(r.tool_use_id, data, config.spill_preview_bytes)
    decision = Replacement(r.tool_use_id, SPILLED, text, blob_sha(data), len(data))
    state.decisions[r.tool_use_id] = decision
    work.spills.append(Spill(decision, data))
    changes.setdefault(r.entry, {})[r.block] = text
    spilled = report.details.setdefault("spilled", [])
    spilled.append({"tool_use_id": r.tool_use_id, "chars": r.size, "bytes": len(data), "rule": rule})
    report.items += 1
    return len(text)


def _rewrite_entry(work: WorkingView, index: int, replaced: dict[int, str]) -> None:
    """Swap the replaced tool_result contents into one entry."""
    content = [
        dict(block, content=replaced[b]) if b in replaced else block
        for b, block in enumerate(blocks(work.entries[index]))
    ]
    work.replace_content(index, content)
