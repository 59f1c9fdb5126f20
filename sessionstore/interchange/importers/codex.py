"""Import of OpenAI Codex CLI rollout files (`rollout-*.jsonl`).

Mapping, one physical line at a time:

- `session_meta`, `turn_context`, `event_msg`: side lines (they feed the
  header, and `token_count` events give the usage of the response before).
- `response_item` message: user -> user; assistant -> assistant;
  developer/system -> a `system` message (stored, never sent).
- `function_call` / `custom_tool_call` / `local_shell_call`: an assistant
  message holding one `tool_use` block; consecutive assistant items share a
  synthesized `api_message_id`, so parallel calls form one response.
- `*_output`: a user message holding the `tool_result` that answers it.
- `reasoning`, `web_search_call` and other unsent items: side lines (a
  reasoning item is encrypted for OpenAI and cannot become a signed
  Anthropic thinking block).
- `compacted`: a `system` compact_boundary message; its `replacement_history`
  items follow as messages with the same line number and empty raw bytes
  (the `compaction` item, an encrypted summary, becomes the summary message).
  Without a replacement history, a non-empty `message` is the summary.

Uuids are `codex-<line>` (and `codex-<line>-<k>` for replacement items).
Legacy rollouts (items at top level, no `payload`) are read the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

from .plan import (
    TITLE_LENGTH,
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
    read_raw_lines,
    repair_view,
    where,
)

CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
#: Response items that are recorded but never sent to an Anthropic model.
UNSENT_ITEM_TYPES = frozenset({"reasoning", "web_search_call", "ghost_snapshot", "compaction", "image_generation_call"})
ITEM_TYPES = frozenset({"message"}) | CALL_TYPES | OUTPUT_TYPES | UNSENT_ITEM_TYPES
SIDE_LINE_TYPES = frozenset({"session_meta", "turn_context", "event_msg"})
TEXT_PART_TYPES = frozenset({"input_text", "output_text", "text", "summary_text", "refusal"})

#: Side lines held back at most while waiting for the usage of an assistant response.
MAX_HELD_LINES = 256


class CodexImport:
    """One streaming import: iterate `lines()` once, then call `plan()`."""

    source = "codex"
    #: Read only this many bytes of the file (None: all of it).
    limit: int | None = None
    #: Leave an assistant response still waiting for its usage to the next import (a file being written).
    hold_tail: bool = False
    #: Where the next `lines()` starts (byte offset, lines before it): a live import continues from here.
    position: tuple[int, int] = (0, 0)
    #: False when lines were held back: the next import must start over.
    resumable: bool = True

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.nodes: list[ChainNode] = []
        self.warnings: list[str] = []
        self.session_id: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        #: The latest `model_context_window` a turn context or token count reported.
        self.context_window: int | None = None
        self._title: str | None = None
        self._fallback_title: str | None = None
        self._last_uuid: str | None = None
        self._group: str | None = None
        self._context_tokens: int | None = None
        self._held: list[ImportedLine] = []
        self._held_assistant: ImportedLine | None = None
        #: Lines of a live import left for the next one (a response whose usage has not arrived yet).
        self.held_back = 0
        #: Boundaries without a replacement history: Codex rebuilds the history after them itself.
        self.rebuilt: set[str] = set()
        #: uuid -> characters of each user message a person typed (what such a rebuild carries over).
        self.typed: dict[str, int] = {}

    def lines(self) -> Iterator[ImportedLine]:
        """Each physical line (plus replacement-history messages), in file order.

        An assistant line is held back until the next `token_count` event (at
        most a few side lines later) so it can carry the usage of its response.
        """
        for line_no, raw in read_raw_lines(self.path, self.limit, self.position):
            self.position = (self.position[0] + len(raw), line_no)
            usage, produced = self._convert(line_no, raw)
            for line in produced:
                self._record(line)
            yield from self._release(produced, usage)
        if self.hold_tail and self._held_assistant is not None:
            self._hold_back()
            return
        yield from self._flush()

    def _hold_back(self) -> None:
        """Leave the held tail to the next live import: its lines, graph facts and warnings."""
        first = self._held[0].line_no
        self.held_back = len(self._held)
        self.resumable = False
        self.nodes = [n for n in self.nodes if n.line_no < first]
        held_warnings = {line.warning for line in self._held if line.warning}
        self.warnings = [w for w in self.warnings if w not in held_warnings]
        self._held, self._held_assistant = [], None

    def plan(self) -> ImportPlan:
        """The plan (without lines) once `lines()` has been consumed."""
        chain = build_chain(self.nodes, path=self.path, rebuilt=self.rebuilt, typed=self.typed)
        return ImportPlan(
            source="codex",
            path=self.path,
            source_session_id=self.session_id or _id_from_name(self.path),
            title=_one_line(self._title or self._fallback_title),
            cwd=self.cwd,
            model=self.model,
            parent_source_session_id=None,
            lines=[],
            boundaries=chain.boundaries,
            active_chain=chain.active_chain,
            warnings=self.warnings + chain.warnings,
            context_window=self.context_window,
        )

    def _record(self, line: ImportedLine) -> None:
        if line.warning:
            self.warnings.append(line.warning)
        if line.node is not None:
            self.nodes.append(line.node)

    def _release(self, produced: list[ImportedLine], usage: dict[str, int] | None) -> Iterator[ImportedLine]:
        """Yield lines in order, holding an assistant response until its usage arrives."""
        if usage is not None and self._held_assistant is not None:
            message = self._held_assistant.message
            if message is not None and message.get("usage") is None:
                message["usage"] = usage
            self._held.extend(produced)
            yield from self._flush()
            return
        roles = [line.message["role"] for line in produced if line.message is not None]
        if roles and roles[-1] == "assistant":
            if any(r != "assistant" for r in roles):
                yield from self._flush()
            self._held.extend(produced)
            self._held_assistant = next(line for line in reversed(produced) if line.message is not None)
            return
        if roles or not self._held or len(self._held) >= MAX_HELD_LINES:
            yield from self._flush()
            yield from produced
            return
        self._held.extend(produced)

    def _flush(self) -> Iterator[ImportedLine]:
        held, self._held, self._held_assistant = self._held, [], None
        yield from held

    def _convert(self, line_no: int, raw: bytes) -> tuple[dict[str, int] | None, list[ImportedLine]]:
        """(usage reported by this line, the lines it gives)."""
        entry = decoded_entry(self.path, line_no, raw)
        if isinstance(entry, ImportedLine):
            return None, [entry]
        etype = entry.get("type")
        payload = entry.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        timestamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None
        if etype in SIDE_LINE_TYPES:
            return self._observe(etype, payload), [ImportedLine(line_no, raw, "side", etype)]
        if etype == "response_item":
            return None, [self._item_line(line_no, raw, payload, timestamp)]
        if etype == "compacted":
            return None, self._compacted(line_no, raw, payload, timestamp)
        if etype in ITEM_TYPES and "payload" not in entry:
            return None, [self._item_line(line_no, raw, entry, timestamp)]
        if etype is None and ("record_type" in entry or line_no == 1):
            self._observe("session_meta", entry if line_no == 1 else {})
            return None, [ImportedLine(line_no, raw, "side", "legacy_meta")]
        warning = f"{where(self.path, line_no)}: unknown rollout line type {etype!r}, kept as a side line"
        return None, [ImportedLine(line_no, raw, "side", str(etype or ""), warning=warning)]

    def _observe(self, etype: str, payload: dict[str, Any]) -> dict[str, int] | None:
        """Header facts from side lines; returns usage when the line reports one."""
        if etype == "session_meta":
            self.session_id = self.session_id or _str(payload.get("id"))
            self.cwd = self.cwd or _str(payload.get("cwd"))
        elif etype == "turn_context":
            self.model = _str(payload.get("model")) or self.model
            self._window(payload.get("model_context_window"))
            self.cwd = self.cwd or _str(payload.get("cwd"))
        elif payload.get("type") == "user_message" and self._title is None:
            self._title = _str(payload.get("message"))
        elif payload.get("type") == "token_count":
            info = payload.get("info")
            if isinstance(info, dict):
                self._window(info.get("model_context_window"))
            return self._usage(info)
        return None

    def _window(self, value: Any) -> None:
        """Keep a reported context window that is a plausible token count."""
        if isinstance(value, int) and not isinstance(value, bool) and 1_000 <= value <= 100_000_000:
            self.context_window = value

    def _usage(self, info: Any) -> dict[str, int] | None:
        """Anthropic-shaped usage of a token_count event's last model request.

        Events without input tokens (e.g. the one a remote compaction writes)
        describe no model request and are ignored.
        """
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict):
            return None
        total_in = _int(last.get("input_tokens"))
        cached = _int(last.get("cached_input_tokens"))
        output = _int(last.get("output_tokens"))
        if total_in <= 0:
            return None
        self._context_tokens = total_in + output
        return {
            "input_tokens": max(total_in - cached, 0),
            "cache_read_input_tokens": cached,
            "output_tokens": output,
        }

    def _item_line(self, line_no: int, raw: bytes, item: dict[str, Any], timestamp: str | None) -> ImportedLine:
        """A response item as a message line, or a side line."""
        kind = item.get("type")
        entry_type = f"response_item:{kind}"
        mapped = map_item(item) if kind != "compaction" else None
        if mapped is None:
            warning = None
            if kind not in ITEM_TYPES:
                warning = f"{where(self.path, line_no)}: unknown response item type {kind!r}, kept as a side line"
            elif kind == "message" or kind in CALL_TYPES or kind in OUTPUT_TYPES:
                warning = f"{where(self.path, line_no)}: {kind} item without the fields it needs, kept as a side line"
            return ImportedLine(line_no, raw, "side", entry_type, warning=warning)
        if self._fallback_title is None and mapped["role"] == "user":
            self._fallback_title = _prompt_text(mapped["content"])
        message = self._envelope(mapped, f"codex-{line_no}", timestamp)
        if kind == "message" and mapped["role"] == "user":
            typed = _typed_text(mapped["content"])
            if typed is not None:
                self.typed[message["uuid"]] = len(typed)
        return ImportedLine(line_no, raw, "message", entry_type, message=message, node=_node(line_no, message))

    def _compacted(
        self, line_no: int, raw: bytes, payload: dict[str, Any], timestamp: str | None
    ) -> list[ImportedLine]:
        """The boundary line, then the messages of the replacement history."""
        facts = BoundaryFacts(trigger="auto", pre_tokens=self._context_tokens)
        self._group = None
        boundary = {
            "role": "system",
            "type": "system",
            "subtype": "compact_boundary",
            "content": "Conversation compacted",
            "metadata": {"compactMetadata": {"trigger": facts.trigger, "preTokens": facts.pre_tokens}},
        }
        message = self._envelope(boundary, f"codex-{line_no}", timestamp, boundary=True)
        warning = None
        if not isinstance(payload.get("replacement_history"), list):
            self.rebuilt.add(message["uuid"])
            has_summary = bool(_replacement_items(payload))
            warning = (
                f"{where(self.path, line_no)}: compacted line without a replacement history; the view after "
                f"it is rebuilt as Codex rebuilds it: the user messages before it (newest first, within "
                f"{CARRIED_USER_TOKENS:,} tokens), then "
                + ("the summary" if has_summary else "no summary (its message is empty)")
            )
        out = [
            ImportedLine(
                line_no,
                raw,
                "message",
                "compacted",
                message=message,
                warning=warning,
                node=_node(line_no, message, facts),
            )
        ]
        for k, item in enumerate(_replacement_items(payload)):
            mapped = map_item(item)
            if mapped is None:
                continue
            derived = self._envelope(mapped, f"codex-{line_no}-{k}", timestamp)
            node = _node(line_no, derived)
            out.append(
                ImportedLine(line_no, b"", "message", "compacted:replacement_history", message=derived, node=node)
            )
        return out

    def _envelope(
        self, mapped: dict[str, Any], uuid: str, timestamp: str | None, *, boundary: bool = False
    ) -> dict[str, Any]:
        """The append-shaped message: linear parent links and response grouping."""
        parent = None if boundary else self._last_uuid
        metadata = dict(mapped.get("metadata") or {})
        if boundary and self._last_uuid:
            metadata["logicalParentUuid"] = self._last_uuid
        api_id = None
        if mapped["role"] == "assistant":
            self._group = self._group or f"codex-response-{uuid[len('codex-') :]}"
            api_id = self._group
        else:
            self._group = None
        self._last_uuid = uuid
        return {
            "role": mapped["role"],
            "content": mapped["content"],
            "uuid": uuid,
            "parent_uuid": parent,
            "type": mapped["type"],
            "subtype": mapped.get("subtype"),
            "timestamp": timestamp,
            "api_message_id": api_id,
            "usage": None,
            "is_meta": False,
            "is_compact_summary": bool(mapped.get("is_compact_summary")),
            "metadata": metadata,
        }


def map_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """A response item as {role, type, subtype, content, ...}, or None if not a message."""
    kind = item.get("type")
    if kind == "message":
        return _message_item(item)
    if kind in CALL_TYPES:
        return _call_item(item)
    if kind in OUTPUT_TYPES:
        return _output_item(item)
    if kind == "compaction":
        return _compaction_item(item)
    return None


def _message_item(item: dict[str, Any]) -> dict[str, Any] | None:
    role = item.get("role")
    content = _blocks(item.get("content"))
    meta = {k: item[k] for k in ("phase", "id", "status") if isinstance(item.get(k), str)}
    if role in ("user", "assistant"):
        return {"role": role, "type": role, "content": content, "metadata": meta}
    if role in ("developer", "system"):
        return {"role": "system", "type": "system", "subtype": role, "content": content, "metadata": meta}
    return None


def _call_item(item: dict[str, Any]) -> dict[str, Any] | None:
    call_id = item.get("call_id") or item.get("id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > 200:
        return None
    kind = item["type"]
    if kind == "function_call":
        name, tool_input = item.get("name"), _arguments(item.get("arguments"))
    elif kind == "custom_tool_call":
        name, tool_input = item.get("name"), {"input": item.get("input")}
    else:
        action = item.get("action")
        name, tool_input = "local_shell", action if isinstance(action, dict) else {"action": action}
    block = {
        "type": "tool_use",
        "id": call_id,
        "name": name if isinstance(name, str) and name else kind,
        "input": tool_input,
    }
    return {"role": "assistant", "type": "assistant", "content": [block], "metadata": {"codex_type": kind}}


def _output_item(item: dict[str, Any]) -> dict[str, Any] | None:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > 200:
        return None
    output = item.get("output")
    is_error = False
    if isinstance(output, dict):
        is_error = output.get("success") is False
        output = output.get("content", output)
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if is_error:
        block["is_error"] = True
    return {"role": "user", "type": "user", "content": [block], "metadata": {"codex_type": item["type"]}}


def _compaction_item(item: dict[str, Any]) -> dict[str, Any]:
    """The summary of a remote compaction: plain text when given, else a note (it is encrypted)."""
    text = item.get("summary") or item.get("text")
    if not isinstance(text, str) or not text.strip():
        size = len(item.get("encrypted_content") or "")
        text = f"[Codex compaction summary: {size} characters, encrypted by the provider]"
    return {
        "role": "user",
        "type": "user",
        "content": text,
        "is_compact_summary": True,
        "metadata": {"codex_type": "compaction"},
    }


def _arguments(arguments: Any) -> dict[str, Any]:
    """Function-call arguments as the tool_use input object."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return {"arguments": arguments}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return arguments if isinstance(arguments, dict) else {"arguments": arguments}


