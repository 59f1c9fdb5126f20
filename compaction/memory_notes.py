"""Session memory notes: the running markdown notes that stand in for a summary.

Pure functions only (storage keeps the notes elsewhere): the template, an
emptiness check, per-section and total truncation, a deterministic extractive
updater that folds new view entries into the sections, and the trigger that
says when to update (DESIGN.md, session-memory compaction).

Notes are markdown: each section is a ``# Name`` heading, an italic
description line, then its body. Token counts use characters / 4.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Sequence

from sessionstore.compaction.rounds import group_rounds
from sessionstore.compaction.summarizers.extractive import (
    Activity,
    ToolCall,
    assistant_text,
    collect_activity,
    command_of,
    describe_call,
    file_touches,
    first_line,
    is_request,
    is_user_authored,
    latest_todos,
    pending_todos,
    user_text,
)
from sessionstore.storage.core.types import ViewEntry

INIT_TOKENS = 10_000
UPDATE_TOKENS = 5_000
UPDATE_TOOL_CALLS = 3
PER_SECTION_TOKENS = 2_000
TOTAL_TOKENS = 12_000

#: (name, description) of every section, in order.
NOTE_SECTIONS: tuple[tuple[str, str], ...] = (
    ("Session Title", "A short, specific title for this session (5-10 words)."),
    ("Current State", "What is being worked on now, what is left, the immediate next step."),
    (
        "Task specification",
        "What the user asked for, with the decisions and constraints they gave.",
    ),
    ("Files and Functions", "The files that matter, what they hold and why they matter."),
    ("Workflow", "Commands that get run, in what order, and how to read their output."),
    ("Errors & Corrections", "Errors met and how they were fixed; user corrections; dead ends."),
    ("Codebase and System Documentation", "The important components and how they fit together."),
    ("Learnings", "What worked, what did not, what to avoid next time."),
    ("Key results", "Exact results the user asked for: answers, tables, documents."),
    ("Worklog", "One terse line per step: what was tried, what was done."),
)
SECTION_NAMES: tuple[str, ...] = tuple(name for name, _ in NOTE_SECTIONS)
_DESCRIPTIONS = dict(NOTE_SECTIONS)

#: Sections that are logs: truncation keeps their newest (last) lines.
LOG_SECTIONS = frozenset({"Worklog", "Errors & Corrections"})

TRUNCATION_MARK = "[… truncated]"
EARLIER_MARK = "[… earlier lines truncated]"

TITLE_CHARS = 80
REQUEST_CHARS = 400
STATE_CHARS = 1_200
WORKLOG_LINE_CHARS = 240
MAX_WORKFLOW_COMMANDS = 15

_HEADING = re.compile(r"^# (.+?)\s*$")
_FILE_LINE = re.compile(r"^- `(.+)`: (.+)$")
_COMMAND_LINE = re.compile(r"^- `(.+)` → (.+)$")


def estimate_tokens(text: str) -> int:
    """The notes' token estimate: characters / 4."""
    return len(text) // 4


@dataclass(slots=True)
class Section:
    """One section: its heading name (None for text before the first one) and body lines."""

    name: str | None
    description: str | None = None
    body: list[str] = field(default_factory=list)

    def render(self) -> str:
        """The section as markdown: heading, description, body."""
        lines = [] if self.name is None else [f"# {self.name}"]
        if self.description is not None:
            lines.append(f"_{self.description}_")
        lines.extend(self.body)
        return "\n".join(lines)

    def body_text(self) -> str:
        """The body joined by newlines, trailing blank lines dropped."""
        return "\n".join(self.body).strip("\n")


def empty_notes() -> str:
    """The template: every section heading with its description and no body."""
    return render(_template_sections())


def _template_sections() -> list[Section]:
    """Fresh empty sections in template order."""
    return [Section(name, description) for name, description in NOTE_SECTIONS]


def parse(notes: str) -> list[Section]:
    """Split notes into sections at known ``# Name`` headings.

    Text before the first known heading becomes a section named None; unknown
    headings stay inside the body of the section they appear in. A missing
    template section is added, empty, so every section can be addressed.
    """
    sections: list[Section] = []
    current = Section(None)
    for line in notes.splitlines():
        match = _HEADING.match(line)
        if match and match.group(1) in _DESCRIPTIONS:
            sections.append(current)
            current = Section(match.group(1))
            continue
        if current.name is not None and current.description is None and not "".join(current.body).strip():
            italic = line.strip()
            if len(italic) > 1 and italic.startswith("_") and italic.endswith("_"):
                current.description = italic[1:-1]
                continue
        current.body.append(line)
    sections.append(current)
    for section in sections:
        section.body = section.body_text().split("\n") if section.body_text() else []
    present = {s.name for s in sections}
    sections.extend(Section(n, d) for n, d in NOTE_SECTIONS if n not in present)
    return [s for s in sections if s.name is not None or s.body]


