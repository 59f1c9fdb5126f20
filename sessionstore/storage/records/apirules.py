"""What the Messages API accepts in a user or assistant message, checked at the door.

The rules follow the API's request schema (the `anthropic` SDK's `*BlockParam`
types, generated from it) and its documented refusals:

* text: a string with at least one non-whitespace character (the API answers
  "text content blocks must contain non-whitespace text"); string content the same.
* tool_use / server_tool_use / mcp_tool_use: `input` is an object; only in
  assistant messages. thinking and redacted_thinking: only in assistant
  messages, with a string `signature` / `data`. tool_result: only in user messages;
  its content is a string or a list of text, image, document, search_result or
  tool_reference blocks, each checked like a top-level one.
* image: `source` is base64 (`media_type` image/jpeg, image/png, image/gif or
  image/webp, `data` valid base64), url (`url`) or file (`file_id`).
* document: `source` is base64 (application/pdf, valid base64), text
  (text/plain, string `data`), content (a string or text/image blocks), url or file.
* search_result: string `source` and `title`, a list of text blocks as content.
* compaction (only in assistant messages): `content` a non-empty string, or null
  when the server's compaction failed; `signature` and `encrypted_content` strings.
  Other blocks the API returns (`blocktypes.RESPONSE_BLOCK_TYPES`) and unknown ones
  are the API's to check: they are sent back exactly as they came.

Each rule costs O(1) per block except the base64 check (linear in the image).
"""

from __future__ import annotations

import binascii
from typing import Any, Mapping

from ..core.errors import InvalidContent

IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
ASSISTANT_ONLY = frozenset(
    {"tool_use", "server_tool_use", "mcp_tool_use", "thinking", "redacted_thinking", "compaction"}
)
USER_ONLY = frozenset({"tool_result"})
TOOL_USE_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
TOOL_RESULT_CONTENT_TYPES = frozenset({"text", "image", "document", "search_result", "tool_reference"})
DOCUMENT_CONTENT_TYPES = frozenset({"text", "image"})


def is_blank(text: Any) -> bool:
    """True for a string with no non-whitespace character (isspace stops at the first one)."""
    return isinstance(text, str) and (not text or text.isspace())


def check_sendable(role: str, content: Any) -> None:
    """Refuse user/assistant content the Messages API would refuse; raises `InvalidContent`."""
    if isinstance(content, str):
        if is_blank(content):
            raise InvalidContent("content is only whitespace (the API refuses text without a non-whitespace character)")
        return
    for i, block in enumerate(content):
        where = f"content block {i + 1} ({block.get('type')})"
        kind = block.get("type")
        if role == "user" and kind in ASSISTANT_ONLY:
            raise InvalidContent(f"{where} is only accepted in an assistant message")
        if role == "assistant" and kind in USER_ONLY:
            raise InvalidContent(f"{where} is only accepted in a user message")
        _check_block(where, block)


def _check_block(where: str, block: Mapping[str, Any]) -> None:
    """One block's fields, by type (types not listed here need only what check_blocks checks)."""
    kind = block.get("type")
    if kind == "text":
        if is_blank(block.get("text")):
            raise InvalidContent(f"{where} text is empty or only whitespace (the API refuses it)")
    elif kind in TOOL_USE_TYPES:
        tool_input = block.get("input")
        if not isinstance(tool_input, dict):
            raise InvalidContent(f"{where} input must be an object, got {type(tool_input).__name__}")
    elif kind == "tool_result":
        _check_nested(where, block.get("content"), TOOL_RESULT_CONTENT_TYPES)
    elif kind == "image":
        _check_image_source(where, block.get("source"))
    elif kind == "document":
        _check_document_source(where, block.get("source"))
    elif kind == "search_result":
        _check_search_result(where, block)
    elif kind == "thinking":
        _require_str(where, block, "thinking", allow_empty=True)
        _require_str(where, block, "signature", allow_empty=True)
    elif kind == "redacted_thinking":
        _require_str(where, block, "data")
    elif kind == "compaction":
        _check_compaction(where, block)


