"""The facts gate: whatever wrote a summary, the span's must-keep facts end up in it.

Must-keep facts of a summarized span, each kept verbatim (whitespace aside):
the user's own messages (newest first, whole within the 20k-token budget,
first lines beyond it), the file paths its tools touched (Read/Edit/Write
inputs and patches; a path under the session's cwd may be written relative
to it), the first informative line of each failed tool result, and the open
items of the latest todo list or plan. Facts an earlier summary inside the
span carried are facts of the span too, so a second compaction keeps what the
first one kept. The gate appends what a summary left out in one short,
deterministic section and reports, per kind, how many facts it checked and
which were missing. A summary that holds every fact is returned unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from sessionstore.compaction.summarizers.extractive import (
    STATUS_LINE,
    USER_MESSAGE_BUDGET,
    Activity,
    collect_activity,
    estimate_tokens,
    file_touches,
    first_line,
    latest_todos,
    pending_todos,
    summary_section,
)
from sessionstore.storage.types import ViewEntry

FACT_KINDS: tuple[str, ...] = ("user_messages", "paths", "failures", "open_items")
KIND_TITLES = {
    "user_messages": "User messages (verbatim, newest first):",
    "paths": "Files touched:",
    "failures": "Failed tool results (first informative line):",
    "open_items": "Open todo items:",
}
GATE_HEADING = "10. Facts the summary left out (added by the facts gate):"
#: The key of the facts inside a summary message's metadata (what a later gate carries forward).
METADATA_KEY = "facts"
FAILURE_LINE_CHARS = 200
PREVIEW_CHARS = 200

#: A bullet that says a section is empty ("None", "No pending tasks", "N/A"): not a fact.
_EMPTY_ITEM = re.compile(r"^\W*(?:none\b|n/a\b|nothing\b|no (?:explicit |outstanding |remaining |other |open |known )*"
                         r"(?:pending |open )?(?:tasks?|items?|todos?|errors?|issues?|failures?)\b)", re.IGNORECASE)
_OMITTED = re.compile(r"^\(\d+ earlier \w+ omitted\)$")
#: Characters that continue a path: a path fact counts as present only where it does not run on.
_PATH_CHAR = r"[\w\-/@+~]"
_BULLET = re.compile(r"^[ \t]*[-*•][ \t]+", re.MULTILINE)
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[\w.@+\-]+)+/?|[\w.\-]+(?:/[\w.@+\-]+)+")
_TODO_BULLET = re.compile(r"^\[[\w\s-]+\]\s*")


@dataclass(frozen=True, slots=True)
class Facts:
    """The must-keep facts of one span, per kind, in a deterministic order."""

    user_messages: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    open_items: tuple[str, ...] = ()
    cwd: str | None = None

    def of(self, kind: str) -> tuple[str, ...]:
        """The facts of one kind."""
        return tuple(getattr(self, kind))

    def to_dict(self) -> dict[str, list[str]]:
        """JSON shape stored in the summary message's metadata."""
        return {kind: list(self.of(kind)) for kind in FACT_KINDS}

    @property
    def total(self) -> int:
        return sum(len(self.of(kind)) for kind in FACT_KINDS)


@dataclass(frozen=True, slots=True)
class GateReport:
    """What the gate checked and what it had to add, per kind."""

    checked: dict[str, int]
    missing: dict[str, list[str]] = field(default_factory=dict)
    added_tokens: int = 0

    @property
    def appended(self) -> bool:
        return any(self.missing.get(kind) for kind in FACT_KINDS)

    def retention(self, kind: str) -> float | None:
        """Share of the kind's facts the summary held before the gate (None when there were none)."""
        checked = self.checked.get(kind, 0)
        return None if not checked else 1 - len(self.missing.get(kind, [])) / checked

    def to_dict(self) -> dict[str, Any]:
        """JSON shape kept in the compaction record and shown by `history --json`."""
        return {
            "checked": dict(self.checked),
            "missing": {kind: len(self.missing.get(kind, [])) for kind in FACT_KINDS},
            "missing_items": {kind: [_preview(f) for f in self.missing.get(kind, [])] for kind in FACT_KINDS},
            "appended": self.appended,
            "added_tokens": self.added_tokens,
        }


def normalize(text: str) -> str:
    """Whitespace collapsed to single spaces: how facts and summaries are compared."""
    return " ".join(text.split())


def span_facts(entries: Sequence[ViewEntry], *, cwd: str | None = None,
               budget: int = USER_MESSAGE_BUDGET) -> Facts:
    """The must-keep facts of `entries`, those of earlier summaries inside them included."""
    activity = collect_activity(entries)
    carried = [carried_facts(e) for e in entries if e.message.is_compact_summary]
    users = [m for c in carried for m in reversed(c.user_messages)] + activity.requests()
    paths = [p for c in carried for p in c.paths] + [p for call in activity.calls for p, _ in file_touches(call)]
    failures = [f for c in carried for f in c.failures] + _failure_lines(activity)
    if latest_todos(activity.calls) is not None:
        open_items = [task for _, task in pending_todos(activity.calls)]
    else:
        open_items = list(carried[-1].open_items) if carried else []
    return Facts(
        user_messages=_unique(budgeted_user_messages(users, budget)),
        paths=_unique(paths), failures=_unique(failures), open_items=_unique(open_items), cwd=cwd,
    )