def _blocks(content: Any) -> str | list[dict[str, Any]]:
    """Codex content parts as Anthropic blocks ("" when nothing is left)."""
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        block = _block(part)
        if block is not None:
            blocks.append(block)
    return blocks or ""


def _block(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in TEXT_PART_TYPES:
        text = part.get("text") if kind != "refusal" else part.get("refusal", part.get("text"))
        return {"type": "text", "text": text} if isinstance(text, str) and text.strip() else None
    if kind == "input_image":
        return _image(part.get("image_url"))
    return {"type": "text", "text": f"[{kind}]"}


def _image(url: Any) -> dict[str, Any]:
    """An image block from a data: or http(s) URL, else a text placeholder."""
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": head, "data": data}}
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return {"type": "text", "text": "[image]"}


def _replacement_items(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The items that follow a boundary: the replacement history, else the summary message."""
    history = payload.get("replacement_history")
    if isinstance(history, list):
        return [item for item in history if isinstance(item, dict)]
    message = payload.get("message")
    if isinstance(message, str) and message.strip():
        return [{"type": "compaction", "summary": message}]
    return []


def _node(line_no: int, message: dict[str, Any], facts: BoundaryFacts | None = None) -> ChainNode:
    role = message["role"]
    content = message["content"]
    return ChainNode(
        line_no=line_no,
        uuid=message["uuid"],
        parent=message["parent_uuid"],
        role=role,
        entry_type=message["type"],
        timestamp=message["timestamp"] or "",
        api_message_id=message["api_message_id"],
        tool_use_ids=block_ids(content, "tool_use", "id") if role == "assistant" else (),
        tool_result_ids=block_ids(content, "tool_result", "tool_use_id") if role == "user" else (),
        blank=role != "system" and is_blank(content),
        is_compact_summary=message["is_compact_summary"],
        boundary=facts,
    )


def build_chain(
    nodes: Sequence[ChainNode],
    *,
    path: str = "",
    rebuilt: set[str] | None = None,
    typed: dict[str, int] | None = None,
) -> ChainResult:
    """Active view and boundaries of a linear rollout: each boundary restarts the view.

    After a boundary with a replacement history, the view is that history
    (its items follow the boundary line). After one without (a local
    compaction), Codex rebuilds the history from the user messages a person
    typed before it and the summary; so does this.
    """
    rebuilt, typed = rebuilt or set(), typed or {}
    starts = [i for i, n in enumerate(nodes) if n.boundary is not None]
    boundaries = []
    view = list(nodes[: starts[0] if starts else len(nodes)])
    for k, at in enumerate(starts):
        before, _ = repair_view(view)
        end = starts[k + 1] if k + 1 < len(starts) else len(nodes)
        summary = next((n for n in nodes[at + 1 : end] if n.is_compact_summary), None)
        facts = nodes[at].boundary
        assert facts is not None
        boundaries.append(
            ImportedBoundary(
                boundary_uuid=nodes[at].uuid,
                summary_uuid=summary.uuid if summary else None,
                trigger=facts.trigger,
                pre_tokens=facts.pre_tokens,
                view_before=[n.uuid for n in before],
                summarized=[n.uuid for n in before],
            )
        )
        carried = _carried_user_messages(before, typed) if nodes[at].uuid in rebuilt else []
        view = [nodes[at], *carried, *nodes[at + 1 : end]]
    active, dropped = repair_view(view)
    return ChainResult(
        active_chain=[n.uuid for n in active],
        boundaries=boundaries,
        warnings=drop_warnings(path, dropped, "active view"),
    )


#: Tokens of typed user messages a Codex local compaction carries into the new history.
CARRIED_USER_TOKENS = 20_000


def _carried_user_messages(before: list[ChainNode], typed: dict[str, int]) -> list[ChainNode]:
    """The typed user messages of `before`, newest first while they fit the budget (about 4 characters a token)."""
    kept: list[ChainNode] = []
    budget = CARRIED_USER_TOKENS * 4
    for node in reversed(before):
        size = typed.get(node.uuid)
        if size is None:
            continue
        if size > budget:
            break
        budget -= size
        kept.append(node)
    kept.reverse()
    return kept


def _typed_text(content: Any) -> str | None:
    """The text of a user message a person typed; None for injected context (instructions, environment)."""
    if isinstance(content, list):
        if any(b.get("type") != "text" and b.get("type") != "image" for b in content):
            return None
        content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    if not isinstance(content, str) or not content.strip():
        return None
    head = content.lstrip()
    if head.startswith(("<environment_context", "<user_instructions", "<user_shell_command", "# AGENTS.md")):
        return None
    return content


def _prompt_text(content: Any) -> str | None:
    """A user message's text when it reads like a prompt (not injected context)."""
    if isinstance(content, list):
        content = next((b.get("text") for b in content if b.get("type") == "text"), None)
    if not isinstance(content, str) or content.lstrip().startswith(("<", "#")):
        return None
    return content


def _one_line(text: str | None) -> str | None:
    if not text or not text.strip():
        return None
    return text.strip().splitlines()[0][:TITLE_LENGTH]


def _id_from_name(path: str) -> str:
    """The session id at the end of a `rollout-<time>-<uuid>.jsonl` name, else the stem."""
    stem = Path(path).stem
    parts = stem.split("-")
    return "-".join(parts[-5:]) if len(parts) >= 6 else stem


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
