"""An independent checker of Messages-API request validity.

It deliberately imports nothing from `sessionstore` or `compaction`, so tests
can use it to judge what those packages produce. `check_messages` lists every
problem it finds; `assert_valid` fails a test with that list.
"""

from __future__ import annotations

import binascii
from typing import Any, Iterable

#: Block types accepted in message content (client and server tool blocks included).
KNOWN_BLOCK_TYPES = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "container_upload",
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
        "tool_search_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "compaction",
        "fallback",
        "advisor_tool_result",
        "mcp_tool_listing",
    }
)

#: Block types the API accepts only in assistant messages.
ASSISTANT_ONLY = frozenset(
    {"tool_use", "thinking", "redacted_thinking", "server_tool_use", "mcp_tool_use", "compaction"}
)

#: Block types the API accepts only in user messages.
USER_ONLY = frozenset({"tool_result", "image", "document", "search_result", "container_upload"})

#: Image media types the API accepts in a base64 source (the vision docs and the SDK's Base64ImageSourceParam).
IMAGE_MEDIA_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

#: Block types allowed inside a tool_result's content list.
TOOL_RESULT_CONTENT_TYPES = frozenset({"text", "image", "document", "search_result", "tool_reference"})


def _is_blank(text: Any) -> bool:
    """True when `text` is not a string with at least one non-whitespace character."""
    return not isinstance(text, str) or not text.strip()


def _block_problems(where: str, role: str, block: Any) -> list[str]:
    """Problems of one content block on its own (type, role, required fields)."""
    if not isinstance(block, dict):
        return [f"{where}: block is {type(block).__name__}, not an object"]
    kind = block.get("type")
    if kind not in KNOWN_BLOCK_TYPES:
        return [f"{where}: unknown block type {kind!r}"]
    problems: list[str] = []
    if role == "user" and kind in ASSISTANT_ONLY:
        problems.append(f"{where}: {kind} block in a user message")
    if role == "assistant" and kind in USER_ONLY:
        problems.append(f"{where}: {kind} block in an assistant message")
    if kind == "text" and _is_blank(block.get("text")):
        problems.append(f"{where}: empty text block")
    if kind == "tool_use":
        problems += _tool_use_fields(where, block)
    if kind == "tool_result":
        problems += _tool_result_fields(where, block)
    if kind == "image":
        problems += _image_source(where, block.get("source"))
    if kind == "document":
        problems += _document_source(where, block.get("source"))
    if kind == "thinking" and not isinstance(block.get("signature"), str):
        problems.append(f"{where}: thinking without a signature")
    if kind == "search_result":
        problems += _search_result_fields(where, block)
    return problems


def _is_base64(data: Any) -> bool:
    """True for a non-empty string of strict base64 (alphabet, padding, length)."""
    if not isinstance(data, str) or not data:
        return False
    try:
        binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return False
    return True


def _image_source(where: str, source: Any) -> list[str]:
    """An image source: base64 (accepted media type, valid data), url or file."""
    if not isinstance(source, dict):
        return [f"{where}: image without a source"]
    kind = source.get("type")
    if kind == "base64":
        problems = []
        if source.get("media_type") not in IMAGE_MEDIA_TYPES:
            problems.append(f"{where}: image media_type {source.get('media_type')!r} not accepted")
        if not _is_base64(source.get("data")):
            problems.append(f"{where}: image data is not valid base64")
        return problems
    if kind == "url":
        return [] if not _is_blank(source.get("url")) else [f"{where}: image url source without a url"]
    if kind == "file":
        return [] if not _is_blank(source.get("file_id")) else [f"{where}: image file source without a file_id"]
    return [f"{where}: image source type {kind!r} not accepted"]


