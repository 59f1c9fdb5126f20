"""Import of Claude Code JSONL transcripts (`~/.claude/projects/<project>/*.jsonl`).

A transcript is a DAG of entries linked by `parentUuid`. Conversation entries
(user, assistant, system, attachment) become messages; everything else
(progress, file-history-snapshot, queue-operation, summary, custom-title, ...)
is a side line. The active chain is what Claude Code would resume with: the
latest non-sidechain leaf, walked back through its parents (and through side
entries, which newer versions put inside the chain), stopping at a compact
boundary. Streaming: `lines()` yields one line at a time and keeps only the
small `ChainNode` facts; `plan()` then builds the chain from those.
"""

from __future__ import annotations

import json
import os
import re
import sys
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from sessionstore.storage.codecs.fastjson import spaced_dumps
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
    content_problem,
    decoded_entry,
    drop_warnings,
    envelope_problem,
    is_blank,
    repair_view,
    where,
)

CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment"})

#: Non-conversation entry types known to carry no message (kept as side lines, no warning).
SIDE_TYPES = frozenset(
    {
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "summary",
        "custom-title",
        "ai-title",
        "tag",
        "agent-name",
        "last-prompt",
        "mode",
        "pr-link",
    }
)

#: Top-level keys the message envelope already carries (not repeated in metadata).
_ENVELOPE_KEYS = frozenset(
    {"type", "message", "uuid", "parentUuid", "timestamp", "isMeta", "isCompactSummary", "subtype", "sessionId"}
)

#: Entry keys a message's metadata leaves out: the envelope's and the attachment (and a system entry's content).
_NOT_METADATA = _ENVELOPE_KEYS | {"attachment"}
_NOT_METADATA_SYSTEM = _NOT_METADATA | {"content"}

#: API message fields copied into an assistant message's metadata.
_API_METADATA_KEYS = ("model", "stop_reason", "stop_sequence")

#: Metadata values whose JSON is longer than this are left out (the raw line keeps them).
METADATA_VALUE_LIMIT = 4096


