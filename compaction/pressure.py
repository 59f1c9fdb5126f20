"""How full the window is: the token count the thresholds compare against, and the thresholds.

The count follows invariant 7: where the API reported `usage`, that figure
wins for everything up to it. So the count is the last assistant message's
usage (input + cache creation + cache read + output) plus the stored
estimates of the sent entries after it. Layers that shrink entries the usage
already counted say so in their marker's metadata (`usage_credit`, tied to
that usage message's uuid), and the count subtracts it: otherwise a stale
usage figure would keep reporting the pre-layer size until the next reply.
Without any usage in the view, or when the credits exceed the usage figure
(a figure that cannot describe this view), the running estimate total of
the view is the count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.core.types import ViewEntry

USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def usage_total(usage: Mapping[str, Any] | None) -> int:
    """Tokens one API response accounts for: its whole prompt plus its output."""
    if not usage:
        return 0
    total = 0
    for key in USAGE_FIELDS:
        value = usage.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total += int(value)
    return total


def has_usage(entry: ViewEntry) -> bool:
    """An assistant entry carrying an API usage figure."""
    return entry.role == "assistant" and bool(entry.message.usage) and usage_total(entry.message.usage) > 0


def last_usage_index(entries: Sequence[ViewEntry], start: int = 0, known: int | None = None) -> int | None:
    """Index of the last entry with usage, looking only at entries[start:] beyond `known`."""
    for index in range(len(entries) - 1, max(start, 0) - 1, -1):
        if has_usage(entries[index]):
            return index
    return known


def count_tokens(entries: Sequence[ViewEntry], usage_index: int | None, estimate_total: int) -> int:
    """The window's fill: usage of entries[usage_index] plus what came after it."""
    if usage_index is None:
        return estimate_total
    anchor = entries[usage_index]
    reported = usage_total(anchor.message.usage)
    credit = after = 0
    for entry in entries[usage_index + 1 :]:
        if entry.role == "system":
            meta = entry.message.metadata
            if meta.get("usage_uuid") == anchor.uuid:
                credit += int(meta.get("usage_credit") or 0)
            continue
        if anchor.api_message_id and entry.api_message_id == anchor.api_message_id:
            continue
        after += entry.tokens
    if credit > reported:
        return estimate_total
    return reported - credit + after


def usage_credit(entries: Sequence[ViewEntry], usage_index: int | None, freed_by_index: Mapping[int, int]) -> int:
    """Tokens freed from entries the last usage figure already counted (at or before it)."""
    if usage_index is None:
        return 0
    return sum(freed for index, freed in freed_by_index.items() if index <= usage_index)


#: The output reserve takes at most half the window, the auto-compact buffer at most 65% of what is left and
#: the warning buffer at most all of it: the design's 20,000 / 13,000 / 20,000 hold from a 40,000-token window
#: up (threshold 7,000, warning 0); a smaller window keeps that window's proportions (threshold 17.5%).
RESERVE_SHARE, BUFFER_SHARE = 0.5, 0.65


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The design's numbers for one context window."""

    context_window: int
    effective_window: int
    autocompact_threshold: int
    warning_at: int
    collapse_start: int
    collapse_block: int

    @classmethod
    def for_window(cls, context_window: int, config: Config) -> "Thresholds":
        """The design's numbers (reserve min(max output, 20,000), buffer 13,000, warning 20,000) from 40,000 tokens.

        Below, each part is at most a share of what it is taken from (RESERVE_SHARE, BUFFER_SHARE), so a small
        window keeps a positive threshold: a 30,000 window compacts at 5,250, not at -3,000.
        """
        reserve = min(config.max_output_tokens, config.output_reserve_cap, int(context_window * RESERVE_SHARE))
        effective = context_window - reserve
        return cls(
            context_window=context_window,
            effective_window=effective,
            autocompact_threshold=effective - min(config.autocompact_buffer, int(effective * BUFFER_SHARE)),
            warning_at=effective - min(config.warning_buffer, effective),
            collapse_start=int(effective * config.collapse_start_ratio),
            collapse_block=int(effective * config.collapse_block_ratio),
        )

    def to_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.__slots__}
