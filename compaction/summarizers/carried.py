"""Facts an earlier summary carries: read back so a later summary of the same span keeps them.

A summary message inside the entries being summarized stands for everything
it replaced, so its facts are facts of the span: the user messages it quoted,
the tools and file types it counted, the files and commands in its ledger, its
failures and its open todo items. `carried_facts` parses them from the nine
numbered sections (any summarizer that follows the prompt's headings), with no
model call; text it cannot place is simply not carried.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from sessionstore.compaction.prompt import SUMMARY_SECTIONS

_SECTION_HEADING = re.compile(
    r"^[ \t]*(?:#+[ \t]*)?\**[ \t]*(\d)\.[ \t]*(?:"
    + "|".join(re.escape(name) for name in SUMMARY_SECTIONS)
    + r")[ \t]*\**[ \t]*:?[ \t]*\**",
    re.MULTILINE | re.IGNORECASE,
)
#: A numbered summary heading ("3. Files and Code Sections:"), as summarizers following the prompt write it.
SECTION_HEADING = _SECTION_HEADING
_COUNTED = re.compile(r"^(.+?) ×(\d+)$")
_TODO = re.compile(r"^\[([\w-]+)\] (.*)$", re.DOTALL)
_COMMANDS_HEADER = re.compile(r"^Commands run\b.*:$", re.MULTILINE)
_EARLIER_OMITTED = re.compile(r"^\(\d+ earlier failures omitted\)$")


@dataclass(slots=True)
class CarriedFacts:
    """What earlier summaries in a span said, oldest summary first."""

    user_messages: list[str] = field(default_factory=list)
    tools: Counter[str] = field(default_factory=Counter)
    file_types: Counter[str] = field(default_factory=Counter)
    files: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    todos: list[tuple[str, str]] | None = None

    def pending(self) -> list[tuple[str, str]]:
        """The carried todo items that are not completed."""
        return [(status, task) for status, task in self.todos or [] if status != "completed"]


def summary_section(summary: str, number: int) -> str:
    """Section `number` of a summary's text, or "" when it has none."""
    headings = list(_SECTION_HEADING.finditer(summary))
    for position, heading in enumerate(headings):
        if int(heading.group(1)) == number:
            end = headings[position + 1].start() if position + 1 < len(headings) else len(summary)
            return summary[heading.end() : end].strip()
    return ""


def bullet_items(text: str) -> list[str]:
    """The items of a markdown bullet list; lines that start no bullet continue the previous one."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line[2:])
        elif items:
            items[-1] += "\n" + line
    return [item.strip() for item in items]


def carried_facts(summaries: Sequence[str]) -> CarriedFacts:
    """The facts of earlier summaries (oldest first), merged in their order."""
    facts = CarriedFacts()
    for summary in summaries:
        _add_summary(facts, summary)
    return facts


def _add_summary(facts: CarriedFacts, summary: str) -> None:
    """Fold one summary's sections 2, 3, 4, 6 and 7 into `facts`."""
    messages = bullet_items(summary_section(summary, 6))
    facts.user_messages.extend(reversed(messages))  # rendered newest first; kept oldest first
    _add_concepts(facts, bullet_items(summary_section(summary, 2)))
    files_part, _, commands_part = _split_commands(summary_section(summary, 3))
    for item in bullet_items(files_part):
        path, sep, label = item.rpartition(": ")
        if sep:
            facts.files[path] = label
    facts.commands.extend(bullet_items(commands_part))
    facts.failures.extend(i for i in bullet_items(summary_section(summary, 4)) if not _EARLIER_OMITTED.match(i))
    todos = _todos(summary_section(summary, 7))
    if todos is not None:
        facts.todos = todos


def _split_commands(section: str) -> tuple[str, str, str]:
    """Section 3 cut into (files part, header, commands part)."""
    match = _COMMANDS_HEADER.search(section)
    if match is None:
        return section, "", ""
    return section[: match.start()], match.group(0), section[match.end() :]


def _add_concepts(facts: CarriedFacts, items: Iterable[str]) -> None:
    """`Tools used: Read ×3, Bash ×1` and `File types: .py ×2` lines into counters."""
    for item in items:
        label, _, listing = item.partition(": ")
        target = {"Tools used": facts.tools, "File types": facts.file_types}.get(label)
        if target is None:
            continue
        for part in listing.split(", "):
            match = _COUNTED.match(part.strip())
            if match:
                target[match.group(1).lstrip(".")] += int(match.group(2))


def _todos(section: str) -> list[tuple[str, str]] | None:
    """(status, task) items of section 7; [] when all were completed, None when no list was recorded."""
    if not section or section.startswith("No todo list recorded"):
        return None
    found = []
    for item in bullet_items(section):
        match = _TODO.match(item)
        if match:
            found.append((match.group(1), match.group(2)))
    return found