class ClaudeCodeImport(LineStream):
    """One streaming import: iterate `lines()` once, then call `plan()`."""

    source = "claude-code"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.nodes: list[ChainNode] = []
        self.warnings: list[str] = []
        self._seen: dict[str, int] = {}
        self._header = _Header()

    def plan(self) -> ImportPlan:
        """The plan (without lines) once `lines()` has been consumed."""
        chain = build_chain(self.nodes, path=self.path)
        parent, session_id = self._session_ids()
        return ImportPlan(
            source="claude-code",
            path=self.path,
            source_session_id=session_id,
            title=self._header.title(set(self._seen)),
            cwd=self._header.cwd,
            model=self._header.model,
            parent_source_session_id=parent,
            lines=[],
            boundaries=chain.boundaries,
            active_chain=chain.active_chain,
            warnings=self.warnings + self._summary_warnings() + chain.warnings,
        )

    def _summary_warnings(self) -> list[str]:
        """One warning per summary entry naming a leaf outside the file (it titles nothing)."""
        return [
            f"{where(self.path, line_no)}: summary entry names leaf {leaf}, which is not in this file; "
            "kept as a side line, not used as the title"
            for line_no, leaf in self._header.foreign_summaries(set(self._seen))
        ]

    def _session_ids(self) -> tuple[str | None, str]:
        """(parent session id, this file's session id); sub-agent files get a parent."""
        path = Path(self.path)
        header = self._header
        in_subagents = path.parent.name == "subagents"
        is_agent = in_subagents or header.agent_id is not None or header.only_sidechain
        own = header.session_id or path.stem
        if not is_agent:
            return None, own
        parent = header.session_id or (path.parent.parent.name if in_subagents else None)
        agent = f"agent-{header.agent_id}" if header.agent_id else path.stem
        return parent, f"{parent}/{agent}" if parent else agent

    def _line(self, line_no: int, raw: bytes) -> ImportedLine:
        """Classify one physical line."""
        entry = decoded_entry(self.path, line_no, raw)
        if isinstance(entry, ImportedLine):
            return entry
        etype = entry.get("type")
        etype = etype if isinstance(etype, str) else ""
        self._header.observe(entry, etype, line_no)
        if etype in CONVERSATION_TYPES:
            return self._conversation(line_no, raw, entry, etype)
        warning = None
        if etype not in SIDE_TYPES:
            warning = f"{where(self.path, line_no)}: unknown entry type {etype!r}, kept as a side line"
        return ImportedLine(line_no, raw, "side", etype, warning=warning, node=self._side_node(line_no, entry, etype))

    def _side_node(self, line_no: int, entry: dict[str, Any], etype: str) -> ChainNode | None:
        """The graph node of a side entry that sits in the parent chain (has a uuid)."""
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or not uuid or uuid in self._seen:
            return None
        self._seen[uuid] = line_no
        return ChainNode(
            line_no=line_no,
            uuid=sys.intern(uuid),
            parent=_intern(entry.get("parentUuid")),
            role=None,
            entry_type=etype,
            timestamp=_text(entry.get("timestamp")),
            sidechain=bool(entry.get("isSidechain")),
        )

    def _conversation(self, line_no: int, raw: bytes, entry: dict[str, Any], etype: str) -> ImportedLine:
        """A user/assistant/system/attachment entry: a message, or a side line saying why not."""
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            return ImportedLine(
                line_no, raw, "side", etype, warning=f"{where(self.path, line_no)}: {etype} entry without a uuid"
            )
        first = self._seen.get(uuid)
        if first is not None:
            return ImportedLine(
                line_no,
                raw,
                "side",
                etype,
                warning=f"{where(self.path, line_no)}: duplicate uuid {uuid} (first on line {first})",
            )
        message, problem = build_message(entry, etype, len(raw))
        if message is None:
            node = self._side_node(line_no, entry, etype)
            return ImportedLine(
                line_no, raw, "side", etype, warning=f"{where(self.path, line_no)}: {problem}", node=node
            )
        self._seen[uuid] = line_no
        return ImportedLine(line_no, raw, "message", etype, message=message, node=_node(line_no, entry, etype, message))


def build_message(entry: dict[str, Any], etype: str, size: int = 0) -> tuple[dict[str, Any] | None, str]:
    """The append-shaped message of a conversation entry, or None and the reason."""
    role, content, api = _role_content(entry, etype)
    if role is None:
        return None, f"{etype} entry without a usable message"
    problem = content_problem(content) or envelope_problem(
        entry.get("uuid"), entry.get("parentUuid"), entry.get("timestamp")
    )
    if problem:
        return None, f"{etype} entry not importable as a message: {problem}"
    subtype = entry.get("subtype") if etype == "system" else None
    api_id = usage = None
    if role == "assistant":
        api_id, usage = api.get("id"), api.get("usage")
    return {
        "role": role,
        "content": content,
        "uuid": entry["uuid"],
        "parent_uuid": entry.get("parentUuid"),
        "type": etype,
        "subtype": subtype if isinstance(subtype, str) else None,
        "timestamp": entry.get("timestamp"),
        "api_message_id": api_id if isinstance(api_id, str) else None,
        "usage": usage if isinstance(usage, dict) else None,
        "is_meta": bool(entry.get("isMeta")),
        "is_compact_summary": bool(entry.get("isCompactSummary")),
        "metadata": _metadata(entry, etype, api, size),
    }, ""


def _role_content(entry: dict[str, Any], etype: str) -> tuple[str | None, Any, dict[str, Any]]:
    """(role, content, API message object) of a conversation entry."""
    if etype == "system":
        content = entry.get("content", "")
        return "system", content if isinstance(content, (str, list)) else json.dumps(content), {}
    if etype == "attachment":
        return "user", attachment_text(entry.get("attachment")), {}
    api = entry.get("message")
    if not isinstance(api, dict) or "content" not in api:
        return None, None, {}
    if api.get("role", etype) != etype:
        return None, None, {}
    return etype, api["content"], api


