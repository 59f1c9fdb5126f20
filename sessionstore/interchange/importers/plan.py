"""Data shapes of an import, and the pieces every importer shares.

An importer turns a foreign transcript file into a stream of `ImportedLine`
(one per physical line; the raw bytes are kept so the file can be reproduced
byte-for-byte) and, from the small `ChainNode` graph facts gathered while
streaming, the active chain and the compaction boundaries. Keeping the two
passes apart lets a caller write lines to storage as they stream: memory is
bounded by one line plus about a hundred bytes of graph facts per line.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal

from sessionstore.storage.codecs.fastjson import loads_line
from sessionstore.storage.records.validate import BLOCK_TYPES

LineKind = Literal["message", "side", "bad"]
Source = Literal["claude-code", "codex", "jsonl"]

#: Titles taken from a transcript are cut to this many characters.
TITLE_LENGTH = 100

#: Block types the store accepts in message content (the store's own door check).
KNOWN_BLOCK_TYPES = BLOCK_TYPES

#: Field limits of the store's envelope (longer values would be refused on append).
MAX_UUID_LENGTH = 100
MAX_TIMESTAMP_LENGTH = 40


@dataclass(frozen=True, slots=True)
class BoundaryFacts:
    """What a compaction boundary line says about itself."""

    trigger: str
    pre_tokens: int | None = None
    preserved_segment: dict[str, str] | None = None
    #: The compaction's kind when the line says it (our export writes it in a field Claude Code ignores).
    kind: str | None = None


@dataclass(slots=True)
class ChainNode:
    """The small graph facts of one line, all the chain builder needs.

    `role` is None for side entries: the parent walk passes through them but
    they never enter a view. `in_view` False marks recorded messages that no
    view ever holds (e.g. Claude Code's synthetic API-error messages).
    """

    line_no: int
    uuid: str
    parent: str | None
    role: str | None
    entry_type: str
    timestamp: str = ""
    logical_parent: str | None = None
    sidechain: bool = False
    api_message_id: str | None = None
    tool_use_ids: tuple[str, ...] = ()
    tool_result_ids: tuple[str, ...] = ()
    blank: bool = False
    in_view: bool = True
    is_compact_summary: bool = False
    boundary: BoundaryFacts | None = None

    @property
    def is_sent(self) -> bool:
        """True for user and assistant messages (what the model receives)."""
        return self.role in ("user", "assistant")


@dataclass(slots=True)
class ImportedLine:
    """One physical line of the source file.

    `raw` holds the line's exact bytes including its terminator, so joining
    every `raw` reproduces the file. A Codex `compacted` line also yields the
    messages of its replacement history as further lines with the same
    `line_no` and an empty `raw`. `message` is an append-shaped dict (role,
    content, envelope keys, metadata) when `kind == "message"`, else None.
    """

    line_no: int
    raw: bytes
    kind: LineKind
    entry_type: str
    message: dict[str, Any] | None = None
    warning: str | None = None
    node: ChainNode | None = None


@dataclass(slots=True)
class ImportedBoundary:
    """A compaction found in the file, with the view it replaced.

    `view_before` lists, in order, the uuids of the view the model had just
    before the compaction; `summarized` those of them the compaction replaced
    (all of `view_before` except a preserved segment).
    """

    boundary_uuid: str
    summary_uuid: str | None
    trigger: str
    kind: str = "full"
    pre_tokens: int | None = None
    preserved_segment: dict[str, str] | None = None
    view_before: list[str] = field(default_factory=list)
    summarized: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ChainResult:
    """Output of the chain pass: the active view, the boundaries, what was odd."""

    active_chain: list[str]
    boundaries: list[ImportedBoundary]
    warnings: list[str]


@dataclass(slots=True)
class ImportPlan:
    """Everything an import writes: header, lines, boundaries and active chain.

    `lines` is empty when the plan came from a streaming import (the caller
    consumed them already); `active_chain` lists uuids, in order, of the view
    the source tool itself would resume with.
    """

    source: Source
    path: str
    source_session_id: str | None
    title: str | None
    cwd: str | None
    model: str | None
    parent_source_session_id: str | None
    lines: list[ImportedLine]
    boundaries: list[ImportedBoundary]
    active_chain: list[str]
    warnings: list[str]
    #: tool_use_id -> how many boundaries precede the clear: its result shows cleared from that view on.
    cleared: dict[str, int] = field(default_factory=dict)
    #: The model's context window the source tool reported (Codex `model_context_window`), else None.
    context_window: int | None = None


def where(path: str | os.PathLike[str], line_no: int) -> str:
    """The `file:line` prefix of a warning."""
    return f"{os.fspath(path)}:{line_no}"


#: Read buffer of a transcript: with the default 8 KiB, every longer line costs several reads and joins.
READ_BUFFER = 1 << 20


#: The byte order mark some editors put at the start of a UTF-8 file.
UTF8_BOM = b"\xef\xbb\xbf"


def read_raw_lines(
    path: str | os.PathLike[str], limit: int | None = None, start: tuple[int, int] = (0, 0)
) -> Iterator[tuple[int, bytes]]:
    """(line number, exact bytes with terminator) of every physical line, streaming.

    With `limit`, only the file's first `limit` bytes are read (a file being
    written to: the caller passes the end of its last whole line). `start`
    (byte offset, lines before it) continues a read that stopped at a line end.
    """
    offset, before = start
    with open(path, "rb", buffering=READ_BUFFER) as handle:
        handle.seek(offset)
        remaining = None if limit is None else limit - offset
        for line_no, raw in enumerate(handle, start=before + 1):
            if remaining is not None:
                if remaining <= 0:
                    return
                raw = raw[:remaining]
                remaining -= len(raw)
            yield line_no, raw


#: Bytes read per step when looking for the end of a file's last whole line.
_TAIL_STEP = 1 << 16


def whole_lines_end(path: str | os.PathLike[str]) -> int:
    """The offset just past the last newline of the file (0 when it holds no whole line yet)."""
    with open(path, "rb") as handle:
        pos = handle.seek(0, os.SEEK_END)
        while pos > 0:
            step = min(_TAIL_STEP, pos)
            pos -= step
            handle.seek(pos)
            found = handle.read(step).rfind(b"\n")
            if found != -1:
                return pos + found + 1
    return 0


def decode_line(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object of a line, or None and the reason it is unusable.

    A blank line gives (None, None): it is kept as a side line, not an error.
    A UTF-8 byte order mark before it (editors on Windows write one) is skipped.
    """
    raw = raw.removeprefix(UTF8_BOM)
    if not raw or raw.isspace():
        return None, None
    if not raw.isascii():  # ASCII is valid UTF-8; anything else is checked before the parser sees it
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, f"invalid UTF-8 at byte {exc.start}"
    try:
        entry = loads_line(raw)
    except json.JSONDecodeError as exc:
        if not raw.endswith(b"\n"):
            return None, f"truncated last line (no line terminator): {exc.msg}"
        return None, f"malformed JSON: {exc.msg} at column {exc.colno}"
    if not isinstance(entry, dict):
        return None, f"a JSON {type(entry).__name__}, not an object"
    return entry, None