def render(sections: Sequence[Section]) -> str:
    """Join sections back into notes, one blank line between sections."""
    return "\n\n".join(section.render() for section in sections) + "\n"


def _section(sections: Sequence[Section], name: str) -> Section:
    """The section called `name` (parse guarantees it exists)."""
    return next(s for s in sections if s.name == name)


def is_empty_template(notes: str) -> bool:
    """True when the notes hold nothing beyond headings and descriptions."""
    return all(not s.body_text().strip() for s in parse(notes))


def _cut_lines(lines: list[str], max_chars: int, keep: Literal["head", "tail"]) -> list[str]:
    """At most `max_chars` characters of `lines` (joined by newlines), marker included.

    "head" keeps the first lines and ends with a truncation marker; "tail"
    keeps the last lines and starts with one. A single line longer than the
    room left is cut by characters.
    """
    if len("\n".join(lines)) <= max_chars:
        return list(lines)
    mark = TRUNCATION_MARK if keep == "head" else EARLIER_MARK
    room = max_chars - len(mark) - 1
    if room <= 0:
        return [mark] if len(mark) <= max_chars else []
    ordered = lines if keep == "head" else list(reversed(lines))
    kept: list[str] = []
    used = 0
    for line in ordered:
        cost = len(line) + (1 if kept else 0)
        if used + cost > room:
            if not kept:
                kept.append(line[:room] if keep == "head" else line[-room:])
            break
        kept.append(line)
        used += cost
    return kept + [mark] if keep == "head" else [mark] + list(reversed(kept))


def _keep_side(name: str | None) -> Literal["head", "tail"]:
    """Logs keep their newest lines; every other section its first lines."""
    return "tail" if name in LOG_SECTIONS else "head"


def _water_level(sizes: list[int], budget: int) -> int:
    """The largest cap c with sum(min(size, c)) <= budget (fair share of the budget)."""
    remaining = budget
    ordered = sorted(sizes)
    for position, size in enumerate(ordered):
        share = remaining // (len(ordered) - position)
        if size > share:
            return share
        remaining -= size
    return max(ordered, default=0)


def truncate_sections(
    notes: str, per_section_tokens: int = PER_SECTION_TOKENS, total_tokens: int = TOTAL_TOKENS
) -> str:
    """Cut every section to `per_section_tokens`, then the whole notes to `total_tokens`.

    Non-log sections keep their first lines, logs (Worklog, Errors &
    Corrections) their last ones; a marker line shows where text was cut. When
    the sections together are still too long, each over-long body is cut to a
    fair share (the same cap for all) so that the notes fit. Applying it twice
    changes nothing more.
    """
    sections = parse(notes)
    for section in sections:
        section.body = _cut_lines(section.body, per_section_tokens * 4, _keep_side(section.name))
    if estimate_tokens(render(sections)) <= total_tokens:
        return render(sections)
    skeleton = len(render([Section(s.name, s.description) for s in sections])) + len(sections)
    budget = max(total_tokens * 4 - skeleton, 0)
    cap = _water_level([len(s.body_text()) for s in sections], budget)
    for section in sections:
        section.body = _cut_lines(section.body, cap, _keep_side(section.name))
    return render(sections)