def attachment_text(attachment: Any) -> str:
    """An attachment as the text a user message carries."""
    if isinstance(attachment, dict):
        for key in ("content", "text", "prompt"):
            value = attachment.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return json.dumps(attachment, ensure_ascii=False)


def _metadata(entry: dict[str, Any], etype: str, api: dict[str, Any], size: int) -> dict[str, Any]:
    """Entry fields a viewer needs beyond the envelope; oversized values left out."""
    consumed = _NOT_METADATA_SYSTEM if etype == "system" else _NOT_METADATA
    meta = {k: v for k, v in entry.items() if k not in consumed}
    if api:
        for key in _API_METADATA_KEYS:
            value = api.get(key)
            if value is not None:
                meta[key] = value
    attachment = entry.get("attachment")
    if isinstance(attachment, dict):
        meta["attachment_type"] = attachment.get("type")
    if size > METADATA_VALUE_LIMIT:
        omitted = [k for k, v in meta.items() if _too_long(v)]
        for key in omitted:
            del meta[key]
        if omitted:
            meta["omitted"] = omitted
    return meta


def _too_long(value: Any) -> bool:
    """True when `value` as JSON (a string: its length) is longer than METADATA_VALUE_LIMIT."""
    if isinstance(value, str):
        return len(value) > METADATA_VALUE_LIMIT
    if not isinstance(value, (dict, list)):
        return False
    if _outer_strings_length(value) > METADATA_VALUE_LIMIT:
        return True
    return _json_size(value) > METADATA_VALUE_LIMIT


def _outer_strings_length(value: dict[str, Any] | list[Any]) -> int:
    """Characters of the strings in `value`'s first two levels: a lower bound of its JSON size.

    The JSON holds each of them whole (escaping only lengthens them), so an
    oversized tool result is recognized without encoding it.
    """
    total = 0
    for item in value.values() if isinstance(value, dict) else value:
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (dict, list)):
            total += sum(len(s) for s in (item.values() if isinstance(item, dict) else item) if isinstance(s, str))
    return total


def _json_size(value: Any) -> int:
    """Characters of `value` as `json.dumps(value, ensure_ascii=False)` writes it."""
    return len(spaced_dumps(value))


def _node(line_no: int, entry: dict[str, Any], etype: str, message: dict[str, Any]) -> ChainNode:
    """The graph facts of a conversation entry."""
    role = message["role"]
    content = message["content"]
    return ChainNode(
        line_no=line_no,
        uuid=sys.intern(message["uuid"]),
        parent=_intern(entry.get("parentUuid")),
        role=role,
        entry_type=etype,
        timestamp=_text(entry.get("timestamp")),
        logical_parent=_intern(entry.get("logicalParentUuid")),
        sidechain=bool(entry.get("isSidechain")),
        api_message_id=_intern(message["api_message_id"]),
        tool_use_ids=block_ids(content, "tool_use", "id") if role == "assistant" else (),
        tool_result_ids=block_ids(content, "tool_result", "tool_use_id") if role == "user" else (),
        blank=role != "system" and is_blank(content),
        in_view=not entry.get("isApiErrorMessage"),
        is_compact_summary=bool(entry.get("isCompactSummary")),
        boundary=_boundary_facts(entry) if message["subtype"] == "compact_boundary" else None,
    )


def _boundary_facts(entry: dict[str, Any]) -> BoundaryFacts:
    """Trigger, preTokens and preserved segment from `compactMetadata`."""
    meta = entry.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    pre = meta.get("preTokens")
    trigger = meta.get("trigger")
    return BoundaryFacts(
        trigger=trigger if isinstance(trigger, str) and trigger else "auto",
        pre_tokens=pre if isinstance(pre, int) else None,
        preserved_segment=_segment(meta.get("preservedSegment")),
        kind=_kind(meta.get(KIND_FIELD)),
    )