def _check_compaction(where: str, block: Mapping[str, Any]) -> None:
    """The API's summary: content a non-empty string, or null for a failed compaction; opaque fields strings."""
    content = block.get("content")
    if content is not None and (not isinstance(content, str) or not content):
        raise InvalidContent(f"{where} content must be a non-empty string, or null for a failed compaction")
    for key in ("signature", "encrypted_content"):
        value = block.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidContent(f"{where} {key} must be a string")


def _check_nested(where: str, content: Any, allowed: frozenset[str]) -> None:
    """A content list nested in a block: known inner types, each checked like a top-level block."""
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidContent(f"{where} content must be a string or a list of blocks")
    for j, inner in enumerate(content):
        kind = inner.get("type") if isinstance(inner, Mapping) else None
        if kind not in allowed:
            raise InvalidContent(
                f"{where} content block {j + 1}: {kind!r} is not accepted there (one of {', '.join(sorted(allowed))})"
            )
        _check_block(f"{where} content block {j + 1} ({kind})", inner)


def _require_str(where: str, block: Mapping[str, Any], key: str, allow_empty: bool = False) -> str:
    """`block[key]` as a string; refuses a missing, non-string or (unless allowed) empty one."""
    value = block.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise InvalidContent(f"{where} needs a non-empty string {key!r}")
    return value


def _source(where: str, source: Any) -> tuple[Mapping[str, Any], Any]:
    """The source object and its type; refuses a missing or non-object source."""
    if not isinstance(source, Mapping):
        raise InvalidContent(f"{where} needs a 'source' object")
    return source, source.get("type")


def _check_image_source(where: str, raw: Any) -> None:
    """base64 (an accepted image media_type, valid base64 data), url or file."""
    source, kind = _source(where, raw)
    if kind == "base64":
        media_type = source.get("media_type")
        if media_type not in IMAGE_MEDIA_TYPES:
            raise InvalidContent(
                f"{where} media_type {media_type!r} is not one the API accepts ({', '.join(IMAGE_MEDIA_TYPES)})"
            )
        _check_base64(where, source.get("data"))
    elif kind == "url":
        _require_str(f"{where} source", source, "url")
    elif kind == "file":
        _require_str(f"{where} source", source, "file_id")
    else:
        raise InvalidContent(f"{where} source type {kind!r} is not base64, url or file")


def _check_document_source(where: str, raw: Any) -> None:
    """base64 PDF, plain text, content blocks, url or file."""
    source, kind = _source(where, raw)
    if kind == "base64":
        if source.get("media_type") != "application/pdf":
            raise InvalidContent(
                f"{where} base64 media_type must be 'application/pdf', got {source.get('media_type')!r}"
            )
        _check_base64(where, source.get("data"))
    elif kind == "text":
        if source.get("media_type") != "text/plain":
            raise InvalidContent(f"{where} text media_type must be 'text/plain', got {source.get('media_type')!r}")
        _require_str(f"{where} source", source, "data", allow_empty=True)
    elif kind == "content":
        _check_nested(f"{where} source", source.get("content"), DOCUMENT_CONTENT_TYPES)
    elif kind == "url":
        _require_str(f"{where} source", source, "url")
    elif kind == "file":
        _require_str(f"{where} source", source, "file_id")
    else:
        raise InvalidContent(f"{where} source type {kind!r} is not base64, text, content, url or file")


def _check_search_result(where: str, block: Mapping[str, Any]) -> None:
    """A search_result: string source and title, a list of text blocks."""
    _require_str(where, block, "source")
    _require_str(where, block, "title", allow_empty=True)
    content = block.get("content")
    if not isinstance(content, list):
        raise InvalidContent(f"{where} content must be a list of text blocks")
    _check_nested(where, content, frozenset({"text"}))


def _check_base64(where: str, data: Any) -> None:
    """Strict base64 (the alphabet, padding, length a multiple of 4), decoded in C."""
    if not isinstance(data, str) or not data:
        raise InvalidContent(f"{where} needs base64 'data'")
    try:
        binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise InvalidContent(f"{where} data is not valid base64") from None
