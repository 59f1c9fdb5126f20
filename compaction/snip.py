"""Layer 2 (on by default, conservative): remove low-value messages from the view.

Three rules, each applied only where the view stays a valid request
(invariant 3); the transcript keeps everything:

* **ack**: a user message that is only a bare acknowledgement ("ok",
  "thanks", "got it"...; no question mark, nothing else) is removed when it
  is not the last message sent and a neighbouring sent message is a user
  message (so removing it merges two user turns, never two assistant turns,
  and the first message stays a user message).
* **trivial_round**: an API round whose two sides are both trivial is removed
  whole: the assistant response holds nothing but tool calls with small
  inputs, and every result is a successful empty output or a bare success
  line ("OK", "Done", "(no output)"...). A tool_result can only go together
  with its tool_use, so a trivial result inside an informative round stays
  (its content is already tiny: a placeholder would not free anything). The
  last round and rounds preceded by an assistant message are never touched.
* **notice**: a repeated identical notice (a `system` message other than the
  pipeline's own markers, or an `is_meta` user text message) is removed; the
  first occurrence stays, so the sent prefix does not change.

Each batch of removals is recorded behind an appended `system` message with
subtype `snip_marker` listing the removed uuids and the tokens freed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from sessionstore.storage.core.types import ViewEntry

from .pressure import usage_credit
from .rounds import group_rounds
from .working import MARKER_SUBTYPES, LayerReport, WorkingView, blocks, system_marker

SUBTYPE = "snip_marker"

#: Whole-message acknowledgements (lowercased, trailing punctuation and emoji stripped).
ACKNOWLEDGEMENTS = frozenset(
    {
        "ok",
        "okay",
        "k",
        "kk",
        "ok thanks",
        "ok thank you",
        "okay thanks",
        "thanks",
        "thank you",
        "thanks a lot",
        "thank you very much",
        "thx",
        "ty",
        "cool",
        "great",
        "great thanks",
        "nice",
        "got it",
        "sounds good",
        "perfect",
        "alright",
        "all right",
        "noted",
        "understood",
        "ack",
    }
)

#: Whole outputs of a tool that say nothing beyond "it worked" (lowercased, trailing '.' stripped).
TRIVIAL_OUTPUTS = frozenset(
    {
        "",
        "ok",
        "done",
        "success",
        "succeeded",
        "completed",
        "no output",
        "(no output)",
        "command completed successfully",
        "command succeeded",
        "(bash completed with no output)",
    }
)

#: A tool call whose input JSON is longer than this carries information (a file body, a script).
MAX_TRIVIAL_INPUT_CHARS = 200

_TRAILING = re.compile(r"[\s.!,~:)\u2600-\u27bf\U0001f300-\U0001faff]+$")


@dataclass(slots=True)
class SnipState:
    """Where the next call resumes and the first occurrence of every notice seen."""

    rescan_from: int = 0
    notices: dict[str, str] = field(default_factory=dict)


def normalized(text: str) -> str:
    """Lowercase, single spaces, trailing punctuation and emoji removed."""
    return _TRAILING.sub("", " ".join(text.lower().split()))


def is_acknowledgement(text: str) -> bool:
    """True for a bare acknowledgement; anything with a question or more content is not one."""
    return "?" not in text and normalized(text) in ACKNOWLEDGEMENTS


def plain_text(entry: ViewEntry) -> str | None:
    """The entry's text when it holds only text, else None."""
    if isinstance(entry.content, str):
        return entry.content
    if entry.content and all(b.get("type") == "text" for b in entry.content):
        return "\n".join(str(b.get("text", "")) for b in entry.content)
    return None


def is_trivial_output(block: dict[str, Any]) -> bool:
    """A successful tool result whose whole text is empty or a bare success line."""
    if block.get("is_error"):
        return False
    content = block.get("content")
    if content is None:
        return True
    if isinstance(content, list):
        if not all(isinstance(b, dict) and b.get("type") == "text" for b in content):
            return False
        content = "\n".join(str(b.get("text", "")) for b in content)
    return " ".join(str(content).lower().split()).rstrip(".") in TRIVIAL_OUTPUTS


def is_trivial_round(group: Sequence[ViewEntry]) -> bool:
    """Assistant side only small tool calls, user side only their trivial results."""
    sent = [e for e in group if e.role != "system"]
    calls = [b for e in sent if e.role == "assistant" for b in blocks(e)]
    results = [b for e in sent if e.role == "user" for b in blocks(e)]
    if not calls or not results or any(e.role == "user" and _protected(e) for e in sent):
        return False
    if any(isinstance(e.content, str) for e in sent):
        return False
    if any(b.get("type") != "tool_use" or len(json.dumps(b.get("input", {}))) > MAX_TRIVIAL_INPUT_CHARS for b in calls):
        return False
    if any(b.get("type") != "tool_result" or not is_trivial_output(b) for b in results):
        return False
    return {b.get("id") for b in calls} == {b.get("tool_use_id") for b in results}


