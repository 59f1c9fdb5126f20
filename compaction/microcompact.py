"""Layer 3 (main thread only): clear the content of old results of compactable tools.

A result is *registered* once it is in the view, comes from a compactable tool
(config.compactable_tools, matched through the tool_use that asked for it)
and is not cleared yet. The state is derived from the view itself, so it
survives restarts without bookkeeping of its own.

* count trigger: once `microcompact_trigger_count` (12) results are
  registered, all but the `microcompact_keep_recent` (3) most recent are
  cleared;
* time trigger: when the last assistant message is more than
  `microcompact_idle_minutes` (60) old, the server's prompt cache has expired
  anyway, so all but the `microcompact_idle_keep_recent` (5) most recent are
  cleared. That leaves exactly 5 registered: the count starts over from them.

A cleared result's content becomes `[Old tool result content cleared]`; the
decision is persisted in `replacements` (kind "cleared"), and an appended
`system` message with subtype `microcompact_boundary` records the trigger,
the tokens saved and the cleared ids.

In "server" mode the view is left alone and the API's own context editing
(`clear_tool_uses_20250919`, beta `context-management-2025-06-27`) is returned
for the request instead. It triggers at the warning level (the effective
window minus `warning_buffer`), below the auto-compact threshold, so the
server clears before a compaction would be needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.core.types import ViewEntry

from .pressure import Thresholds, usage_credit
from .working import LayerReport, WorkingView, blocks, system_marker

CLEARED_TEXT = "[Old tool result content cleared]"
SUBTYPE = "microcompact_boundary"
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
CLEAR_EDIT_TYPE = "clear_tool_uses_20250919"


@dataclass(slots=True)
class MicroState:
    """Tool names by tool_use_id, registered results in view order, the last assistant's time."""

    names: dict[str, str] = field(default_factory=dict)
    registered: list[str] = field(default_factory=list)
    last_assistant_at: str | None = None
    scanned: int = 0


def observe(state: MicroState, entries: Sequence[ViewEntry], compactable: frozenset[str]) -> None:
    """Register what entries[state.scanned:] add (O(new entries))."""
    for entry in entries[state.scanned :]:
        if entry.role == "assistant":
            state.last_assistant_at = entry.message.timestamp or state.last_assistant_at
            for block in blocks(entry):
                if block.get("type") == "tool_use":
                    state.names[str(block.get("id"))] = str(block.get("name"))
        elif entry.role == "user":
            for block in blocks(entry):
                if block.get("type") != "tool_result" or block.get("content") == CLEARED_TEXT:
                    continue
                tid = str(block.get("tool_use_id"))
                if state.names.get(tid) in compactable:
                    state.registered.append(tid)
    state.scanned = len(entries)


def parse_time(value: str | None) -> datetime | None:
    """An aware datetime from an ISO-8601 timestamp (naive ones are UTC); None if unreadable."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def choose_trigger(state: MicroState, config: Config, now: datetime) -> tuple[str, int] | None:
    """("time"|"count", how many to keep) when a trigger fires and something would be cleared."""
    count = len(state.registered)
    last = parse_time(state.last_assistant_at)
    idle = timedelta(minutes=config.microcompact_idle_minutes)
    if last is not None and now - last > idle and count > config.microcompact_idle_keep_recent:
        return "time", config.microcompact_idle_keep_recent
    if count >= config.microcompact_trigger_count and count > config.microcompact_keep_recent:
        return "count", config.microcompact_keep_recent
    return None


def context_management(state: MicroState, config: Config, thresholds: Thresholds) -> dict[str, Any]:
    """The request's `context_management` setting for server-side clearing."""
    compactable = set(config.compactable_tools)
    return {
        "edits": [
            {
                "type": CLEAR_EDIT_TYPE,
                "trigger": {"type": "input_tokens", "value": thresholds.warning_at},
                "keep": {"type": "tool_uses", "value": config.microcompact_keep_recent},
                "exclude_tools": sorted(set(state.names.values()) - compactable),
            }
        ]
    }


def apply_microcompact(
    work: WorkingView,
    state: MicroState,
    config: Config,
    *,
    now: datetime,
    query_source: str,
    usage_index: int | None,
    thresholds: Thresholds,
) -> tuple[LayerReport, dict[str, Any] | None]:
    """Clear old compactable results when a trigger fires; or return the server-side setting."""
    report = LayerReport(
        "microcompact",
        tokens_before=work.tokens,
        tokens_after=work.tokens,
        details={"registered": len(state.registered)},
    )
    if query_source != "main":
        report.details["skipped"] = f"query_source {query_source!r} is not the main thread"
        return report, None
    if not config.microcompact_enabled:
        report.details["skipped"] = "disabled"
        return report, None
    if config.microcompact_mode == "server":
        report.details["mode"] = "server"
        return report, context_management(state, config, thresholds)
    chosen = choose_trigger(state, config, now)
    if chosen is None:
        return report, None
    trigger, keep = chosen
    clear = state.registered[:-keep] if keep else list(state.registered)
    _clear(work, state, clear, trigger, keep, usage_index, now, report)
    return report, None


def _clear(
    work: WorkingView,
    state: MicroState,
    clear: list[str],
    trigger: str,
    keep: int,
    usage_index: int | None,
    now: datetime,
    report: LayerReport,
) -> None:
    """Replace the chosen results' content, queue the decisions, append the boundary marker."""
    targets = set(clear)
    saved_by_index: dict[int, int] = {}
    for index, entry in enumerate(work.entries):
        if entry.role != "user" or not any(b.get("tool_use_id") in targets for b in blocks(entry)):
            continue
        content = [
            dict(b, content=CLEARED_TEXT) if b.get("type") == "tool_result" and b.get("tool_use_id") in targets else b
            for b in blocks(entry)
        ]
        saved_by_index[index] = work.replace_content(index, content)
    saved = sum(saved_by_index.values())
    credit = usage_credit(work.entries, usage_index, saved_by_index)
    usage_uuid = work.entries[usage_index].uuid if usage_index is not None else None
    state.registered = state.registered[len(clear) :]
    work.cleared.extend(clear)
    work.cleared_text = CLEARED_TEXT
    work.append(
        system_marker(
            SUBTYPE,
            f"Cleared {len(clear)} old tool result(s) ({trigger} trigger), about {saved:,} tokens.",
            {
                "trigger": trigger,
                "tokens_saved": saved,
                "cleared_tool_use_ids": clear,
                "kept": keep,
                "usage_uuid": usage_uuid,
                "usage_credit": credit,
            },
            now,
        )
    )
    report.acted = True
    report.items = len(clear)
    report.tokens_after = work.tokens
    report.details.update(
        {"trigger": trigger, "tokens_saved": saved, "kept": keep, "cleared_tool_use_ids": clear, "usage_credit": credit}
    )
