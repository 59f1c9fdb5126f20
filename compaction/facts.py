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
from typing import Any, Iterable, Mapping, Sequence

from sessionstore.compaction.summarizers.extractive import (
    STATUS_LINE,
    USER_MESSAGE_BUDGET,
    ToolCall,
    estimate_tokens,
    file_touches,
    first_line,
    is_request,
    is_user_authored,
    latest_todos,
    outcome_of,
    pending_todos,
    summary_section,
    tool_calls,
    user_text,
)
from sessionstore.storage.core.types import ViewEntry

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
#: The gate report lists at most this many condensed facts per kind (the newest; the counts are whole).
PREVIEW_ITEMS = 20

#: A bullet that says a section is empty ("None", "No pending tasks", "N/A"): not a fact.
_EMPTY_ITEM = re.compile(
    r"^\W*(?:none\b|n/a\b|nothing\b|no (?:explicit |outstanding |remaining |other |open |known )*"
    r"(?:pending |open )?(?:tasks?|items?|todos?|errors?|issues?|failures?)\b)",
    re.IGNORECASE,
)
_OMITTED = re.compile(r"^\(\d+ earlier \w+ omitted\)$")
#: A maximal run of the characters a path is made of: a path fact is present where it is one whole token.
_PATH_TOKEN = re.compile(r"[\w\-/@+~.]+")
#: What may wrap a path in prose (quotes, brackets, a trailing comma) without being part of it.
_WORD_PUNCTUATION = "`'\"()[]{}<>,;:!?*"
_BULLET = re.compile(r"^[ \t]*[-*•][ \t]+", re.MULTILINE)
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[\w.@+\-]+)+/?|[\w.\-]+(?:/[\w.@+\-]+)+")
_TODO_BULLET = re.compile(r"^\[[\w\s-]+\]\s*")


@dataclass(frozen=True, slots=True)
class Condensed:
    """Facts of one kind no longer listed verbatim: how many, and the transcript seqs they came from.

    `recall -b A..B --query FACT` over the boundaries whose stretch of the transcript holds
    seqs first_seq..last_seq finds each of them in its original message.
    """

    count: int
    first_seq: int
    last_seq: int

    def merged(self, other: "Condensed | None") -> "Condensed":
        """Both groups as one (counts added, seq range widened)."""
        if other is None:
            return self
        return Condensed(
            self.count + other.count, min(self.first_seq, other.first_seq), max(self.last_seq, other.last_seq)
        )

    def to_dict(self) -> dict[str, int]:
        return {"count": self.count, "first_seq": self.first_seq, "last_seq": self.last_seq}


@dataclass(frozen=True, slots=True)
class Facts:
    """The must-keep facts of one span, per kind, in a deterministic order.

    `seqs` holds, per kind and parallel to its facts, the transcript seq of the message each fact
    came from (0 when unknown: an imported summary); `condensed` the facts earlier summaries
    no longer listed, per kind.
    """

    user_messages: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    open_items: tuple[str, ...] = ()
    cwd: str | None = None
    seqs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    condensed: Mapping[str, Condensed] = field(default_factory=dict)

    def of(self, kind: str) -> tuple[str, ...]:
        """The facts of one kind."""
        return tuple(getattr(self, kind))

    def origins(self, kind: str) -> tuple[int, ...]:
        """The seq each fact of `kind` came from (0 when unknown), parallel to `of(kind)`."""
        found = tuple(self.seqs.get(kind, ()))
        return found if len(found) == len(self.of(kind)) else (0,) * len(self.of(kind))

    def to_dict(self) -> dict[str, Any]:
        """JSON shape stored in the summary message's metadata: [fact, seq] pairs, then the condensed groups."""
        out: dict[str, Any] = {
            kind: [[f, s] for f, s in zip(self.of(kind), self.origins(kind), strict=True)] for kind in FACT_KINDS
        }
        out["condensed"] = {kind: group.to_dict() for kind, group in self.condensed.items()}
        return out

    @property
    def total(self) -> int:
        return sum(len(self.of(kind)) for kind in FACT_KINDS)


@dataclass(frozen=True, slots=True)
class GateReport:
    """What the gate checked and what it had to add, per kind."""

    checked: dict[str, int]
    missing: dict[str, list[str]] = field(default_factory=dict)
    added_tokens: int = 0
    #: Per kind, the facts of this span listed no longer verbatim but by a recall reference.
    condensed: dict[str, list[str]] = field(default_factory=dict)
    #: Per kind, the whole condensed group the summary's reference names (earlier ones included).
    references: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Tokens of the summary after the gate (the budget it was held to, when it had one).
    summary_tokens: int = 0
    budget: int | None = None
    body_cut: bool = False

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
            "condensed": {kind: len(self.condensed.get(kind, [])) for kind in FACT_KINDS},
            "condensed_items": {
                kind: [_preview(f) for f in self.condensed.get(kind, [])[-PREVIEW_ITEMS:]] for kind in FACT_KINDS
            },
            "references": dict(self.references),
            "summary_tokens": self.summary_tokens,
            "budget": self.budget,
            "body_cut": self.body_cut,
        }