def decoded_entry(path: str, line_no: int, raw: bytes) -> dict[str, Any] | ImportedLine:
    """A physical line's JSON object, or the ImportedLine it already is: bad (with its `file:line` warning) or blank.

    Every importer opens its classification of a line so, whatever the format: one rule for what is unreadable.
    """
    entry, problem = decode_line(raw)
    if problem:
        return ImportedLine(line_no, raw, "bad", "", warning=f"{where(path, line_no)}: {problem}")
    if entry is None:
        return ImportedLine(line_no, raw, "side", "blank")
    return entry


def content_problem(content: Any) -> str | None:
    """Why the store would refuse `content`, or None when it is acceptable."""
    if isinstance(content, str):
        return None
    if not isinstance(content, list) or not content:
        return "content is neither a string nor a non-empty list of blocks"
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            return f"content block {i} is not an object"
        kind = block.get("type")
        if kind not in KNOWN_BLOCK_TYPES:
            return f"content block {i} has unknown type {kind!r}"
        if kind == "tool_use" and not _usable_id(block.get("id")):
            return f"content block {i} (tool_use) has no usable id"
        if kind == "tool_result" and not _usable_id(block.get("tool_use_id")):
            return f"content block {i} (tool_result) has no usable tool_use_id"
    return None


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200


def envelope_problem(uuid: Any, parent: Any, timestamp: Any) -> str | None:
    """Why the store would refuse these envelope values, or None."""
    for name, value, limit in (
        ("uuid", uuid, MAX_UUID_LENGTH),
        ("parent uuid", parent, MAX_UUID_LENGTH),
        ("timestamp", timestamp, MAX_TIMESTAMP_LENGTH),
    ):
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > limit or "\x00" in value:
            return f"{name} is not a string of at most {limit} characters"
    return None


def block_ids(content: Any, kind: str, key: str) -> tuple[str, ...]:
    """The `key` of every block of type `kind` in `content`."""
    if not isinstance(content, list):
        return ()
    ids = [b[key] for b in content if isinstance(b, dict) and b.get("type") == kind and isinstance(b.get(key), str)]
    return tuple(ids)


def is_blank(content: Any) -> bool:
    """True when content holds nothing the API accepts: no block but blank text."""
    if isinstance(content, str):
        return not content.strip()
    if not isinstance(content, list):
        return True
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") != "text" or str(block.get("text") or "").strip():
            return False
    return True