def _one_line(text: str, limit: int) -> str:
    """`text` with its whitespace collapsed to single spaces, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fold_title(sections: list[Section], activity: Activity) -> None:
    """Set the title from the first request when the notes have none yet."""
    title = _section(sections, "Session Title")
    requests = activity.requests()
    if not title.body_text().strip() and requests:
        title.body = [first_line(requests[0], TITLE_CHARS)]


def _fold_requests(sections: list[Section], activity: Activity) -> None:
    """Append each new user request to the task specification (no duplicates)."""
    spec = _section(sections, "Task specification")
    for request in activity.requests():
        line = f"- {_one_line(request, REQUEST_CHARS)}"
        if line not in spec.body:
            spec.body.append(line)


def _fold_files(sections: list[Section], calls: Sequence[ToolCall]) -> None:
    """Merge the files the new calls touched into the `path`: actions ledger."""
    files = _section(sections, "Files and Functions")
    other: list[str] = []
    ledger: dict[str, list[str]] = {}
    for line in files.body:
        match = _FILE_LINE.match(line)
        if match:
            ledger[match.group(1)] = [a.strip() for a in match.group(2).split(",")]
        else:
            other.append(line)
    for call in calls:
        failed = call.outcome is not None and call.outcome.failed
        for path, action in file_touches(call):
            label = f"{action} (failed)" if failed else action
            actions = ledger.setdefault(path, [])
            if label not in actions:
                actions.append(label)
    files.body = other + [f"- `{path}`: {', '.join(actions)}" for path, actions in ledger.items()]


def _fold_commands(sections: list[Section], calls: Sequence[ToolCall]) -> None:
    """Keep the latest distinct commands with their last status in Workflow."""
    workflow = _section(sections, "Workflow")
    other: list[str] = []
    commands: dict[str, str] = {}
    for line in workflow.body:
        match = _COMMAND_LINE.match(line)
        if match:
            commands[match.group(1)] = match.group(2)
        else:
            other.append(line)
    for call in calls:
        command = command_of(call)
        if command is None:
            continue
        key = first_line(command, 160)
        commands.pop(key, None)
        commands[key] = call.outcome.status if call.outcome else "no result"
    recent = list(commands.items())[-MAX_WORKFLOW_COMMANDS:]
    workflow.body = other + [f"- `{cmd}` → {status}" for cmd, status in recent]


def _fold_errors(sections: list[Section], activity: Activity) -> None:
    """Append one line per failed tool result to Errors & Corrections."""
    errors = _section(sections, "Errors & Corrections")
    for what, outcome in activity.failures():
        detail = " / ".join(outcome.error_lines()) or outcome.status
        line = f"- {what} → {outcome.status}: {detail}"
        if line not in errors.body:
            errors.body.append(line)


def _fold_state(sections: list[Section], activity: Activity) -> None:
    """Replace Current State with the last assistant text and open todo items."""
    state = _section(sections, "Current State")
    lines: list[str] = []
    if activity.last_assistant_text:
        lines.append(_one_line(activity.last_assistant_text, STATE_CHARS))
    if latest_todos(activity.calls) is not None:
        items = pending_todos(activity.calls)
        lines += [f"- [{status}] {task}" for status, task in items] or ["- All tasks completed."]
    if lines:
        state.body = lines


def _round_line(round_entries: Sequence[ViewEntry]) -> str | None:
    """One terse worklog line for a round: request, tool calls, assistant text."""
    parts: list[str] = []
    activity = collect_activity(round_entries)
    said = next((assistant_text(e) for e in round_entries if assistant_text(e)), "")
    if said:
        parts.append(_one_line(said, 100))
    calls = activity.calls
    described = [describe_call(c) + (" ✗" if c.outcome and c.outcome.failed else "") for c in calls[:3]]
    if len(calls) > 3:
        described.append(f"+{len(calls) - 3} more")
    if described:
        parts.append("; ".join(described))
    for entry in round_entries:
        if is_user_authored(entry) and is_request(user_text(entry)):
            parts.append(f"user: {_one_line(user_text(entry), 100)}")
    return f"- {_one_line(' | '.join(parts), WORKLOG_LINE_CHARS)}" if parts else None


def _fold_worklog(sections: list[Section], entries: Sequence[ViewEntry]) -> None:
    """Append one line per API round of the new entries to the Worklog."""
    worklog = _section(sections, "Worklog")
    for round_entries in group_rounds(entries):
        line = _round_line(round_entries)
        if line:
            worklog.body.append(line)


def update_notes(notes: str, new_entries: Sequence[ViewEntry]) -> str:
    """Fold `new_entries` into `notes` deterministically and cut to the budgets.

    Files touched go to Files and Functions (a `path`: actions ledger),
    commands to Workflow, failed results to Errors & Corrections, user
    requests to Task specification, the last assistant text (and open todos)
    to Current State, one line per API round to Worklog; the title is set
    from the first request when empty. Sections written by hand (or by a
    model) keep their other lines. Blank `notes` start from the template.
    """
    sections = parse(notes if notes.strip() else empty_notes())
    activity = collect_activity(new_entries)
    _fold_title(sections, activity)
    _fold_requests(sections, activity)
    _fold_files(sections, activity.calls)
    _fold_commands(sections, activity.calls)
    _fold_errors(sections, activity)
    _fold_state(sections, activity)
    _fold_worklog(sections, new_entries)
    return truncate_sections(render(sections))


def count_tool_calls(entries: Sequence[ViewEntry]) -> int:
    """How many tool_use blocks the entries hold (the trigger's tool-call count)."""
    return sum(
        1
        for entry in entries
        if entry.role == "assistant" and isinstance(entry.content, list)
        for block in entry.content
        if block.get("type") == "tool_use"
    )


def should_update(
    view_tokens: int,
    tokens_at_last_update: int,
    tool_calls_since_last_update: int,
    initialized: bool,
    *,
    init_tokens: int = INIT_TOKENS,
    update_tokens: int = UPDATE_TOKENS,
    update_tool_calls: int = UPDATE_TOOL_CALLS,
) -> bool:
    """Whether to (re)write the notes now.

    Uninitialized notes are first written once the view reaches `init_tokens`
    (10,000). After that, an update needs both `update_tokens` (5,000) more
    view tokens since the last update and `update_tool_calls` (3) tool calls.
    Every threshold is inclusive.
    """
    if not initialized:
        return view_tokens >= init_tokens
    grown = view_tokens - tokens_at_last_update
    return grown >= update_tokens and tool_calls_since_last_update >= update_tool_calls
