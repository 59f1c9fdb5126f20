"""Import of sessionstore's own `export --format jsonl` files (the round trip).

Each line is one transcript message: {seq, uuid, parent_uuid, type, subtype,
timestamp, api_message_id, usage, is_meta, is_compact_summary, metadata,
tokens, message: {role, content}}, plus `"in_view": false` on a message no
view showed. Messages are taken exactly as written
(`seq` and `tokens` are recomputed by the store and come out the same), so
exporting the imported session gives the same bytes.

The export holds the transcript, not the views, so the views are rebuilt
from the compaction boundaries, in file order:

- before the first boundary the view is every message;
- a `compact_boundary` closes the current view (that is the view before it)
  and starts a new one from its metadata: for kind `partial-from` the
  preserved segment sits between the boundary and its summary, otherwise the
  order is [boundary, summary, preserved head..tail]; re-injected
  attachments follow the summary, then the messages appended while the
  summary was written (the view before it beyond what it summarized or
  kept), then every later message;
- the summary of a boundary is the next `is_compact_summary` message;
- a line marked `"in_view": false` (a message no view showed, e.g. an imported
  file's line off the chain its tool would resume) joins no view;
- a `snip_marker` takes the messages its metadata lists (`removed_uuids`)
  out of the view, as the snip did, and stays at the end of it; a
  `microcompact_boundary` marks the results it lists (`cleared_tool_use_ids`)
  cleared in every later view (`ImportPlan.cleared`, applied by the writer).

Every view goes through `repair_view`, so what would make it an invalid API
request is left out of the view (never out of the transcript), with a warning.
Claude Code sessions exported from the store carry `compactMetadata` instead
of our boundary metadata; both are read.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Final, Sequence

from sessionstore.storage.core.errors import InvalidMessage
from sessionstore.storage.core.types import BOUNDARY_SUBTYPE, ENVELOPE_KEYS
from sessionstore.storage.records.validate import normalize
from .plan import (
    TITLE_LENGTH,
    LineStream,
    BoundaryFacts,
    ChainNode,
    ChainResult,
    ImportedBoundary,
    ImportedLine,
    ImportPlan,
    block_ids,
    decoded_entry,
    drop_warnings,
    is_blank,
    repair_view,
    where,
)

SOURCE: Final = "jsonl"
#: Compaction kinds that keep a prefix: [boundary, kept..., summary].
PREFIX_KINDS = frozenset({"partial-from"})
#: Kinds whose kept suffix leaves out earlier boundaries and summaries.
SUFFIX_FILTERED_KINDS = frozenset({"partial-up_to"})
#: The marker snip leaves behind; its metadata lists the messages it took out of the view.
SNIP_SUBTYPE = "snip_marker"
#: The marker microcompact leaves behind; its metadata lists the tool results it cleared.
CLEAR_SUBTYPE = "microcompact_boundary"
#: The longest source id and model name a header may give (the columns' sizes); longer ones are ignored.
SOURCE_ID_LENGTH = 500
MODEL_LENGTH = 200
#: How the identity made from an export's first line starts (a session made here has no source id of its own).
JSONL_IDENTITY = "jsonl-"
#: How far back a streamed response's earlier piece is looked for (tool results in between).
REGROUP_WINDOW = 64


def looks_native(entry: Any) -> bool:
    """True when a decoded line has the export's shape (used to detect the format)."""
    if not isinstance(entry, dict):
        return False
    message = entry.get("message")
    return "seq" in entry and "uuid" in entry and "parent_uuid" in entry and isinstance(message, dict)


@dataclass(frozen=True, slots=True)
class CompactionFacts:
    """What a boundary's metadata says beyond `BoundaryFacts`: the kind and how much it summarized."""

    kind: str
    messages_summarized: int | None