#: The `compactMetadata` field our Claude Code export names a compaction's kind in (Claude Code ignores it).
KIND_FIELD = "sessionstoreKind"
#: Kinds a boundary line may name.
KINDS = frozenset({"full", "partial-from", "partial-up_to", "session-memory", "collapse"})


def _kind(value: Any) -> str | None:
    """A compaction kind named by the line, if it is one of ours."""
    return value if isinstance(value, str) and value in KINDS else None


def _segment(value: Any) -> dict[str, str] | None:
    """A preservedSegment as {head_uuid, anchor_uuid, tail_uuid}, if complete."""
    if not isinstance(value, dict):
        return None
    keys = {"head_uuid": "headUuid", "anchor_uuid": "anchorUuid", "tail_uuid": "tailUuid"}
    segment = {ours: value.get(theirs) for ours, theirs in keys.items()}
    if not all(isinstance(v, str) and v for v in segment.values()):
        return None
    return {ours: str(v) for ours, v in segment.items()}


def _intern(value: Any) -> str | None:
    return sys.intern(value) if isinstance(value, str) and value else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class _Header:
    """Session-level facts gathered while streaming (ids, cwd, model, title)."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.agent_id: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self.custom_title: str | None = None
        #: (line, summary text, leafUuid) of every `summary` entry.
        self.summaries: list[tuple[int, str, str | None]] = []
        self.first_prompt: str | None = None
        self.first_side_prompt: str | None = None
        self.seen_conversation = False
        self.seen_main = False

    @property
    def only_sidechain(self) -> bool:
        """True when every conversation entry is a sidechain one (a sub-agent file)."""
        return self.seen_conversation and not self.seen_main

    def observe(self, entry: dict[str, Any], etype: str, line_no: int = 0) -> None:
        """Take what the header needs from one entry."""
        self.session_id = self.session_id or _str_or_none(entry.get("sessionId"))
        self.agent_id = self.agent_id or _str_or_none(entry.get("agentId"))
        self.cwd = self.cwd or _str_or_none(entry.get("cwd"))
        if etype == "custom-title":
            self.custom_title = _str_or_none(entry.get("customTitle")) or self.custom_title
        elif etype == "summary":
            text = _str_or_none(entry.get("summary"))
            if text:
                self.summaries.append((line_no, text, _str_or_none(entry.get("leafUuid"))))
        elif etype in CONVERSATION_TYPES:
            self._observe_conversation(entry, etype)

    def _observe_conversation(self, entry: dict[str, Any], etype: str) -> None:
        sidechain = bool(entry.get("isSidechain"))
        self.seen_conversation = True
        self.seen_main = self.seen_main or not sidechain
        api = entry.get("message")
        if not isinstance(api, dict):
            return
        model = api.get("model")
        if etype == "assistant" and isinstance(model, str) and not model.startswith("<"):
            self.model = model
        if etype != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
            return
        if sidechain:
            if self.first_side_prompt is None:
                self.first_side_prompt = _prompt_text(api.get("content"))
        elif self.first_prompt is None:
            self.first_prompt = _prompt_text(api.get("content"))

    def foreign_summaries(self, uuids: set[str]) -> list[tuple[int, str]]:
        """(line, leafUuid) of each summary entry whose leaf is not in the file."""
        return [(line, leaf or "(none)") for line, _text, leaf in self.summaries if leaf not in uuids]

    def title(self, uuids: set[str] | None = None) -> str | None:
        """The custom title, else the last summary of a leaf in the file, else the person's first prompt.

        Never a sidechain or meta entry, unless the file is one sub-agent's
        conversation (then its first prompt is what it was asked).
        """
        own = [text for _line, text, leaf in self.summaries if uuids is None or leaf in uuids]
        prompt = self.first_prompt if self.seen_main else self.first_side_prompt
        title = self.custom_title or (own[-1] if own else None) or prompt
        if not title:
            return None
        first = title.strip().splitlines()[0] if title.strip() else ""
        return first[:TITLE_LENGTH] or None


_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def _prompt_text(content: Any) -> str | None:
    """What a person typed: a prompt's text, or a slash command with its arguments; None for anything else."""
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        content = next((t for t in texts if isinstance(t, str)), None)
    if not isinstance(content, str) or not content.strip():
        return None
    command = _COMMAND_NAME.search(content)
    if command and command.group(1):
        args = _COMMAND_ARGS.search(content)
        name = command.group(1) if command.group(1).startswith("/") else "/" + command.group(1)
        return " ".join(part for part in (name, args.group(1).strip() if args else "") if part)
    if content.lstrip().startswith("<"):
        return None
    return content


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def build_chain(nodes: Sequence[ChainNode], *, path: str = "") -> ChainResult:
    """The active chain and the boundaries from the graph facts of a file."""
    graph = _Graph(nodes, path)
    active: list[ChainNode] = []
    dropped: list[tuple[ChainNode, str]] = []
    leaf = graph.leaf()
    if leaf is not None:
        active, dropped = graph.view(leaf.uuid, before_line=sys.maxsize)
    boundaries = [graph.boundary(b) for b in nodes if b.boundary is not None]
    return ChainResult(
        active_chain=[n.uuid for n in active],
        boundaries=boundaries,
        warnings=list(graph.warnings) + drop_warnings(path, dropped, "active view"),
    )