def normalize(text: str) -> str:
    """Whitespace collapsed to single spaces: how facts and summaries are compared."""
    return " ".join(text.split())


def span_facts(entries: Sequence[ViewEntry], *, cwd: str | None = None, budget: int = USER_MESSAGE_BUDGET) -> Facts:
    """The must-keep facts of `entries`, those of earlier summaries inside them included.

    Each fact keeps the seq of the message it came from; a fact seen twice keeps its newest
    origin. Earlier summaries' condensed groups are merged per kind.
    """
    carried = [carried_facts(e) for e in entries if e.message.is_compact_summary]
    users = [pair for c in carried for pair in reversed(_pairs(c, "user_messages"))]
    users += [(text, e.seq) for e, text in _user_requests(entries)]
    calls = tool_calls(entries)
    paths = [pair for c in carried for pair in _pairs(c, "paths")]
    paths += [(p, entries[call.index].seq) for call in calls for p, _ in file_touches(call)]
    failures = [pair for c in carried for pair in _pairs(c, "failures")] + _failure_pairs(entries)
    todo_call = _latest_todo_call(calls)
    if todo_call is not None:
        open_items = [(task, entries[todo_call.index].seq) for _, task in pending_todos([todo_call])]
    else:
        open_items = _pairs(carried[-1], "open_items") if carried else []
    condensed: dict[str, Condensed] = {}
    for c in carried:
        for kind, group in c.condensed.items():
            condensed[kind] = group.merged(condensed.get(kind))
    lists = {
        "user_messages": _budgeted_pairs(users, budget),
        "paths": paths,
        "failures": failures,
        "open_items": open_items,
    }
    unique = {kind: _unique_pairs(pairs) for kind, pairs in lists.items()}
    return Facts(
        **{kind: tuple(f for f, _ in pairs) for kind, pairs in unique.items()},
        cwd=cwd,
        seqs={kind: tuple(s for _, s in pairs) for kind, pairs in unique.items()},
        condensed=condensed,
    )


def _pairs(facts: Facts, kind: str) -> list[tuple[str, int]]:
    """(fact, origin seq) of one kind."""
    return list(zip(facts.of(kind), facts.origins(kind), strict=True))


def _user_requests(entries: Sequence[ViewEntry]) -> list[tuple[ViewEntry, str]]:
    """The user's own requests in `entries` (command echoes and notices left out), oldest first."""
    found = []
    for entry in entries:
        if is_user_authored(entry):
            text = user_text(entry)
            if is_request(text):
                found.append((entry, text))
    return found


def _latest_todo_call(calls: Sequence[ToolCall]) -> ToolCall | None:
    """The last call that wrote a todo list or plan."""
    for call in reversed(calls):
        if latest_todos([call]) is not None:
            return call
    return None


def _budgeted_pairs(pairs: Sequence[tuple[str, int]], budget: int) -> list[tuple[str, int]]:
    """`budgeted_user_messages` over (message, seq) pairs, the seqs kept."""
    texts = budgeted_user_messages([m for m, _ in pairs], budget)
    return list(zip(texts, [s for _, s in reversed(pairs)], strict=True))


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


def _failure_pairs(entries: Sequence[ViewEntry]) -> list[tuple[str, int]]:
    """(first informative line, seq) of every failed tool result, oldest first."""
    found = []
    for entry in entries:
        if entry.role != "user" or isinstance(entry.message.content, str):
            continue
        for block in entry.message.content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                outcome = outcome_of(block)
                line = failure_line(outcome.text) if outcome.failed else ""
                if line:
                    found.append((line, entry.seq))
    return found


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
        return _stored_facts(stored)
    text = _text(entry.message.content)
    users = [b for b in _bullets(summary_section(text, 6)) if b != "(newest first)"]
    paths = _PATH.findall(summary_section(text, 3))
    failures = [first_line(b, FAILURE_LINE_CHARS) for b in _bullets(summary_section(text, 4)) if not _empty(b)]
    items = [_TODO_BULLET.sub("", b) for b in _bullets(summary_section(text, 7))]
    return Facts(
        user_messages=tuple(reversed(users)),
        paths=tuple(paths),
        failures=tuple(failures),
        open_items=tuple(i for i in items if not _empty(i)),
    )