def repair_view(nodes: list[ChainNode]) -> tuple[list[ChainNode], list[tuple[ChainNode, str]]]:
    """Drop from a view what would make it an invalid API request; say why.

    Only the view changes (the lines stay in the transcript). Rules, applied
    until nothing changes: a message with blank content goes; a leading
    assistant turn goes (unless it opens with the API's compaction message, which the API
    takes in place of all before it); a tool_result answering no tool_use of the assistant
    turn just before goes; an assistant response (all pieces sharing its
    api_message_id) whose tool_use is not answered by the next user turn goes,
    unless it is the last turn (still pending).
    """
    kept = list(nodes)
    dropped: list[tuple[ChainNode, str]] = []
    while True:
        bad = _invalid(kept)
        if not bad:
            return kept, dropped
        dropped.extend((n, bad[n.uuid]) for n in kept if n.uuid in bad)
        kept = [n for n in kept if n.uuid not in bad]


def _turns(nodes: Iterable[ChainNode]) -> list[list[ChainNode]]:
    """Sent nodes grouped into API turns (consecutive same-role messages merge)."""
    turns: list[list[ChainNode]] = []
    for node in nodes:
        if not node.is_sent:
            continue
        if turns and turns[-1][0].role == node.role:
            turns[-1].append(node)
        else:
            turns.append([node])
    return turns


def _invalid(nodes: list[ChainNode]) -> dict[str, str]:
    """uuid -> reason for every node the current view cannot keep."""
    bad = _blank_nodes(nodes)
    if bad:
        return bad
    turns = _turns(nodes)
    if turns and turns[0][0].role == "assistant" and not turns[0][0].is_compact_summary:
        return {n.uuid: "leading assistant message" for n in turns[0]}
    for i, turn in enumerate(turns):
        if turn[0].role == "user":
            previous = turns[i - 1] if i > 0 else []
            bad.update(_orphan_results(turn, previous))
        elif i + 1 < len(turns):
            bad.update(_unanswered_uses(turn, turns[i + 1]))
    return bad


def _blank_nodes(nodes: list[ChainNode]) -> dict[str, str]:
    """Sent nodes whose content is blank (a whitespace-only piece of a response too)."""
    bad: dict[str, str] = {}
    for node in nodes:
        if node.is_sent and node.blank:
            bad[node.uuid] = "blank content (the API refuses empty or whitespace-only text)"
    return bad


def _orphan_results(turn: list[ChainNode], previous: list[ChainNode]) -> dict[str, str]:
    """User nodes whose tool_result answers nothing offered just before (or twice)."""
    offered = {u for n in previous for u in n.tool_use_ids}
    answered: set[str] = set()
    bad: dict[str, str] = {}
    for node in turn:
        ids = node.tool_result_ids
        if any(r not in offered for r in ids):
            bad[node.uuid] = "tool_result without its tool_use in the preceding assistant message"
        elif any(r in answered for r in ids) or len(set(ids)) != len(ids):
            bad[node.uuid] = "second tool_result for the same tool_use"
        else:
            answered.update(ids)
    return bad


def _unanswered_uses(turn: list[ChainNode], following: list[ChainNode]) -> dict[str, str]:
    """Assistant responses with a tool_use the next user turn does not answer."""
    answered = {r for n in following for r in n.tool_result_ids}
    failing = {n.api_message_id or n.uuid for n in turn if any(u not in answered for u in n.tool_use_ids)}
    return {
        n.uuid: "tool_use without a tool_result (interrupted)" for n in turn if (n.api_message_id or n.uuid) in failing
    }


def drop_warnings(path: str, dropped: list[tuple[ChainNode, str]], what: str) -> list[str]:
    """One `file:line: ...` warning per node dropped from a view."""
    return [f"{where(path, n.line_no)}: {n.uuid} left out of the {what}: {reason}" for n, reason in dropped]


class LineStream(ABC):
    """The common `lines()` of an importer: decode each physical line with `_line`, keep its facts."""

    path: str
    nodes: list[ChainNode]
    warnings: list[str]
    #: Read only this many bytes of the file (None: all of it); see `read_raw_lines`.
    limit: int | None = None
    #: A file still being written: the importer may leave an unsettled tail for the next import.
    hold_tail: bool = False
    #: Where the next `lines()` starts (byte offset, lines before it): a live import continues from here.
    position: tuple[int, int] = (0, 0)
    #: False when lines were left unread before `position`: the next import must start over.
    resumable: bool = True

    @abstractmethod
    def _line(self, line_no: int, raw: bytes) -> ImportedLine:
        """One physical line as an ImportedLine (never raises for bad input: it marks the line)."""

    def lines(self) -> Iterator[ImportedLine]:
        """Each physical line as an `ImportedLine`, in file order."""
        return self.stream(read_raw_lines(self.path, self.limit, self.position))

    def stream(self, raws: Iterable[tuple[int, bytes]]) -> Iterator[ImportedLine]:
        """(line number, exact bytes) pairs continuing from `position` as `ImportedLine`s, keeping their facts.

        `lines()` feeds it the file; a caller holding the lines elsewhere (the Agent SDK adapter's
        stored entries) feeds them itself, so both go through the one interpreter.
        """
        for line_no, raw in raws:
            line = self._line(line_no, raw)
            if line.warning:
                self.warnings.append(line.warning)
            if line.node is not None:
                self.nodes.append(line.node)
            self.position = (self.position[0] + len(raw), line_no)
            yield line
