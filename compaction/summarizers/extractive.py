"""The offline summarizer: the nine summary sections filled from the entries themselves.

Nothing is invented: user messages are quoted, files and commands come from
tool inputs, exit statuses from the matching tool results, pending tasks from
the latest todo list. The same entries always give the same summary.

The extraction helpers (`collect_activity` and friends) are public because
session-memory notes fold entries with the same facts.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from sessionstore.compaction.prompt import SUMMARY_SECTIONS
from sessionstore.compaction.summarizers.base import SummaryResult
from sessionstore.compaction.summarizers.carried import CarriedFacts, carried_facts, summary_section
from sessionstore.storage.core.types import Content, ViewEntry

USER_MESSAGE_BUDGET = 20_000
FIRST_LINE_CHARS = 300
COMMAND_CHARS = 160
ERROR_LINE_CHARS = 200
MAX_COMMANDS = 40
MAX_ERRORS = 25
CURRENT_WORK_CHARS = 4_000
CARRIED_SUMMARY_CHARS = 800

READ_TOOLS = {"Read": "read"}
EDIT_TOOLS = {"Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited", "Write": "written"}
COMMAND_TOOLS = {
    "Bash": "command",
    "exec_command": "cmd",
    "shell": "command",
    "local_shell": "command",
}
TODO_TOOLS = {"TodoWrite": ("todos", "content"), "update_plan": ("plan", "step")}

_EXIT_CODE = re.compile(r"(?:\bexit code|\bexited with code)\s*:?\s*(-?\d+)", re.IGNORECASE)
#: Lines a tool result starts with that say how the command ran, not what went wrong: a bare
#: "Exit code N", and the headers Codex puts before a command's output.
STATUS_LINE = re.compile(
    r"^\s*(?:exit code:?\s*-?\d+|process exited with code:?\s*-?\d+|wall time:.*|chunk id:.*"
    r"|original token count:.*|total output lines:.*|process running with session id.*|output:)\s*$",
    re.IGNORECASE,
)
_NOT_A_REQUEST = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<command-name>",
    "<command-message>",
    "<task-notification>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted",
)
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.MULTILINE)
_PATCH_ACTIONS = {"Add": "written", "Update": "edited", "Delete": "deleted"}
__all__ = ["ExtractiveSummarizer", "collect_activity", "render_summary", "summary_section"]


def estimate_tokens(value: str) -> int:
    """The summarizer's own token estimate: characters / 4."""
    return len(value) // 4


def first_line(value: str, limit: int = FIRST_LINE_CHARS) -> str:
    """The first non-blank line of `value`, cut to `limit` characters."""
    for line in value.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def _blocks(content: Content) -> list[dict[str, Any]]:
    """Content as blocks; a plain string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content if isinstance(b, dict)]


def content_text(content: Any) -> str:
    """All text of a content value or a tool_result's content, joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        str(b.get("text", "")) if b.get("type") == "text" else str(b.get("content"))
        for b in content
        if isinstance(b, dict)
        and (b.get("type") == "text" or (b.get("type") == "compaction" and isinstance(b.get("content"), str)))
    ]
    return "\n".join(p for p in parts if p)


def is_user_authored(entry: ViewEntry) -> bool:
    """True for a real user message: not meta, not a summary, not an attachment."""
    message = entry.message
    return (
        entry.role == "user"
        and entry.type == "user"
        and not message.is_meta
        and not message.is_compact_summary
        and bool(user_text(entry))
    )


def user_text(entry: ViewEntry) -> str:
    """The text a user typed in one entry (tool results excluded)."""
    return content_text(entry.message.content).strip()


def is_request(message: str) -> bool:
    """True for a user message that asks for something, not a command echo or notice."""
    return not message.lstrip().startswith(_NOT_A_REQUEST)


