"""Small builders for view entries, used by the rounds / summarizer / notes tests.

`Convo` appends entries in order and hands out a list of `ViewEntry`; block
helpers build the Messages-API content blocks the entries carry.
"""

from __future__ import annotations

import json
from typing import Any

from sessionstore.storage.core.types import Content, StoredMessage, ViewEntry


def text(value: str) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    """A thinking block (signature is a placeholder)."""
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(use_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    """A tool_use block calling `name` with `tool_input`."""
    return {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}


def tool_result(use_id: str, output: str, *, is_error: bool = False) -> dict[str, Any]:
    """A tool_result block answering `use_id`."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": output}
    if is_error:
        block["is_error"] = True
    return block


def estimate_tokens(content: Content) -> int:
    """The cheap estimate the tests use: serialized characters / 4, at least 1."""
    raw = content if isinstance(content, str) else json.dumps(content)
    return max(len(raw) // 4, 1)


class Convo:
    """An ordered list of view entries built one message at a time."""

    def __init__(self) -> None:
        """Start with no entries."""
        self.entries: list[ViewEntry] = []

    def add(self, role: str, content: Content, **envelope: Any) -> ViewEntry:
        """Append one entry; `envelope` sets StoredMessage fields (type, subtype, …)."""
        seq = len(self.entries)
        envelope.setdefault("type", role)
        message = StoredMessage(
            seq=seq,
            uuid=f"m{seq:05d}",
            role=role,
            content=content,
            tokens=estimate_tokens(content),
            **envelope,
        )
        entry = ViewEntry(position=seq, message=message, content=content, tokens=message.tokens)
        self.entries.append(entry)
        return entry

    def user(self, content: Content, **envelope: Any) -> ViewEntry:
        """Append a user entry (plain text or blocks)."""
        return self.add("user", content, **envelope)

    def assistant(self, content: Content, api_id: str | None = None, **envelope: Any) -> ViewEntry:
        """Append one assistant piece; pieces of one response share `api_id`."""
        return self.add("assistant", content, api_message_id=api_id, **envelope)

    def system(self, subtype: str = "notice", note: str = "") -> ViewEntry:
        """Append a system entry (never sent to the model)."""
        return self.add("system", note, subtype=subtype)
