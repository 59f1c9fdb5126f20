"""Builders of StoredMessage / ViewEntry objects for tests, without a database.

Message builders return StoredMessage objects with placeholder seq and tokens;
`entries_from` numbers them and estimates tokens (JSON characters / 4) the way
a store would, and wraps each one in a ViewEntry.
"""

from __future__ import annotations

import dataclasses
import json
import uuid as uuidlib
from typing import Any, Iterable

from sessionstore.storage.core.types import Content, StoredMessage, ViewEntry


def message(
    role: str,
    content: Content,
    *,
    type: str | None = None,
    subtype: str | None = None,
    api_message_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    is_compact_summary: bool = False,
) -> StoredMessage:
    """Any stored message; `type` defaults to the role."""
    return StoredMessage(
        seq=0,
        uuid=str(uuidlib.uuid4()),
        role=role,
        type=type or role,
        content=content,
        subtype=subtype,
        api_message_id=api_message_id,
        metadata=metadata or {},
        is_compact_summary=is_compact_summary,
    )


def user(text: str) -> StoredMessage:
    """A user message with plain text content."""
    return message("user", text)


def user_blocks(blocks: list[dict[str, Any]]) -> StoredMessage:
    """A user message with the given content blocks."""
    return message("user", blocks)


def assistant_text(text: str, *, api_message_id: str | None = None) -> StoredMessage:
    """An assistant message with one text block."""
    return message("assistant", [{"type": "text", "text": text}], api_message_id=api_message_id)


def assistant_tool_use(
    name: str, input: dict[str, Any], id: str, *, text: str | None = None, api_message_id: str | None = None
) -> StoredMessage:
    """An assistant message calling one tool, optionally after a text block."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks.append({"type": "tool_use", "id": id, "name": name, "input": input})
    return message("assistant", blocks, api_message_id=api_message_id)


def tool_result(id: str, text: str, is_error: bool = False) -> StoredMessage:
    """A user message carrying one tool result."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": id, "content": text}
    if is_error:
        block["is_error"] = True
    return message("user", [block])


def image_block(media_type: str = "image/png", data: str = "iVBORw0KGgo=") -> dict[str, Any]:
    """A small base64 image block."""
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def document_block(data: str = "JVBERi0xLjQ=") -> dict[str, Any]:
    """A small base64 PDF document block."""
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}


def attachment(text: str, *, reinjected: bool = False) -> StoredMessage:
    """An attachment (user-role, type "attachment"), flagged re-injected when asked."""
    metadata = {"reinjected": True} if reinjected else {}
    return message("user", text, type="attachment", metadata=metadata)


def boundary() -> StoredMessage:
    """A system compact_boundary message (stored, never sent)."""
    return message("system", "Conversation compacted", subtype="compact_boundary")


def estimate(stored: StoredMessage) -> int:
    """Token estimate of a message: its {role, content} JSON length / 4, at least 1."""
    return max(1, len(json.dumps({"role": stored.role, "content": stored.content})) // 4)


def entries_from(messages: Iterable[StoredMessage]) -> list[ViewEntry]:
    """View entries for `messages` in order, with seq, positions and tokens assigned."""
    entries = []
    for position, stored in enumerate(messages):
        numbered = dataclasses.replace(stored, seq=position + 1, tokens=estimate(stored))
        entries.append(ViewEntry(position=position, message=numbered, content=numbered.content, tokens=numbered.tokens))
    return entries


def conversation(rounds: int, *, words: int = 20) -> list[StoredMessage]:
    """A user request then `rounds` tool rounds (tool_use + result) and a final text answer."""
    filler = " ".join(["lorem"] * words)
    messages = [user(f"Please fix the bug. {filler}")]
    for i in range(rounds):
        tool_id = f"toolu_r{i:03d}"
        messages.append(assistant_tool_use("Read", {"path": f"src/file_{i}.py"}, tool_id, text=f"Reading {i}"))
        messages.append(tool_result(tool_id, f"contents of file {i}: {filler}"))
    messages.append(assistant_text("Fixed it."))
    return messages
