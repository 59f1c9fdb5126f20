"""Turning view entries into what the Messages API accepts.

The active view stores one entry per transcript message; the API wants
alternating roles, so consecutive same-role messages are merged here, with
`tool_result` blocks first in a user message. `system`-type entries
(boundaries, markers, notices) are never sent.
"""

from __future__ import annotations

from typing import Any, Iterable

from .types import Content, ViewEntry


def as_blocks(content: Content) -> list[dict[str, Any]]:
    """Content as a list of blocks (a plain string becomes one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _order_user_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tool_result blocks first, everything else after, each group in its order."""
    if blocks and blocks[0].get("type") == "tool_result" and all(b.get("type") == "tool_result" for b in blocks):
        return blocks
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if not results or len(results) == len(blocks):
        return blocks
    others = [b for b in blocks if b.get("type") != "tool_result"]
    return results + others


def _merge(role: str, contents: list[Content]) -> dict[str, Any]:
    """One API message from the contents of consecutive same-role entries.

    Blocks are shallow-copied so a caller that decorates the result (for
    example with `cache_control`) cannot alter the stored view.
    """
    if len(contents) == 1:
        content = contents[0]
        if type(content) is str:
            return {"role": role, "content": content}
        blocks = [b.copy() for b in content]
    else:
        blocks = []
        for content in contents:
            if type(content) is str:
                if content:
                    blocks.append({"type": "text", "text": content})
            else:
                blocks.extend([b.copy() for b in content])
    if role == "user":
        blocks = _order_user_blocks(blocks)
    return {"role": role, "content": blocks}


def to_api_messages(entries: Iterable[ViewEntry]) -> list[dict[str, Any]]:
    """The `messages` parameter for `client.messages.create` from view entries."""
    out: list[dict[str, Any]] = []
    role: str | None = None
    group: list[Content] = []
    for entry in entries:
        entry_role = entry.message.role
        if entry_role == "system":
            continue
        if entry_role != role:
            if group:
                out.append(_merge(role or "user", group))
            group = [entry.content]
            role = entry_role
        else:
            group.append(entry.content)
    if group:
        out.append(_merge(role or "user", group))
    return out