def _document_source(where: str, source: Any) -> list[str]:
    """A document source: base64 PDF, plain text, content blocks, url or file."""
    if not isinstance(source, dict):
        return [f"{where}: document without a source"]
    kind = source.get("type")
    if kind == "base64":
        ok = source.get("media_type") == "application/pdf" and _is_base64(source.get("data"))
        return [] if ok else [f"{where}: document base64 source is not a valid PDF source"]
    if kind == "text":
        ok = source.get("media_type") == "text/plain" and isinstance(source.get("data"), str)
        return [] if ok else [f"{where}: document text source needs text/plain data"]
    if kind == "content":
        return (
            []
            if isinstance(source.get("content"), (str, list))
            else [f"{where}: document content source without content"]
        )
    if kind in ("url", "file"):
        key = "url" if kind == "url" else "file_id"
        return [] if not _is_blank(source.get(key)) else [f"{where}: document {kind} source without {key}"]
    return [f"{where}: document source type {kind!r} not accepted"]


def _search_result_fields(where: str, block: dict[str, Any]) -> list[str]:
    """A search_result needs a string source and title and a list of text blocks."""
    problems = []
    if _is_blank(block.get("source")):
        problems.append(f"{where}: search_result without a source")
    if not isinstance(block.get("title"), str):
        problems.append(f"{where}: search_result without a title")
    content = block.get("content")
    if not isinstance(content, list) or any(not isinstance(b, dict) or b.get("type") != "text" for b in content):
        problems.append(f"{where}: search_result content is not a list of text blocks")
    return problems


def _tool_use_fields(where: str, block: dict[str, Any]) -> list[str]:
    """A tool_use needs a string id, a string name and an object input."""
    problems = []
    if _is_blank(block.get("id")):
        problems.append(f"{where}: tool_use without an id")
    if _is_blank(block.get("name")):
        problems.append(f"{where}: tool_use without a name")
    if not isinstance(block.get("input"), dict):
        problems.append(f"{where}: tool_use input is not an object")
    return problems


def _tool_result_fields(where: str, block: dict[str, Any]) -> list[str]:
    """A tool_result needs a tool_use_id; list content holds known, non-empty blocks."""
    problems = []
    if _is_blank(block.get("tool_use_id")):
        problems.append(f"{where}: tool_result without a tool_use_id")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return problems
    if not isinstance(content, list):
        return problems + [f"{where}: tool_result content is neither a string nor a list"]
    for i, inner in enumerate(content):
        kind = inner.get("type") if isinstance(inner, dict) else None
        if kind not in TOOL_RESULT_CONTENT_TYPES:
            problems.append(f"{where}.content[{i}]: {kind!r} not allowed in a tool_result")
        elif kind == "text" and _is_blank(inner.get("text")):
            problems.append(f"{where}.content[{i}]: empty text block in a tool_result")
        elif kind == "image":
            problems += _image_source(f"{where}.content[{i}]", inner.get("source"))
        elif kind == "document":
            problems += _document_source(f"{where}.content[{i}]", inner.get("source"))
    return problems


def _blocks(content: Any) -> list[Any]:
    """The content's blocks (a string is one text block; anything else is left as is)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _ids(blocks: Iterable[Any], kind: str, key: str) -> list[Any]:
    """The `key` values of every block of type `kind` (None where missing)."""
    return [b.get(key) for b in blocks if isinstance(b, dict) and b.get("type") == kind]


def _shape_problems(index: int, message: Any) -> list[str]:
    """Problems of one message on its own: role, content shape, each block."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        return [f"{where}: not an object"]
    role = message.get("role")
    if role not in ("user", "assistant"):
        return [f"{where}: role {role!r} is not user or assistant"]
    content = message.get("content")
    if isinstance(content, str):
        return [f"{where}: empty string content"] if not content.strip() else []
    if not isinstance(content, list):
        return [f"{where}: content is neither a string nor a list"]
    if not content:
        return [f"{where}: empty content list"]
    problems: list[str] = []
    for j, block in enumerate(content):
        problems += _block_problems(f"{where}.content[{j}]", role, block)
    return problems + _order_problems(where, role, content)


def _order_problems(where: str, role: str, content: list[Any]) -> list[str]:
    """In a user message every tool_result comes before any other block."""
    if role != "user":
        return []
    seen_other = False
    for j, block in enumerate(content):
        is_result = isinstance(block, dict) and block.get("type") == "tool_result"
        if is_result and seen_other:
            return [f"{where}.content[{j}]: tool_result after a non-tool_result block"]
        seen_other = seen_other or not is_result
    return []