def assistant_text(entry: ViewEntry) -> str:
    """The text blocks of an assistant entry (thinking and tool calls excluded)."""
    return content_text(entry.content).strip() if entry.role == "assistant" else ""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a tool result said: error flag, exit code when stated, first lines."""

    is_error: bool
    exit_code: int | None
    text: str

    @property
    def failed(self) -> bool:
        """An error result or a non-zero exit code."""
        return self.is_error or (self.exit_code not in (None, 0))

    @property
    def status(self) -> str:
        """The ledger status: "failed", "failed (exit N)", "exit N" or "ok"."""
        if self.is_error:
            return "failed" if self.exit_code is None else f"failed (exit {self.exit_code})"
        return "ok" if self.exit_code is None else f"exit {self.exit_code}"

    def error_lines(self, count: int = 2) -> list[str]:
        """The first `count` informative lines of the result, each shortened.

        Blank lines and status lines (a bare "Exit code N", Codex's headers) are skipped.
        """
        lines = [line.strip() for line in self.text.splitlines() if line.strip() and not STATUS_LINE.match(line)]
        return [first_line(line, ERROR_LINE_CHARS) for line in lines[:count]]


def outcome_of(block: dict[str, Any]) -> Outcome:
    """Read a tool_result block: is_error, "Exit code N" in its text, its text."""
    output = content_text(block.get("content"))
    match = _EXIT_CODE.search(output)
    return Outcome(
        is_error=bool(block.get("is_error")),
        exit_code=int(match.group(1)) if match else None,
        text=output,
    )


@dataclass(slots=True)
class ToolCall:
    """One tool_use with its result (None while unanswered or out of view)."""

    use_id: str
    name: str
    input: dict[str, Any]
    index: int
    outcome: Outcome | None = None


def _string_values(value: Any) -> Iterable[str]:
    """Every string inside a tool input (nested dicts and lists included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_values(item)


def patch_touches(patch: str) -> list[tuple[str, str]]:
    """(path, action) pairs named by a Codex-style `*** Begin Patch` text."""
    touches: list[tuple[str, str]] = []
    for match in _PATCH_FILE.finditer(patch):
        if match.group(3):
            touches.append((match.group(3).strip(), "written"))
        else:
            touches.append((match.group(2).strip(), _PATCH_ACTIONS[match.group(1)]))
    return touches


def file_touches(call: ToolCall) -> list[tuple[str, str]]:
    """(path, action) pairs a tool call touched: read, edited, written, deleted."""
    action = READ_TOOLS.get(call.name) or EDIT_TOOLS.get(call.name)
    if action:
        path = call.input.get("file_path") or call.input.get("notebook_path")
        return [(str(path), action)] if path else []
    touches: list[tuple[str, str]] = []
    for value in _string_values(call.input):
        if "*** Begin Patch" in value:
            touches.extend(patch_touches(value))
    return touches


def command_of(call: ToolCall) -> str | None:
    """The shell command a tool call ran, when it is a command tool."""
    key = COMMAND_TOOLS.get(call.name)
    if key is None:
        return None
    value = call.input.get(key)
    if isinstance(value, list):
        words = [str(v) for v in value]
        if len(words) >= 3 and words[1] in ("-c", "-lc"):
            return words[2]
        return " ".join(words)
    return str(value) if value else None


def tool_calls(entries: Sequence[ViewEntry]) -> list[ToolCall]:
    """Every tool_use in the entries, in order, with its matching result attached."""
    calls: list[ToolCall] = []
    by_id: dict[str, ToolCall] = {}
    for index, entry in enumerate(entries):
        if entry.role == "assistant":
            for block in _blocks(entry.content):
                if block.get("type") == "tool_use":
                    tool_input = block.get("input")
                    call = ToolCall(
                        use_id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        input=tool_input if isinstance(tool_input, dict) else {"input": tool_input},
                        index=index,
                    )
                    calls.append(call)
                    by_id.setdefault(call.use_id, call)
        elif entry.role == "user":
            for block in _blocks(entry.message.content):
                if block.get("type") == "tool_result":
                    found = by_id.get(str(block.get("tool_use_id", "")))
                    if found is not None and found.outcome is None:
                        found.outcome = outcome_of(block)
    return calls


def orphan_failures(entries: Sequence[ViewEntry], calls: Sequence[ToolCall]) -> list[Outcome]:
    """Failed tool results whose tool_use is not among the entries."""
    known = {call.use_id for call in calls}
    failures: list[Outcome] = []
    for entry in entries:
        if entry.role != "user":
            continue
        for block in _blocks(entry.message.content):
            if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in known:
                outcome = outcome_of(block)
                if outcome.failed:
                    failures.append(outcome)
    return failures


def latest_todos(calls: Sequence[ToolCall]) -> list[tuple[str, str]] | None:
    """(status, task) of the last todo list written, or None when none was."""
    for call in reversed(calls):
        spec = TODO_TOOLS.get(call.name)
        if spec is None:
            continue
        items = call.input.get(spec[0])
        if not isinstance(items, list):
            continue
        return [
            (str(item.get("status", "pending")), str(item.get(spec[1], ""))) for item in items if isinstance(item, dict)
        ]
    return None


def pending_todos(calls: Sequence[ToolCall]) -> list[tuple[str, str]]:
    """The latest todo items that are not completed."""
    return [(status, task) for status, task in latest_todos(calls) or [] if status != "completed"]


def describe_call(call: ToolCall) -> str:
    """A one-line description of a tool call: its name and main argument."""
    command = command_of(call)
    if command is not None:
        return f"{call.name} `{first_line(command, COMMAND_CHARS)}`"
    touches = file_touches(call)
    if touches:
        return f"{call.name} {', '.join(path for path, _ in touches)}"
    for key in ("pattern", "query", "url", "description", "prompt"):
        if isinstance(call.input.get(key), str):
            return f"{call.name} {first_line(call.input[key], 80)}"
    return call.name


@dataclass(slots=True)
class Activity:
    """The facts a summary or the session notes are built from."""

    user_messages: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    orphan_failures: list[Outcome] = field(default_factory=list)
    last_assistant_text: str = ""
    previous_summaries: list[str] = field(default_factory=list)
    assistant_responses: int = 0
    carried: CarriedFacts = field(default_factory=CarriedFacts)
    #: files(), computed once (three sections read it, and a tool-heavy span touches thousands).
    _ledger: dict[str, Counter[str]] | None = None

    def requests(self) -> list[str]:
        """The user messages that are requests (command echoes and notices left out)."""
        return [message for message in self.user_messages if is_request(message)]

    def files(self) -> dict[str, Counter[str]]:
        """Each touched path (first-touch order) with how often each action happened (a fresh copy)."""
        if self._ledger is None:
            ledger: dict[str, Counter[str]] = {}
            for call in self.calls:
                failed = call.outcome is not None and call.outcome.failed
                for path, action in file_touches(call):
                    label = f"{action} (failed)" if failed else action
                    ledger.setdefault(path, Counter())[label] += 1
            self._ledger = ledger
        return dict(self._ledger)

    def commands(self) -> list[tuple[str, str]]:
        """(command, status) of every command run; status "no result" when unanswered."""
        found: list[tuple[str, str]] = []
        for call in self.calls:
            command = command_of(call)
            if command is not None:
                found.append((command, call.outcome.status if call.outcome else "no result"))
        return found

    def failures(self) -> list[tuple[str, Outcome]]:
        """(what was called, outcome) of every failed tool result, oldest first."""
        failed = [(describe_call(c), c.outcome) for c in self.calls if c.outcome and c.outcome.failed]
        failed.extend(("tool result", outcome) for outcome in self.orphan_failures)
        return failed


def _response_count(entries: Sequence[ViewEntry]) -> int:
    """Distinct assistant responses (pieces sharing an api_message_id count once)."""
    count = 0
    previous: str | None = None
    for entry in entries:
        if entry.role != "assistant":
            continue
        key = entry.api_message_id
        if key is None or key != previous:
            count += 1
        previous = key
    return count


def collect_activity(entries: Sequence[ViewEntry]) -> Activity:
    """Gather user messages, tool calls, results and the last assistant text."""
    calls = tool_calls(entries)
    activity = Activity(calls=calls, orphan_failures=orphan_failures(entries, calls))
    activity.assistant_responses = _response_count(entries)
    for entry in entries:
        if entry.message.is_compact_summary:
            activity.previous_summaries.append(content_text(entry.message.content).strip())
        elif is_user_authored(entry):
            activity.user_messages.append(user_text(entry))
        elif entry.role == "assistant" and assistant_text(entry):
            activity.last_assistant_text = assistant_text(entry)
    activity.carried = carried_facts(activity.previous_summaries)
    return activity


def budget_user_messages(messages: Sequence[str], budget: int = USER_MESSAGE_BUDGET) -> list[str]:
    """User messages newest first: verbatim while the budget lasts, then first lines.

    The budget is spent from the newest message backwards; from the first
    message that does not fit, it and every older one are cut to their first line.
    """
    out: list[str] = []
    spent = 0
    within = True
    for message in reversed(messages):
        cost = estimate_tokens(message)
        within = within and spent + cost <= budget
        if within:
            spent += cost
            out.append(message)
        else:
            line = first_line(message)
            out.append(line if line == message.strip() else f"{line} […]")
    return out


def _clip(value: str, limit: int) -> str:
    """`value` cut to `limit` characters with a marker when cut."""
    value = value.strip()
    return value if len(value) <= limit else value[:limit].rstrip() + " […]"


def _bullets(lines: Iterable[str], empty: str) -> str:
    """Markdown bullets, or `empty` when there are none."""
    body = "\n".join(f"- {line}" for line in lines)
    return body or empty


def _primary_request(activity: Activity, custom_instructions: str | None) -> str:
    """Section 1: the first and latest user requests, earlier intent carried over."""
    lines: list[str] = []
    for summary in activity.previous_summaries[-1:]:
        carried = summary_section(summary, 1) or summary
        lines.append(f"Carried from the earlier summary: {_clip(carried, CARRIED_SUMMARY_CHARS)}")
    requests = activity.requests()
    if requests:
        lines.append(f"First request in this part: {_clip(requests[0], 600)}")
        if len(requests) > 1:
            lines.append(f"Latest request: {_clip(requests[-1], 600)}")
    if custom_instructions and custom_instructions.strip():
        lines.append(f"Focus requested for this summary: {custom_instructions.strip()}")
    return "\n".join(lines) or "No user request in the summarized part."


def _concepts(activity: Activity) -> str:
    """Section 2: tools used and file types touched, by frequency."""
    tools = activity.carried.tools + Counter(call.name for call in activity.calls)
    suffixes = activity.carried.file_types + Counter(
        path.rsplit(".", 1)[1] for path in activity.files() if "." in path.rsplit("/", 1)[-1]
    )
    lines = []
    if tools:
        lines.append("Tools used: " + ", ".join(f"{n} ×{k}" for n, k in tools.most_common()))
    if suffixes:
        lines.append("File types: " + ", ".join(f".{s} ×{k}" for s, k in suffixes.most_common(10)))
    return _bullets(lines, "None recorded.")


def _action_label(counts: Counter[str]) -> str:
    """ "read ×2, edited" from an action counter, in first-seen order."""
    return ", ".join(action if n == 1 else f"{action} ×{n}" for action, n in counts.items())


def _files_and_commands(activity: Activity) -> str:
    """Section 3: the file ledger, then the most recent commands with exit status (earlier summaries' first)."""
    parts = ["Files touched:", _bullets(_file_lines(activity), "None.")]
    commands = activity.carried.commands + [
        f"`{first_line(cmd, COMMAND_CHARS)}` → {status}" for cmd, status in activity.commands()
    ]
    shown = commands[-MAX_COMMANDS:]
    header = "Commands run (command → exit status):"
    if len(commands) > len(shown):
        header = f"Commands run, last {len(shown)} of {len(commands)} (command → exit status):"
    parts += ["", header, _bullets(shown, "None.")]
    return "\n".join(parts)


def _file_lines(activity: Activity) -> list[str]:
    """`path: actions` for every file, earlier summaries' files first (their actions, then this part's)."""
    files = activity.files()
    lines = []
    for path, label in activity.carried.files.items():
        now = files.pop(path, None)
        lines.append(f"{path}: {label}" + (f", then {_action_label(now)}" if now else ""))
    lines.extend(f"{p}: {_action_label(c)}" for p, c in files.items())
    return lines


def _errors(activity: Activity) -> str:
    """Section 4: failed tool results, first lines of each, most recent kept."""
    failures = list(activity.carried.failures)
    for what, outcome in activity.failures():
        detail = " / ".join(outcome.error_lines()) or outcome.status
        failures.append(f"{what} → {outcome.status}: {detail}")
    shown = failures[-MAX_ERRORS:]
    body = _bullets(shown, "No failed tool results.")
    if len(failures) > len(shown):
        body = f"({len(failures) - len(shown)} earlier failures omitted)\n{body}"
    return body


def _problem_solving(activity: Activity, truncated: bool) -> str:
    """Section 5: activity counts and the earlier summary's problem solving."""
    failed = sum(1 for c in activity.calls if c.outcome and c.outcome.failed)
    lines = [
        f"{activity.assistant_responses} assistant responses, {len(activity.calls)} tool calls "
        f"({failed} failed), {len(activity.files())} files touched."
    ]
    for summary in activity.previous_summaries[-1:]:
        carried = summary_section(summary, 5)
        if carried:
            lines.append(f"Carried from the earlier summary: {_clip(carried, CARRIED_SUMMARY_CHARS)}")
    if truncated:
        lines.append("The oldest part of the conversation was dropped before summarizing.")
    return "\n".join(lines)


def _user_messages(activity: Activity) -> str:
    """Section 6: every user message, newest first, within the budget."""
    messages = budget_user_messages(activity.carried.user_messages + activity.user_messages)
    if not messages:
        return "None."
    return "(newest first)\n" + "\n".join(f"- {m}" for m in messages)


def _pending(activity: Activity) -> str:
    """Section 7: the latest todo list's unfinished items (an earlier summary's when this part wrote none)."""
    items = _open_items(activity)
    if items is None:
        return "No todo list recorded."
    return _bullets((f"[{status}] {task}" for status, task in items), "All recorded tasks are completed.")


def _open_items(activity: Activity) -> list[tuple[str, str]] | None:
    """Unfinished todo items: this part's latest list, else the earlier summaries'; None when neither has one."""
    if latest_todos(activity.calls) is not None:
        return pending_todos(activity.calls)
    if activity.carried.todos is not None:
        return activity.carried.pending()
    return None


def _current_work(activity: Activity) -> str:
    """Section 8: the last assistant text and the last few tool calls."""
    lines = []
    if activity.last_assistant_text:
        lines.append(_clip(activity.last_assistant_text, CURRENT_WORK_CHARS))
    recent = [describe_call(call) for call in activity.calls[-3:]]
    if recent:
        lines.append("Last tool calls: " + "; ".join(recent))
    return "\n".join(lines) or "No assistant work recorded."


def _next_step(activity: Activity) -> str:
    """Section 9: the open todo item in progress, else the latest user request."""
    items = _open_items(activity) or []
    active = [task for status, task in items if status == "in_progress"] or [t for _, t in items]
    if active:
        return f"Continue with: {active[0]}"
    requests = activity.requests()
    if requests:
        return f"Continue from the latest user request: {first_line(requests[-1])}"
    return "None."


def render_summary(activity: Activity, *, custom_instructions: str | None = None, truncated: bool = False) -> str:
    """The nine numbered sections as one text, the `<summary>` body."""
    bodies = (
        _primary_request(activity, custom_instructions),
        _concepts(activity),
        _files_and_commands(activity),
        _errors(activity),
        _problem_solving(activity, truncated),
        _user_messages(activity),
        _pending(activity),
        _current_work(activity),
        _next_step(activity),
    )
    sections = [f"{i}. {name}:\n{body}" for i, (name, body) in enumerate(zip(SUMMARY_SECTIONS, bodies, strict=True), 1)]
    return "\n\n".join(sections).strip()


class ExtractiveSummarizer:
    """Deterministic, offline summarizer: no model call, every fact quoted from the entries."""

    name = "extractive"

    def summarize(
        self,
        entries: Sequence[ViewEntry],
        *,
        custom_instructions: str | None = None,
        truncated: bool = False,
    ) -> SummaryResult:
        """Summarize `entries` into the nine sections; never raises for content reasons."""
        body = render_summary(collect_activity(entries), custom_instructions=custom_instructions, truncated=truncated)
        raw = f"<analysis>extractive</analysis><summary>\n{body}\n</summary>"
        return SummaryResult(text=body, raw=raw)
