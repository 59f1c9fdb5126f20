"""Turning view entries into what the Messages API accepts.

The active view stores one entry per transcript message; the API wants
alternating roles, so consecutive same-role messages are merged here, with
`tool_result` blocks first in a user message. `system`-type entries
(boundaries, markers, notices) are never sent.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..codecs.fastjson import loads_stored
from ..core.types import Content, ViewEntry


def as_blocks(content: Content) -> list[dict[str, Any]]:
    """Content as a list of blocks (a plain string becomes one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _order_user_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """tool_result blocks first, everything else after, each group in its order."""
    if len(blocks) < 2:
        return blocks
    seen_other = False
    for block in blocks:
        if block.get("type") != "tool_result":
            seen_other = True
        elif seen_other:
            break
    else:
        return blocks
    results = [b for b in blocks if b.get("type") == "tool_result"]
    others = [b for b in blocks if b.get("type") != "tool_result"]
    return results + others


def _merge(role: str, contents: list[Content], *, copy: bool = True) -> dict[str, Any]:
    """One API message from the contents of consecutive same-role entries.

    With `copy`, blocks are shallow-copied so a caller that decorates the result
    (for example with `cache_control`) cannot alter the cached view; contents
    decoded just for this call are fresh already and skip it.
    """
    if len(contents) == 1:
        content = contents[0]
        if isinstance(content, str):
            return {"role": role, "content": content}
        blocks = [b.copy() for b in content] if copy else content
    else:
        blocks = []
        for content in contents:
            if isinstance(content, str):
                if content:
                    blocks.append({"type": "text", "text": content})
            elif copy:
                blocks.extend([b.copy() for b in content])
            else:
                blocks.extend(content)
    if role == "user":
        blocks = _order_user_blocks(blocks)
    return {"role": role, "content": blocks}


def _grouped(
    pairs: Iterable[tuple[str, Any]], *, copy: bool, decode: Callable[[Any], Content] | None = None
) -> list[dict[str, Any]]:
    """API messages from (role, content) pairs in view order: system skipped, same roles merged.

    With `decode`, each pair holds stored content JSON, decoded only when sent.
    """
    out: list[dict[str, Any]] = []
    role: str | None = None
    group: list[Content] = []
    for entry_role, content in pairs:
        if entry_role == "system":
            continue
        if decode is not None:
            content = decode(content)
        if entry_role != role:
            if group:
                out.append(_merge(role or "user", group, copy=copy))
            group = [content]
            role = entry_role
        else:
            group.append(content)
    if group:
        out.append(_merge(role or "user", group, copy=copy))
    return out


def to_api_messages(entries: Iterable[ViewEntry]) -> list[dict[str, Any]]:
    """The `messages` parameter for `client.messages.create` from view entries."""
    return _grouped(((e.message.role, e.content) for e in entries), copy=True)


def api_messages_from_json(rows: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """The same messages from (role, stored content JSON) rows, decoded once into fresh objects.

    This is the resume path: a view read straight from its rows, with no
    per-entry objects built and nothing copied.
    """
    return _grouped(rows, copy=False, decode=loads_stored)