def _stored_facts(stored: dict[str, Any]) -> Facts:
    """Facts from summary metadata: [fact, seq] pairs (or bare facts, as older summaries stored them)."""
    texts: dict[str, tuple[str, ...]] = {}
    seqs: dict[str, tuple[int, ...]] = {}
    for kind in FACT_KINDS:
        items = [i if isinstance(i, (list, tuple)) and len(i) == 2 else (i, 0) for i in stored.get(kind) or ()]
        texts[kind] = tuple(str(f) for f, _ in items)
        seqs[kind] = tuple(int(s) if isinstance(s, int) else 0 for _, s in items)
    condensed = {}
    for kind, group in (stored.get("condensed") or {}).items():
        if kind in FACT_KINDS and isinstance(group, dict):
            condensed[kind] = Condensed(
                int(group.get("count", 0)), int(group.get("first_seq", 0)), int(group.get("last_seq", 0))
            )
    return Facts(
        user_messages=texts["user_messages"],
        paths=texts["paths"],
        failures=texts["failures"],
        open_items=texts["open_items"],
        seqs=seqs,
        condensed=condensed,
    )


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
        item = section[match.end() : end].strip()
        if item:
            items.append(item)
    return items


def _unique_pairs(pairs: Iterable[tuple[str, int]]) -> list[tuple[str, int]]:
    """Non-blank facts, first occurrence kept in place, with the newest origin seq seen for it."""
    where: dict[str, int] = {}
    out: list[tuple[str, int]] = []
    for value, seq in pairs:
        key = normalize(value)
        if not key:
            continue
        if key in where:
            index = where[key]
            out[index] = (out[index][0], max(out[index][1], seq))
            continue
        where[key] = len(out)
        out.append((value.strip(), seq))
    return out


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
    """Per kind, the facts whose text the summary does not hold (one pass over the summary to index it)."""
    index = SummaryIndex(summary)
    return {kind: [f for f in facts.of(kind) if not index.holds(kind, f, facts.cwd)] for kind in FACT_KINDS}


class SummaryIndex:
    """A summary indexed once, so checking a fact costs a set lookup, not a search of the text.

    Paths are looked up among the path-like tokens of the text (a token is a maximal run of path
    characters, so `a.py` is not found inside `a.pyc`) and its whitespace-separated words; other
    facts among its lines and bullet items, whitespace collapsed, before a substring search of
    the (budget-bounded) text as the last resort.
    """

    def __init__(self, summary: str):
        self.haystack = normalize(summary)
        self.tokens: set[str] = set()
        for match in _PATH_TOKEN.finditer(summary):
            token = match.group(0)
            self.tokens.add(token)
            self.tokens.add(token.rstrip("."))
        for word in summary.split():
            self.tokens.add(word.strip(_WORD_PUNCTUATION))
        self.lines: set[str] = {normalize(line) for line in summary.splitlines()}
        self.lines.update(normalize(_BULLET.sub("", line, count=1)) for line in summary.splitlines())
        self.lines.update(normalize(item) for item in _bullets(summary))

    def holds(self, kind: str, fact: str, cwd: str | None = None) -> bool:
        """True when the summary holds `fact` verbatim (a path also in its cwd-relative form)."""
        key = normalize(fact)
        if not key:
            return True
        if kind == "paths":
            return any(form in self.tokens for form in _path_forms(key, cwd)) or (" " in key and key in self.haystack)
        return key in self.lines or key in self.haystack


def _path_forms(path: str, cwd: str | None) -> list[str]:
    """The forms a path may take in a summary: itself, and relative to (or under) the cwd."""
    forms = [path]
    if cwd:
        root = cwd.rstrip("/") + "/"
        if path.startswith(root) and len(path) > len(root):
            relative = path[len(root) :]
            forms += [relative, "./" + relative]
        elif not path.startswith("/"):
            forms.append(root + path.removeprefix("./"))
    return forms


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


def gate_summary(
    summary: str, entries: Sequence[ViewEntry], *, cwd: str | None = None, budget: int = USER_MESSAGE_BUDGET
) -> tuple[str, GateReport, Facts]:
    """Check `summary` against the facts of `entries`; (gated text, report, facts)."""
    facts = span_facts(entries, cwd=cwd, budget=budget)
    text, report = apply_gate(summary, facts)
    return text, report, facts


def _preview(fact: str) -> str:
    fact = normalize(fact)
    return fact if len(fact) <= PREVIEW_CHARS else fact[: PREVIEW_CHARS - 1] + "…"