def _opens_with_compaction(message: Any) -> bool:
    """An assistant message whose first block is the API's compaction with a summary (the API takes it in
    place of everything before it, so a request may open with it)."""
    content = message.get("content") if isinstance(message, dict) else None
    if message.get("role") != "assistant" or not isinstance(content, list) or not content:
        return False
    first = content[0]
    return isinstance(first, dict) and first.get("type") == "compaction" and isinstance(first.get("content"), str)


def _role_problems(messages: list[Any]) -> list[str]:
    """The first message is a user message (or opens with the API's compaction) and roles alternate."""
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    problems = []
    if roles[0] != "user" and not _opens_with_compaction(messages[0]):
        problems.append(f"messages[0]: first message has role {roles[0]!r}, not user")
    for i in range(1, len(roles)):
        if roles[i] == roles[i - 1] and roles[i] in ("user", "assistant"):
            problems.append(f"messages[{i}]: two {roles[i]} messages in a row")
    return problems


def _pairing_problems(messages: list[Any], allow_pending_last: bool) -> list[str]:
    """tool_use / tool_result pairing across consecutive assistant and user messages."""
    problems: list[str] = []
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            problems += _assistant_pairing(i, blocks, messages, seen_ids, allow_pending_last)
        elif message.get("role") == "user":
            problems += _user_pairing(i, blocks, messages)
    return problems


def _assistant_pairing(
    i: int,
    blocks: list[Any],
    messages: list[Any],
    seen_ids: set[str],
    allow_pending_last: bool,
) -> list[str]:
    """Every tool_use id is unique and answered in the next message (unless pending last)."""
    problems = []
    ids = _ids(blocks, "tool_use", "id")
    for tool_id in ids:
        if tool_id in seen_ids:
            problems.append(f"messages[{i}]: duplicate tool_use id {tool_id!r}")
        seen_ids.add(tool_id)
    if i == len(messages) - 1:
        if ids and not allow_pending_last:
            problems.append(f"messages[{i}]: last assistant message has unanswered tool_use {ids}")
        return problems
    following = messages[i + 1]
    following_blocks = _blocks(following.get("content")) if isinstance(following, dict) else []
    answered = set(_ids(following_blocks, "tool_result", "tool_use_id"))
    missing = [t for t in ids if t not in answered]
    if missing:
        problems.append(f"messages[{i}]: tool_use {missing} not answered in the next message")
    return problems


def _user_pairing(i: int, blocks: list[Any], messages: list[Any]) -> list[str]:
    """Every tool_result answers a tool_use of the message just before, once."""
    result_ids = _ids(blocks, "tool_result", "tool_use_id")
    if not result_ids:
        return []
    previous = messages[i - 1] if i > 0 else None
    offered: set[str] = set()
    if isinstance(previous, dict) and previous.get("role") == "assistant":
        offered = set(_ids(_blocks(previous.get("content")), "tool_use", "id"))
    problems = []
    for tool_id in result_ids:
        if tool_id not in offered:
            problems.append(f"messages[{i}]: tool_result for {tool_id!r} answers no tool_use of the previous message")
    duplicates = sorted({t for t in result_ids if result_ids.count(t) > 1 and t is not None})
    if duplicates:
        problems.append(f"messages[{i}]: several tool_result blocks for {duplicates}")
    return problems


def check_messages(messages: list[dict[str, Any]], *, allow_pending_last: bool = True) -> list[str]:
    """Every reason the API would reject `messages` (empty list = valid)."""
    if not isinstance(messages, list) or not messages:
        return ["messages: empty (at least one message is required)"]
    problems: list[str] = []
    for i, message in enumerate(messages):
        problems += _shape_problems(i, message)
    problems += _role_problems(messages)
    problems += _pairing_problems(messages, allow_pending_last)
    return problems


def assert_valid(messages: list[dict[str, Any]], allow_pending_last: bool = True) -> None:
    """Fail with every problem listed when `messages` is not a valid API request."""
    problems = check_messages(messages, allow_pending_last=allow_pending_last)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise AssertionError(f"invalid Messages-API request ({len(problems)} problems):\n{listing}")