def budgeted_user_messages(messages: Sequence[str], budget: int = USER_MESSAGE_BUDGET) -> list[str]:
    """User messages newest first: whole while the budget lasts, then their first lines."""
    out: list[str] = []
    spent, within = 0, True
    for message in reversed(messages):
        cost = estimate_tokens(message)
        within = within and spent + cost <= budget
        if within:
            spent += cost
            out.append(message.strip())
        else:
            out.append(first_line(message))
    return out


def _failure_lines(activity: Activity) -> list[str]:
    """The first informative line of every failed tool result, oldest first."""
    outcomes = [c.outcome for c in activity.calls if c.outcome is not None and c.outcome.failed]
    outcomes += activity.orphan_failures
    lines = (failure_line(o.text) for o in outcomes)
    return [line for line in lines if line]


def failure_line(text: str) -> str:
    """The first line that is neither blank nor a status line (exit code, Codex's headers), cut to size."""
    for line in text.splitlines():
        line = line.strip()
        if line and not STATUS_LINE.match(line):
            return line if len(line) <= FAILURE_LINE_CHARS else line[: FAILURE_LINE_CHARS - 1]
    return ""


def carried_facts(entry: ViewEntry) -> Facts:
    """The facts an earlier summary carried: from its metadata, else read from its sections."""
    stored = entry.message.metadata.get(METADATA_KEY)
    if isinstance(stored, dict):
        carried: dict[str, Any] = {kind: tuple(str(f) for f in stored.get(kind) or ()) for kind in FACT_KINDS}
        return Facts(**carried)
    text = _text(entry.message.content)
    users = [b for b in _bullets(summary_section(text, 6)) if b != "(newest first)"]
    paths = _PATH.findall(summary_section(text, 3))
    failures = [first_line(b, FAILURE_LINE_CHARS) for b in _bullets(summary_section(text, 4)) if not _empty(b)]
    items = [_TODO_BULLET.sub("", b) for b in _bullets(summary_section(text, 7))]
    return Facts(user_messages=tuple(reversed(users)), paths=tuple(paths), failures=tuple(failures),
                 open_items=tuple(i for i in items if not _empty(i)))


def _empty(item: str) -> bool:
    """True for a bullet that only says its section has nothing in it."""
    return bool(_EMPTY_ITEM.match(item) or _OMITTED.match(item))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


def _bullets(section: str) -> list[str]:
    """The bullet items of a section (continuation lines joined to their bullet)."""
    starts = list(_BULLET.finditer(section))
    items = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(section)
        item = section[match.end():end].strip()
        if item:
            items.append(item)
    return items


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    """Non-blank values, first occurrence kept, in order."""
    seen: set[str] = set()
    out = []
    for value in values:
        key = normalize(value)
        if key and key not in seen:
            seen.add(key)
            out.append(value.strip())
    return tuple(out)


def missing_facts(summary: str, facts: Facts) -> dict[str, list[str]]:
    """Per kind, the facts whose text the summary does not hold."""
    haystack = normalize(summary)
    missing = {kind: [f for f in facts.of(kind) if normalize(f) not in haystack]
               for kind in FACT_KINDS if kind != "paths"}
    missing["paths"] = [p for p in facts.paths
                        if not _path_present(normalize(p), haystack) and not _relative_present(p, facts.cwd, haystack)]
    return {kind: missing[kind] for kind in FACT_KINDS}


def _path_present(path: str, haystack: str) -> bool:
    """True when `path` stands whole in the text, not inside a longer path or name (a.py in a.pyc)."""
    if not path:
        return True
    pattern = rf"(?<!{_PATH_CHAR}){re.escape(path)}(?!{_PATH_CHAR}|\.\w)"
    return re.search(pattern, haystack) is not None


def _relative_present(path: str, cwd: str | None, haystack: str) -> bool:
    """True when a path under the cwd appears in its cwd-relative form (or a relative one in absolute form)."""
    if not cwd:
        return False
    root = cwd.rstrip("/") + "/"
    if path.startswith(root):
        relative = normalize(path[len(root):])
        return bool(relative) and (_path_present(relative, haystack) or _path_present("./" + relative, haystack))
    if not path.startswith("/"):
        return _path_present(normalize(root + path.removeprefix("./")), haystack)
    return False


def apply_gate(summary: str, facts: Facts) -> tuple[str, GateReport]:
    """The summary with a section appended for every missing fact (unchanged when none is)."""
    missing = missing_facts(summary, facts)
    checked = {kind: len(facts.of(kind)) for kind in FACT_KINDS}
    if not any(missing.values()):
        return summary, GateReport(checked, missing, 0)
    section = gate_section(missing)
    return f"{summary.rstrip()}\n\n{section}", GateReport(checked, missing, estimate_tokens(section))


def gate_section(missing: dict[str, list[str]]) -> str:
    """The appended section: one titled bullet list per kind that had missing facts."""
    parts = [GATE_HEADING]
    for kind in FACT_KINDS:
        if missing.get(kind):
            parts.append(KIND_TITLES[kind])
            parts.extend(f"- {fact}" for fact in missing[kind])
    return "\n".join(parts)


def gate_summary(summary: str, entries: Sequence[ViewEntry], *, cwd: str | None = None,
                 budget: int = USER_MESSAGE_BUDGET) -> tuple[str, GateReport, Facts]:
    """Check `summary` against the facts of `entries`; (gated text, report, facts)."""
    facts = span_facts(entries, cwd=cwd, budget=budget)
    text, report = apply_gate(summary, facts)
    return text, report, facts


def _preview(fact: str) -> str:
    fact = normalize(fact)
    return fact if len(fact) <= PREVIEW_CHARS else fact[: PREVIEW_CHARS - 1] + "…"
