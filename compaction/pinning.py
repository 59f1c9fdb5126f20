"""Pinned messages in a compaction: which ones are carried, how they read, and the opt-in detector.

A pinned message that leaves the view is carried verbatim, in transcript order, in the summary
message (a user message, so the view stays a valid request), under a heading of its own and
outside the summary's budget: pins have their own (`pins_max_tokens`).

The detector (`auto_pin_instructions`, off by default) pins a summarized user message that states
a standing rule. It is deliberately narrow, because a wrong pin costs budget in every later view:
a short message (at most STANDING_MAX_CHARS), not a question, with a sentence that opens with a
rule word ("always", "never", "don't ever", "from now on", "make sure to always", "you must ...")
or asks for a lasting language or format ("answer in French", "respond only in English").
Plain requests ("never mind, run the tests", "please fix the bug") do not qualify.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from sessionstore.compaction.summarizers.extractive import is_request, is_user_authored, user_text
from sessionstore.storage.write.pins import Pin, carried_pins, list_pins, pin_cost, pins_budget
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import ViewEntry

PINS_HEADING = "Pinned messages (carried verbatim through every compaction, oldest first):"
STANDING_MAX_CHARS = 400

_SENTENCE_START = r"(?:^|[.!;\n]\s*)(?:please\s+|and\s+|also\s+|remember(?:\s+that|\s*:)?\s+|important:\s*|note:\s*)?"
_RULE = re.compile(
    _SENTENCE_START
    + r"(?:always\b|never\b(?!\s+mind)|don'?t\s+ever\b|do\s+not\s+ever\b|from\s+now\s+on\b|going\s+forward\b"
    r"|for\s+the\s+rest\s+of\s+(?:this|the)\s+(?:session|conversation)\b|under\s+no\s+circumstances\b"
    r"|make\s+sure\s+(?:to\s+|you\s+)?(?:always|never)\b|you\s+must\s+(?:always|never|not)\b"
    r"|(?:answer|respond|reply|write|speak)\s+(?:only\s+|always\s+)?in\s+[A-Z][a-z]+\b)",
    re.IGNORECASE,
)


def is_standing_instruction(text: str) -> bool:
    """True for a short user message that states a lasting rule, not a one-off request or a question."""
    text = text.strip()
    if not text or len(text) > STANDING_MAX_CHARS or text.endswith("?") or not is_request(text):
        return False
    return _RULE.search(text) is not None


@dataclass(frozen=True, slots=True)
class PinPlan:
    """The pins a compaction carries, and the standing instructions it pins on the way."""

    carried: list[Pin]
    new: list[tuple[int, str, int]]
    budget: int


def plan_pins(session: Session, summarized: Sequence[ViewEntry], kept: Sequence[ViewEntry], *, auto: bool) -> PinPlan:
    """Every pin that does not stay verbatim in the kept part, plus (with `auto`) detected instructions.

    Reads the session's pins (bounded by their budget), never the transcript.
    """
    budget = pins_budget(session)
    pins = list_pins(session)
    new: list[tuple[int, str, int]] = []
    if auto:
        pinned = {p.seq for p in pins}
        used = sum(p.tokens for p in pins)
        for entry in summarized:
            if entry.seq in pinned or entry.seq <= 0 or not is_user_authored(entry):
                continue
            text = user_text(entry)
            if not is_standing_instruction(text):
                continue
            cost = pin_cost(text)
            if used + cost > budget:
                continue
            used += cost
            new.append((entry.seq, entry.uuid, cost))
            pins.append(Pin(entry.seq, entry.uuid, "user", text, cost, "auto"))
        pins.sort(key=lambda p: p.seq)
    verbatim = {e.seq for e in kept if not e.replaced}
    return PinPlan(carried_pins(pins, verbatim), new, budget)


def pins_block(pins: Sequence[Pin]) -> str:
    """The carried pins as text: the heading, then each pin's header line and its text, oldest first.

    The header names the pin by its transcript seq, not its uuid: a uuid in the text makes the
    store's estimator count the whole summary message hundreds of tokens higher.
    """
    if not pins:
        return ""
    parts = [PINS_HEADING]
    for pin in pins:
        parts.append(f"\n[pinned {pin.role} message #{pin.seq}]\n{pin.text}")
    return "\n".join(parts)


def split_pins(summary_content: str) -> tuple[str, str]:
    """A summary message's text as (summary, pinned block); the block is "" when it carries no pin."""
    head, sep, tail = summary_content.partition("\n\n" + PINS_HEADING)
    return (head, PINS_HEADING + tail) if sep else (summary_content, "")
