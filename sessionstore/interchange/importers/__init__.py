"""Import of agent transcripts: Claude Code JSONL, Codex CLI rollouts, and our own jsonl export.

Pure and storage-independent. The streaming use, for files of any size:

    importer = open_import(path)          # picks the format
    for line in importer.lines():         # one physical line at a time
        ...                               # write line.message / line.raw
    plan = importer.plan()                # header, active_chain, boundaries, warnings

`parse_file(path)` does the same and keeps every line in `plan.lines`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator, Protocol

from .claude_code import ClaudeCodeImport
from .codex import CodexImport
from .native import NativeImport, looks_native
from .plan import (
    ChainNode,
    ChainResult,
    ImportedBoundary,
    ImportedLine,
    ImportPlan,
    Source,
    UTF8_BOM,
)

__all__ = [
    "ChainNode",
    "ChainResult",
    "ClaudeCodeImport",
    "CodexImport",
    "ImportPlan",
    "ImportedBoundary",
    "ImportedLine",
    "Source",
    "NativeImport",
    "SourceImport",
    "detect_source",
    "sniff_source",
    "open_import",
    "parse_file",
]

#: Top-level line types only a Codex rollout has.
CODEX_LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})

#: Bytes read to sniff the format (a first line longer than this is not a rollout header).
SNIFF_BYTES = 1 << 20
#: Lines `sniff_source` looks at before giving up.
SNIFF_LINES = 20
#: Keys and line types only a Claude Code transcript line has.
CLAUDE_CODE_KEYS = frozenset({"sessionId", "parentUuid", "leafUuid", "isSidechain"})
CLAUDE_CODE_LINE_TYPES = frozenset({"summary", "file-history-snapshot", "queue-operation", "custom-title"})


class SourceImport(Protocol):
    """What both importers offer: stream the lines, then get the plan."""

    source: str
    path: str
    limit: int | None
    hold_tail: bool
    position: tuple[int, int]
    resumable: bool

    def lines(self) -> Iterator[ImportedLine]: ...

    def plan(self) -> ImportPlan: ...


def detect_source(path: str | os.PathLike[str]) -> str:
    """ "codex" for a rollout file (by name or first line), "jsonl" for our export, else "claude-code"."""
    if Path(path).name.startswith("rollout-"):
        return "codex"
    with open(path, "rb") as handle:
        first = handle.readline(SNIFF_BYTES)
    try:
        entry = json.loads(first)
    except (ValueError, UnicodeDecodeError):
        return "claude-code"
    if isinstance(entry, dict) and entry.get("type") in CODEX_LINE_TYPES:
        return "codex"
    if looks_native(entry):
        return "jsonl"
    return "claude-code"


def sniff_source(path: str | os.PathLike[str]) -> str | None:
    """The format the file's own lines show ("codex", "jsonl", "claude-code"), or None when none is recognized."""
    with open(path, "rb") as handle:
        for _ in range(SNIFF_LINES):
            line = handle.readline(SNIFF_BYTES)
            if not line:
                break
            kind = _line_kind(line.removeprefix(UTF8_BOM))
            if kind:
                return kind
    return "codex" if Path(path).name.startswith("rollout-") else None


def _line_kind(line: bytes) -> str | None:
    """The format one decoded line belongs to, if it says."""
    try:
        entry = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(entry, dict):
        return None
    if entry.get("type") in CODEX_LINE_TYPES and "payload" in entry:
        return "codex"
    if looks_native(entry):
        return "jsonl"
    if CLAUDE_CODE_KEYS & entry.keys() or entry.get("type") in CLAUDE_CODE_LINE_TYPES:
        return "claude-code"
    return None


def open_import(
    path: str | os.PathLike[str], source: str | None = None, *, limit: int | None = None, hold_tail: bool = False
) -> SourceImport:
    """A streaming importer for `path` (format detected unless `source` is given).

    `limit` reads only the file's first bytes (up to its last whole line);
    `hold_tail` lets the importer leave an unsettled tail for the next import.
    """
    chosen = source or detect_source(path)
    importer: SourceImport
    if chosen == "codex":
        importer = CodexImport(path)
    elif chosen == "claude-code":
        importer = ClaudeCodeImport(path)
    elif chosen == "jsonl":
        importer = NativeImport(path)
    else:
        raise ValueError(f"unknown transcript source {chosen!r}")
    importer.limit, importer.hold_tail = limit, hold_tail
    return importer


def parse_file(path: str | os.PathLike[str], source: str | None = None) -> ImportPlan:
    """The whole plan with every line kept (for files that fit in memory)."""
    importer = open_import(path, source)
    lines = list(importer.lines())
    plan = importer.plan()
    plan.lines = lines
    return plan