class NativeImport(LineStream):
    """One streaming import: iterate `lines()` once, then call `plan()`."""

    source = SOURCE

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.nodes: list[ChainNode] = []
        self.warnings: list[str] = []
        self.compactions: dict[str, CompactionFacts] = {}
        self.reinjected: set[str] = set()
        self.snips: dict[str, frozenset[str]] = {}
        self.cleared: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._identity: str | None = None
        self._title: str | None = None
        self._cwd: str | None = None
        self._model: str | None = None
        self._window: int | None = None
        #: The facts the export's `session` header (first line) gave: they win over what messages suggest.
        self._given: set[str] = set()

    def plan(self) -> ImportPlan:
        """The plan (without lines) once `lines()` has been consumed."""
        chain = build_chain(self.nodes, self.compactions, self.reinjected, path=self.path, snips=self.snips)
        return ImportPlan(
            source=SOURCE,
            path=self.path,
            source_session_id=self._identity,
            title=self._title,
            cwd=self._cwd,
            model=self._model,
            context_window=self._window,
            parent_source_session_id=None,
            lines=[],
            boundaries=chain.boundaries,
            active_chain=chain.active_chain,
            warnings=self.warnings + chain.warnings,
            cleared=self.cleared,
        )

    def _line(self, line_no: int, raw: bytes) -> ImportedLine:
        """Classify one physical line: a message, a blank side line, or a bad line."""
        entry = decoded_entry(self.path, line_no, raw)
        if isinstance(entry, ImportedLine):
            return entry
        here = where(self.path, line_no)
        etype = entry.get("type") if isinstance(entry.get("type"), str) else ""
        if not looks_native(entry):
            return ImportedLine(
                line_no,
                raw,
                "bad",
                str(etype),
                warning=f"{here}: not a sessionstore export line (no seq, uuid or message)",
            )
        message, problem = build_message(entry)
        if message is None:
            return ImportedLine(line_no, raw, "side", str(etype), warning=f"{here}: {problem}")
        uuid = message["uuid"]
        if uuid in self._seen:
            return ImportedLine(
                line_no,
                raw,
                "side",
                str(etype),
                warning=f"{here}: duplicate uuid {uuid} (first on line {self._seen[uuid]})",
            )
        self._seen[uuid] = line_no
        if len(self._seen) == 1:
            self._read_header(entry.get("session"))
        self._identity = self._identity or session_identity(raw)
        self._observe(message)
        node = self._node(line_no, message, in_view=entry.get("in_view") is not False)
        return ImportedLine(line_no, raw, "message", message["type"], message=message, node=node)

    def _read_header(self, header: Any) -> None:
        """The session facts an export's first line carries (`export_jsonl`): source id, title, cwd, model, window."""
        if not isinstance(header, dict):
            return
        text = {k: v if isinstance(v, str) and v.strip() else None for k, v in header.items()}
        limits = {"source_id": SOURCE_ID_LENGTH, "model": MODEL_LENGTH}
        text = {k: None if v is None or len(v) > limits.get(k, len(v)) else v for k, v in text.items()}
        self._identity = text.get("source_id")
        self._title, self._cwd, self._model = text.get("title"), text.get("cwd"), text.get("model")
        self._given = {k for k in ("title", "cwd", "model") if text.get(k) is not None}
        window = header.get("context_window")
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self._window = window

    def _observe(self, message: dict[str, Any]) -> None:
        """Header facts: title (first prompt), cwd and model from metadata (unless the export's header gave them)."""
        meta = message["metadata"]
        cwd, model = meta.get("cwd"), meta.get("model")
        if self._cwd is None and isinstance(cwd, str) and cwd:
            self._cwd = cwd
        if (
            "model" not in self._given
            and message["role"] == "assistant"
            and isinstance(model, str)
            and model
            and not model.startswith("<")
        ):
            self._model = model
        if self._title is None and message["type"] == "user" and not message["is_meta"]:
            self._title = _prompt_title(message["content"])

    def _node(self, line_no: int, message: dict[str, Any], *, in_view: bool = True) -> ChainNode:
        """The graph facts of one message; boundary and attachment facts kept on the side.

        `in_view` is False for a line the export marked `"in_view":false` (a message no view showed).
        """
        role, content, meta = message["role"], message["content"], message["metadata"]
        facts = None
        if role == "system" and message["subtype"] == BOUNDARY_SUBTYPE:
            facts = boundary_facts(meta)
            self.compactions[message["uuid"]] = compaction_facts(meta)
        if message["type"] == "attachment" and meta.get("reinjected"):
            self.reinjected.add(message["uuid"])
        if role == "system" and message["subtype"] == SNIP_SUBTYPE and isinstance(meta.get("removed_uuids"), list):
            self.snips[message["uuid"]] = frozenset(u for u in meta["removed_uuids"] if isinstance(u, str))
        if role == "system" and message["subtype"] == CLEAR_SUBTYPE:
            for tool_id in meta.get("cleared_tool_use_ids") or ():
                if isinstance(tool_id, str):
                    self.cleared.setdefault(tool_id, len(self.compactions))
        return ChainNode(
            line_no=line_no,
            uuid=sys.intern(message["uuid"]),
            parent=message["parent_uuid"],
            role=role,
            entry_type=message["type"],
            timestamp=message["timestamp"] or "",
            sidechain=bool(meta.get("isSidechain")),
            api_message_id=message["api_message_id"],
            tool_use_ids=block_ids(content, "tool_use", "id") if role == "assistant" else (),
            tool_result_ids=block_ids(content, "tool_result", "tool_use_id") if role == "user" else (),
            blank=role != "system" and is_blank(content),
            in_view=in_view and not meta.get("isApiErrorMessage"),
            is_compact_summary=message["is_compact_summary"],
            boundary=facts,
        )


