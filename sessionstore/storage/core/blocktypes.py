"""The content block types the store knows, in one place.

Two kinds of knowledge: `VALIDATED_BLOCK_TYPES` are checked field by field at
the door (`validate.check_blocks`, `apirules`); `RESPONSE_BLOCK_TYPES` are
blocks the Messages API returns whose fields are the API's business: the store
knows them by name, keeps them verbatim and sends them back unchanged
(`compaction` also gets its few documented rules). A block type in neither set
is unknown: accepted, verbatim, only on a message that came from an API
response (or when the caller opts in), refused on a hand-written one.
tests/test_api_blocks.py checks both sets against the installed SDK's content
block unions, so a new SDK release shows what is missing here.
"""

from __future__ import annotations

from typing import Any, Mapping

#: Block types whose fields the door checks.
VALIDATED_BLOCK_TYPES = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
        "tool_reference",
    }
)

#: The API's own compaction summary (threshold, on-demand or background compaction).
COMPACTION = "compaction"

#: Block types the API returns that the store knows by name and keeps verbatim.
RESPONSE_BLOCK_TYPES = frozenset(
    {COMPACTION, "fallback", "advisor_tool_result", "mcp_tool_listing", "tool_search_tool_result"}
)

#: Every block type the store knows; a hand-written message may use these and no other.
KNOWN_BLOCK_TYPES = VALIDATED_BLOCK_TYPES | RESPONSE_BLOCK_TYPES

#: The known types as one line, for the error that refuses an unknown one.
KNOWN_TYPES_LINE = ", ".join(sorted(KNOWN_BLOCK_TYPES))


def compaction_block(content: Any) -> Mapping[str, Any] | None:
    """The first `compaction` block of message content, or None (O(1) for string content)."""
    if isinstance(content, str):
        return None
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == COMPACTION:
            found: Mapping[str, Any] = block
            return found
    return None


def compaction_summary(block: Mapping[str, Any] | None) -> str | None:
    """The summary text of a compaction block; None when there is no block or compaction failed (null content)."""
    if block is None:
        return None
    text = block.get("content")
    return text if isinstance(text, str) and text else None


def compaction_line(block: Mapping[str, Any]) -> str:
    """A compaction block in one line, for listings: `[compaction] <its summary>`, or `[compaction failed]`;
    never its encrypted copy."""
    summary = compaction_summary(block)
    return f"[compaction] {' '.join(summary.split())}" if summary else "[compaction failed]"


def sdk_dump(obj: Any) -> dict[str, Any] | None:
    """An SDK (pydantic) object as the API sent it: its wire names (`from`, not `from_`), the fields it
    carried, nulls included, extra fields of block types the SDK does not know kept; None for other objects."""
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        try:
            dumped: dict[str, Any] = to_dict(mode="json", use_api_names=True, exclude_unset=True, warnings=False)
            return dumped
        except TypeError:
            pass
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        plain: dict[str, Any] = dump(mode="json", exclude_none=True)
        return plain
    return None