class _Graph:
    """Indexes over the nodes of one file, and the walks over them.

    A link that names no line of the file (a boundary's logical parent, an
    entry's parent) is rebuilt from file order along the main chain, as the
    tool had it in context; each such repair is one named warning.
    """

    def __init__(self, nodes: Sequence[ChainNode], path: str = "") -> None:
        self.nodes = nodes
        self.path = path
        self.warnings: dict[str, None] = {}
        self.index = {n.uuid: n for n in nodes}
        self.main = [n for n in nodes if not n.sidechain]
        self.main_lines = [n.line_no for n in self.main]
        self.pieces: dict[tuple[str, bool], list[ChainNode]] = defaultdict(list)
        self.results: dict[str, list[ChainNode]] = defaultdict(list)
        self.relinks: dict[str, tuple[str, int]] = {}
        self.summaries: list[ChainNode] = []
        self.boundary_lines = [n.line_no for n in nodes if n.boundary is not None]
        for node in nodes:
            self._index_node(node)

    def _index_node(self, node: ChainNode) -> None:
        if node.role == "assistant" and node.api_message_id:
            self.pieces[(node.api_message_id, node.sidechain)].append(node)
        for tool_id in node.tool_result_ids:
            self.results[tool_id].append(node)
        if node.is_compact_summary:
            self.summaries.append(node)
        segment = node.boundary.preserved_segment if node.boundary else None
        if segment:
            self.relinks[segment["head_uuid"]] = (segment["anchor_uuid"], node.line_no)

    def leaf(self) -> ChainNode | None:
        """The latest leaf (by timestamp, then line) among main-thread conversation entries."""
        conversation = [n for n in self.nodes if n.role is not None]
        main = [n for n in conversation if not n.sidechain] or conversation
        ancestors: set[str] = set()
        for node in main:
            current = node.parent
            while current is not None and current not in ancestors:
                ancestors.add(current)
                parent = self.index.get(current)
                current = parent.parent if parent is not None else None
        # A preserved segment hangs from its anchor: the anchor is no leaf, even when it is the latest
        # entry (a boundary stamped a millisecond after its own summary).
        ancestors.update(anchor for anchor, _line in self.relinks.values())
        leaves = [n for n in main if n.uuid not in ancestors]
        return max(leaves, key=lambda n: (n.timestamp, n.line_no), default=None)

    def view(self, start: str, *, before_line: int) -> tuple[list[ChainNode], list[tuple[ChainNode, str]]]:
        """The valid view ending at `start`, as it stood before line `before_line`."""
        chain = self._walk(start, before_line)
        chain = self._with_preserved(chain)
        return repair_view(self._complete_responses(chain, before_line))

    def _walk(self, start: str | None, before_line: int) -> list[ChainNode]:
        """Conversation nodes from the root (or a boundary) down to `start`."""
        out: list[ChainNode] = []
        seen: set[str] = set()
        current = start
        while current is not None and current not in seen:
            node = self.index.get(current)
            if node is None:
                break
            seen.add(current)
            if node.role is not None and node.in_view:
                out.append(node)
            relink = self.relinks.get(current)
            linked = relink is not None and relink[1] < before_line and relink[0] in self.index
            if node.boundary is not None and not linked:
                break  # a boundary starts the chain, unless a later compaction kept a run starting at it
            if linked and relink is not None:
                current = relink[0]
            elif node.parent is not None and node.parent not in self.index:
                current = self._adopted_parent(node)
            else:
                current = node.parent
        out.reverse()
        return out

    def _previous_main(self, line_no: int, *, conversation: bool = False) -> ChainNode | None:
        """The last main-chain entry (a conversation message, if asked) written before line `line_no`."""
        at = bisect_left(self.main_lines, line_no)
        for node in reversed(self.main[:at]) if conversation else self.main[max(at - 1, 0) : at]:
            if not conversation or (node.role is not None and node.in_view):
                return node
        return None

    def _adopted_parent(self, node: ChainNode) -> str | None:
        """For a main-chain entry whose parent is not in the file: the entry written just before it.

        A sidechain entry's missing parent is expected (a sub-agent file starts
        from its parent session's lines) and ends the walk, as does a first line.
        """
        if node.sidechain:
            return None
        previous = self._previous_main(node.line_no)
        if previous is None:
            return None
        self._warn(
            node.line_no,
            f"parent {node.parent} of {node.uuid} is not in the file; linked to the main-chain "
            f"entry written before it (line {previous.line_no})",
        )
        return previous.uuid

    def _warn(self, line_no: int, text: str) -> None:
        self.warnings[f"{where(self.path, line_no)}: {text}"] = None

    def _with_preserved(self, chain: list[ChainNode]) -> list[ChainNode]:
        """Insert a leading boundary's preserved segment after its anchor if the walk missed it."""
        if not chain or chain[0].boundary is None or chain[0].boundary.preserved_segment is None:
            return chain
        segment = chain[0].boundary.preserved_segment
        present = {n.uuid for n in chain}
        if segment["head_uuid"] in present:
            return chain
        run = self._run(segment["tail_uuid"], segment["head_uuid"])
        anchor_at = next((i for i, n in enumerate(chain) if n.uuid == segment["anchor_uuid"]), 0)
        run = [n for n in run if n.uuid not in present]
        return chain[: anchor_at + 1] + run + chain[anchor_at + 1 :]

    def _run(self, tail: str, head: str, before_line: int = sys.maxsize) -> list[ChainNode]:
        """Conversation nodes from `head` to `tail` along parent links ([] if unlinked).

        A run may cross an earlier compaction's kept run (a `--from` after an `--up-to`): its head
        hangs from that compaction's anchor (relinked), as in the view the later boundary replaced.
        """
        out: list[ChainNode] = []
        seen: set[str] = set()
        current: str | None = tail
        while current is not None and current not in seen:
            node = self.index.get(current)
            if node is None:
                return []
            seen.add(current)
            if node.role is not None and node.in_view:
                out.append(node)
            if current == head:
                out.reverse()
                return out
            relink = self.relinks.get(current)
            if relink is not None and relink[1] < before_line and relink[0] in self.index:
                current = relink[0]
            else:
                current = node.parent
        return []

    def _complete_responses(self, chain: list[ChainNode], before_line: int = sys.maxsize) -> list[ChainNode]:
        """Every piece of each response in the chain, then the results of its tool_uses.

        Parallel tool calls branch the file's DAG (a result's parent is the
        piece that called it), so the walk alone can miss sibling pieces.
        """
        in_chain = {n.uuid for n in chain}
        emitted: set[str] = set()
        out: list[ChainNode] = []
        for node in chain:
            if node.uuid in emitted:
                continue
            group = [node]
            if node.role == "assistant" and node.api_message_id:
                pieces = [p for p in self.pieces[(node.api_message_id, node.sidechain)] if p.in_view]
                group = pieces + self._results_of(pieces, in_chain, before_line)
            for member in group:
                if member.uuid not in emitted:
                    emitted.add(member.uuid)
                    out.append(member)
        return out

    def _results_of(self, pieces: list[ChainNode], in_chain: set[str], before_line: int) -> list[ChainNode]:
        """The user nodes answering the pieces' tool_uses (the chain's copy preferred)."""
        found: dict[str, ChainNode] = {}
        for piece in pieces:
            for tool_id in piece.tool_use_ids:
                candidates = [
                    r
                    for r in self.results.get(tool_id, [])
                    if r.sidechain == piece.sidechain and r.line_no < before_line
                ]
                chosen = next((r for r in candidates if r.uuid in in_chain), candidates[0] if candidates else None)
                if chosen is not None:
                    found[chosen.uuid] = chosen
        return sorted(found.values(), key=lambda n: n.line_no)

    def boundary(self, node: ChainNode) -> ImportedBoundary:
        """The `ImportedBoundary` of a compact_boundary node."""
        facts = node.boundary
        assert facts is not None
        before: list[ChainNode] = []
        if node.logical_parent in self.index:
            before, _ = self.view(node.logical_parent or "", before_line=node.line_no)
        else:
            before = self._view_before_unlinked(node)
        segment = facts.preserved_segment
        kept = (
            {n.uuid for n in self._run(segment["tail_uuid"], segment["head_uuid"], node.line_no)} if segment else set()
        )
        summary = self._summary_of(node)
        return ImportedBoundary(
            boundary_uuid=node.uuid,
            summary_uuid=summary.uuid if summary else None,
            trigger=facts.trigger,
            kind=facts.kind or "full",
            pre_tokens=facts.pre_tokens,
            preserved_segment=dict(segment) if segment else None,
            view_before=[n.uuid for n in before],
            summarized=[n.uuid for n in before if n.uuid not in kept],
        )

    def _view_before_unlinked(self, node: ChainNode) -> list[ChainNode]:
        """A boundary whose logical parent is missing: the main chain ending at the last message before it."""
        last = self._previous_main(node.line_no, conversation=True)
        said = (
            f"its logical parent {node.logical_parent} is not in the file"
            if node.logical_parent
            else "it names no logical parent"
        )
        if last is None:
            self._warn(node.line_no, f"boundary {node.uuid}: {said}, and no message comes before it")
            return []
        self._warn(
            node.line_no,
            f"boundary {node.uuid}: {said}; the view before it is rebuilt from the "
            f"main chain ending at line {last.line_no} ({last.uuid})",
        )
        before, _ = self.view(last.uuid, before_line=node.line_no)
        return before

    def _summary_of(self, boundary: ChainNode) -> ChainNode | None:
        """The compact-summary message of a boundary: its child, else the next one in the file."""
        child = next((s for s in self.summaries if s.parent == boundary.uuid), None)
        if child is not None:
            return child
        next_boundary = min((n for n in self.boundary_lines if n > boundary.line_no), default=sys.maxsize)
        return next((s for s in self.summaries if boundary.line_no < s.line_no < next_boundary), None)