def session_identity(first_message_line: bytes) -> str:
    """What recognizes a copy of the same exported session: a digest of its first message line.

    Uuids alone do not do (Codex imports number theirs `codex-<line>` in
    every session); the first line also holds its timestamp and content.
    """
    return JSONL_IDENTITY + hashlib.sha256(first_message_line.rstrip(b"\r\n")).hexdigest()[:32]


def build_message(entry: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The append-shaped message of an export line, or None and why the store would refuse it."""
    api = entry["message"]
    message = {key: entry.get(key) for key in ENVELOPE_KEYS}
    message["role"] = api.get("role")
    message["content"] = api.get("content")
    if not isinstance(message["uuid"], str) or not message["uuid"].strip():
        return None, "message without a uuid"
    if "content" not in api:
        return None, "message without content"
    try:
        normalized = normalize(message, sendable=False, allow_unknown_blocks=True)
    except InvalidMessage as exc:
        return None, f"not importable as a message: {exc}"
    message["type"] = normalized.type
    message["metadata"] = normalized.metadata
    message["is_meta"] = normalized.is_meta
    message["is_compact_summary"] = normalized.is_compact_summary
    return message, ""


def boundary_facts(meta: dict[str, Any]) -> BoundaryFacts:
    """Trigger, pre-compaction tokens and preserved segment from our metadata or Claude Code's."""
    found = meta.get("compactMetadata")
    theirs: dict[str, Any] = found if isinstance(found, dict) else {}
    trigger = meta.get("trigger") or theirs.get("trigger")
    pre = meta.get("pre_tokens", theirs.get("preTokens"))
    return BoundaryFacts(
        trigger=trigger if isinstance(trigger, str) and trigger else "auto",
        pre_tokens=pre if isinstance(pre, int) and not isinstance(pre, bool) else None,
        preserved_segment=_segment(meta.get("preserved_segment"), "head_uuid", "anchor_uuid", "tail_uuid")
        or _segment(theirs.get("preservedSegment"), "headUuid", "anchorUuid", "tailUuid"),
    )


def compaction_facts(meta: dict[str, Any]) -> CompactionFacts:
    """The kind (full when unsaid) and the summarized count of a boundary."""
    kind = meta.get("kind")
    count = meta.get("messages_summarized")
    return CompactionFacts(
        kind=kind if isinstance(kind, str) and kind else "full",
        messages_summarized=count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None,
    )


def _segment(value: Any, head: str, anchor: str, tail: str) -> dict[str, str] | None:
    """{head_uuid, anchor_uuid, tail_uuid} when all three are named."""
    if not isinstance(value, dict):
        return None
    segment = {"head_uuid": value.get(head), "anchor_uuid": value.get(anchor), "tail_uuid": value.get(tail)}
    if not all(isinstance(v, str) and v for v in segment.values()):
        return None
    return {k: str(v) for k, v in segment.items()}


def _prompt_title(content: Any) -> str | None:
    """The first line of a user prompt (not tool results, not injected markup)."""
    if isinstance(content, list):
        content = next((b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"), None)
    if not isinstance(content, str) or not content.strip() or content.lstrip().startswith("<"):
        return None
    return content.strip().splitlines()[0][:TITLE_LENGTH]


@dataclass(slots=True)
class _Pending:
    """A boundary whose new view is still being laid out (summary, attachments, late messages)."""

    boundary: ImportedBoundary
    at: int
    after_summary: list[ChainNode]
    late: list[ChainNode]
    summary_placed: bool = False


@dataclass(slots=True)
class _Split:
    """The view before a boundary cut into what it kept, summarized, and what arrived meanwhile."""

    kept: list[ChainNode]
    summarized: list[ChainNode]
    late: list[ChainNode] = field(default_factory=list)
    note: str | None = None


def build_chain(
    nodes: Sequence[ChainNode],
    compactions: dict[str, CompactionFacts],
    reinjected: set[str],
    *,
    path: str = "",
    snips: dict[str, frozenset[str]] | None = None,
) -> ChainResult:
    """The active view and every boundary with the view before it, from the messages in file order.

    Claude Code sidechain messages (sub-agent turns written inline) stay out
    of the views, unless the whole file is one sub-agent's conversation.
    """
    builder = _ViewBuilder(compactions, reinjected, path, snips or {})
    main_thread = any(not n.sidechain for n in nodes)
    for node in nodes:
        if not (node.sidechain and main_thread):
            builder.feed(node)
    return builder.finish()


class _ViewBuilder:
    """Replays the transcript, keeping the view as each compaction left it."""

    def __init__(
        self, compactions: dict[str, CompactionFacts], reinjected: set[str], path: str, snips: dict[str, frozenset[str]]
    ) -> None:
        self.compactions = compactions
        self.reinjected = reinjected
        self.snips = snips
        self.path = path
        self.view: list[ChainNode] = []
        self.pending: _Pending | None = None
        self.boundaries: list[ImportedBoundary] = []
        self.warnings: list[str] = []

    def feed(self, node: ChainNode) -> None:
        """Place one transcript message in the view being built."""
        if node.boundary is not None:
            self._settle()
            self._compact(node)
            return
        removed = self.snips.get(node.uuid)
        if removed is not None:
            self._settle()
            self.view = [n for n in self.view if n.uuid not in removed]
        if not node.in_view:
            return
        pending = self.pending
        if pending is not None and self._placed_by_rewrite(pending, node):
            return
        if pending is not None and pending.summary_placed:
            self._settle()
        elif pending is not None:
            self._before_summary(pending, node)
            return
        self._append(node)

    def _before_summary(self, pending: _Pending, node: ChainNode) -> None:
        """A message the rewrite wrote between its boundary and its summary stays there, in file order.

        (A Codex compaction's replacement history: the kept user turns, then the summary.)
        """
        self.view.insert(pending.at, node)
        pending.at += 1

    def _append(self, node: ChainNode) -> None:
        """Append, keeping the pieces of one streamed response together ahead of their results.

        Claude Code writes a parallel tool call as piece, result, piece,
        result; the API needs every piece of the response before the results.
        The store never records that order itself, so this only regroups
        sessions that came from Claude Code.
        """
        at = self._response_end(node) if node.role == "assistant" and node.api_message_id else None
        if at is None:
            self.view.append(node)
        else:
            self.view.insert(at, node)

    def _response_end(self, node: ChainNode) -> int | None:
        """The index after the last earlier piece of `node`'s response when only tool results follow it."""
        for i in range(len(self.view) - 1, max(len(self.view) - REGROUP_WINDOW, 0) - 1, -1):
            earlier = self.view[i]
            if earlier.role == "assistant" and earlier.api_message_id == node.api_message_id:
                return i + 1 if i + 1 < len(self.view) else None
            if earlier.role != "user" or not earlier.tool_result_ids:
                return None
        return None

    def finish(self) -> ChainResult:
        """The active view (repaired) and the boundaries."""
        self._settle()
        active, dropped = repair_view(self.view)
        return ChainResult(
            active_chain=[n.uuid for n in active],
            boundaries=self.boundaries,
            warnings=self.warnings + drop_warnings(self.path, dropped, "active view"),
        )

    def _placed_by_rewrite(self, pending: _Pending, node: ChainNode) -> bool:
        """Put the summary (then the kept suffix) or a re-injected attachment where the rewrite put it."""
        if not pending.summary_placed and node.is_compact_summary:
            placed = [node, *pending.after_summary]
            self.view[pending.at : pending.at] = placed
            pending.at += len(placed)
            pending.summary_placed = True
            pending.boundary.summary_uuid = node.uuid
            return True
        if pending.summary_placed and node.uuid in self.reinjected:
            self.view.insert(pending.at, node)
            pending.at += 1
            return True
        return False

    def _settle(self) -> None:
        """Finish the pending boundary: a kept suffix without a summary, then the late messages."""
        pending = self.pending
        if pending is None:
            return
        placed = ([] if pending.summary_placed else pending.after_summary) + pending.late
        self.view[pending.at : pending.at] = placed
        self.pending = None

    def _compact(self, node: ChainNode) -> None:
        """Close the current view at a boundary and open the one it starts."""
        facts = node.boundary
        assert facts is not None
        before, dropped = repair_view(self.view)
        self.warnings.extend(drop_warnings(self.path, dropped, f"view before boundary {node.uuid}"))
        info = self.compactions.get(node.uuid, CompactionFacts("full", None))
        prefix = info.kind in PREFIX_KINDS or bool(
            facts.preserved_segment and facts.preserved_segment["anchor_uuid"] == node.uuid
        )
        split = split_view(before, facts.preserved_segment, info, prefix=prefix)
        if split.note:
            self.warnings.append(f"{where(self.path, node.line_no)}: {split.note}")
        boundary = ImportedBoundary(
            boundary_uuid=node.uuid,
            summary_uuid=None,
            trigger=facts.trigger,
            kind=info.kind,
            pre_tokens=facts.pre_tokens,
            preserved_segment=dict(facts.preserved_segment) if facts.preserved_segment else None,
            view_before=[n.uuid for n in before],
            summarized=[n.uuid for n in split.summarized],
        )
        self.boundaries.append(boundary)
        self.view = [node, *split.kept] if prefix else [node]
        self.pending = _Pending(boundary, len(self.view), [] if prefix else split.kept, split.late)


def split_view(
    before: list[ChainNode], segment: dict[str, str] | None, info: CompactionFacts, *, prefix: bool
) -> _Split:
    """What a compaction kept, summarized, and found appended meanwhile, from its metadata.

    A rewrite is computed from a snapshot; messages appended while the summary
    was written are in the view before the boundary but neither summarized
    nor kept: they follow the rewrite's own messages in the new view.
    """
    count = info.messages_summarized
    if segment is None:
        summarized = before if count is None else before[:count]
        return _Split([], summarized, before[len(summarized) :])
    index = {n.uuid: i for i, n in enumerate(before)}
    head, tail = index.get(segment["head_uuid"]), index.get(segment["tail_uuid"])
    if head is None or tail is None or head > tail:
        return _Split(
            [],
            before,
            [],
            note="preserved segment not found in the view before the boundary; nothing of it is kept in the view after",
        )
    kept = before[head : tail + 1]
    if prefix:
        rest = before[tail + 1 :]
        summarized = before[:head] + (rest if count is None else rest[: max(count - head, 0)])
        return _Split(kept, summarized, rest[len(summarized) - head :])
    if info.kind in SUFFIX_FILTERED_KINDS:
        kept = [n for n in kept if n.boundary is None and not n.is_compact_summary]
    summarized = before[:head] if count is None else before[: min(count, head)]
    return _Split(kept, summarized, before[tail + 1 :])