def _protected(entry: ViewEntry) -> bool:
    """Summaries, collapse entries and attachments are never snipped."""
    m = entry.message
    return m.is_compact_summary or m.type == "attachment" or bool(m.metadata.get("collapse"))


def _notice_key(entry: ViewEntry) -> str | None:
    """Identity of a notice (None when the entry is not one)."""
    if entry.role == "system":
        if entry.subtype in MARKER_SUBTYPES:
            return None
        return "system:" + json.dumps(entry.content, sort_keys=True, ensure_ascii=False)
    if entry.role == "user" and entry.message.is_meta and not _protected(entry):
        text = plain_text(entry)
        return None if text is None else "meta:" + text.strip()
    return None


class _Neighbours:
    """Roles of the nearest sent entries around an index, skipping removed and system entries."""

    def __init__(self, entries: list[ViewEntry], removed: dict[int, str]):
        self.entries = entries
        self.removed = removed

    def role(self, index: int, step: int) -> str | None:
        index += step
        while 0 <= index < len(self.entries):
            entry = self.entries[index]
            if entry.role != "system" and index not in self.removed:
                return entry.role
            index += step
        return None

    def user_removable(self, index: int) -> bool:
        """Removing user entry `index` merges user turns only and keeps a last message."""
        before, after = self.role(index, -1), self.role(index, 1)
        return after is not None and (after == "user" or before == "user")


def _group_bounds(entries: list[ViewEntry], start: int) -> list[tuple[int, int]]:
    """(first, end) index ranges of the API rounds of entries[start:]."""
    bounds = []
    first = start
    for group in group_rounds(entries[start:]):
        bounds.append((first, first + len(group)))
        first += len(group)
    return bounds


def _decide(entries: list[ViewEntry], state: SnipState, bounds: list[tuple[int, int]]) -> dict[int, str]:
    """Index -> rule of every entry to remove."""
    removed: dict[int, str] = {}
    near = _Neighbours(entries, removed)
    total = len(entries)
    for first, end in bounds:
        group = entries[first:end]
        if end < total and is_trivial_round(group) and near.role(first, -1) == "user":
            for index in range(first, end):
                if entries[index].role == "system":
                    _decide_entry(entries[index], index, state, near, removed)
                else:
                    removed[index] = "trivial_round"
            continue
        for index in range(first, end):
            _decide_entry(entries[index], index, state, near, removed)
    return removed


def _decide_entry(entry: ViewEntry, index: int, state: SnipState, near: _Neighbours, removed: dict[int, str]) -> None:
    """Apply the notice and ack rules to one entry."""
    key = _notice_key(entry)
    if key is not None:
        first_uuid = state.notices.setdefault(key, entry.uuid)
        if first_uuid != entry.uuid and (entry.role == "system" or near.user_removable(index)):
            removed[index] = "notice"
        return
    if entry.role != "user" or entry.type != "user" or entry.message.is_meta or _protected(entry):
        return
    text = plain_text(entry)
    if text is not None and is_acknowledgement(text) and near.user_removable(index):
        removed[index] = "ack"


def apply_snip(work: WorkingView, state: SnipState, usage_index: int | None, now: datetime) -> LayerReport:
    """Remove what the rules allow from entries at `state.rescan_from` on, behind one marker."""
    report = LayerReport("snip", tokens_before=work.tokens, tokens_after=work.tokens)
    entries = work.entries
    bounds = _group_bounds(entries, min(state.rescan_from, len(entries)))
    removed = _decide(entries, state, bounds)
    if bounds:
        state.rescan_from = bounds[-1][0]
    if not removed:
        return report
    freed_by_index = {i: entries[i].tokens for i in removed}
    credit = usage_credit(entries, usage_index, freed_by_index)
    usage_uuid = entries[usage_index].uuid if usage_index is not None else None
    listing = [
        {"uuid": entries[i].uuid, "rule": rule, "tokens": entries[i].tokens} for i, rule in sorted(removed.items())
    ]
    freed = work.remove(set(removed))
    rules: dict[str, int] = {}
    for rule in removed.values():
        rules[rule] = rules.get(rule, 0) + 1
    work.append(
        system_marker(
            SUBTYPE,
            f"Snipped {len(removed)} low-value message(s), about {freed:,} tokens.",
            {
                "removed_uuids": [item["uuid"] for item in listing],
                "tokens_freed": freed,
                "rules": rules,
                "usage_uuid": usage_uuid,
                "usage_credit": credit,
            },
            now,
        )
    )
    report.acted = True
    report.items = len(removed)
    report.tokens_after = work.tokens
    report.details = {"tokens_freed": freed, "usage_credit": credit, "rules": rules, "removed": listing}
    return report
