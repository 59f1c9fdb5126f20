"""Validation at the door: shape checks on one message, and the tool-pairing rule.

`normalize` turns what a caller passes (a Messages-API dict with optional
envelope keys, or an `anthropic` SDK `Message`) into a `NewMessage`, or raises
a typed `InvalidMessage`. `TailState` is the O(1) summary of the view's last
assistant turn that lets `append` enforce invariant 3 without reading the view.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping

from .apirules import check_sendable
from ..core.blocktypes import COMPACTION, KNOWN_BLOCK_TYPES, KNOWN_TYPES_LINE, sdk_dump
from ..core.errors import (
    InvalidContent,
    InvalidMessage,
    InvalidRole,
    OrphanToolResult,
    PendingToolUse,
    UnknownBlockType,
)
from ..core.types import ENVELOPE_KEYS, Content

ROLES = ("user", "assistant", "system")
TYPES_FOR_ROLE = {
    "user": ("user", "attachment"),
    "assistant": ("assistant",),
    "system": ("system",),
}
#: Every block type the store knows (kept in `blocktypes`, the one list).
BLOCK_TYPES = KNOWN_BLOCK_TYPES
#: Keys an SDK `Message` dump carries that are not part of our envelope.
_SDK_MESSAGE_KEYS = ("id", "model", "stop_reason", "stop_sequence", "container", "context_management")
_SDK_MESSAGE_KEY_SET = frozenset(_SDK_MESSAGE_KEYS)  # for one C-level membership test per message
MAX_ID_LENGTH = 100
#: Deeper JSON is refused: nothing real nests this far, and deeper values break recursion later.
MAX_DEPTH = 100
#: The usage fields the pipeline adds up before each model call (compaction.pressure.USAGE_FIELDS).
USAGE_TOKEN_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
#: Most tokens one usage field may report: far beyond any window, far below a 64-bit overflow when summed.
MAX_USAGE_TOKENS = 10**12


@dataclass(slots=True)
class NewMessage:
    """A validated message ready to be written."""

    role: str
    content: Content
    uuid: str
    type: str
    subtype: str | None = None
    parent_uuid: str | None = None
    timestamp: str | None = None
    api_message_id: str | None = None
    usage: dict[str, Any] | None = None
    is_meta: bool = False
    is_compact_summary: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    #: True when the content holds a `compaction` block (the API's own summary; see `apicompaction`).
    compaction: bool = False


def _now_iso() -> str:
    """UTC now as 2026-01-02T03:04:05.678Z (formatted by hand: isoformat costs more on every append)."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def check_timestamp(value: str | None) -> str | None:
    """`value` once it reads as an ISO-8601 time (what exports print and history sorts by); None passes."""
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise InvalidMessage(
            f"timestamp must be an ISO-8601 time such as 2026-01-02T03:04:05Z, got {value!r}"
        ) from None
    return value


def _new_uuid() -> str:
    """A time-ordered (version 7, RFC 9562) UUID string: 48 bits of Unix milliseconds, then random bits.

    Ids the store makes sort in time order, so each lands at the right edge of the
    (session_id, uuid) index instead of on a random page: that index entry then costs about
    what the seq one does on every append.
    """
    h = bytearray((time.time_ns() // 1_000_000).to_bytes(6, "big") + os.urandom(10))
    h[6] = (h[6] & 0x0F) | 0x70
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


_TAIL_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _plain(message: Any) -> Mapping[str, Any]:
    """A mapping from a dict or an SDK (pydantic) object."""
    if isinstance(message, Mapping):
        return message
    plain = sdk_dump(message)
    if plain is None:
        raise InvalidMessage(f"a message must be a dict, got {type(message).__name__}")
    return plain


def _plain_content(content: Any) -> Content:
    """Content with SDK block objects turned into dicts (copies, so later caller edits don't leak in)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidContent(f"content must be a string or a list of blocks, got {type(content).__name__}")
    blocks = [block.copy() for block in content if type(block) is dict]  # the common case: plain dicts only
    if len(blocks) == len(content):
        return blocks
    blocks = []
    for i, block in enumerate(content, 1):
        if type(block) is dict:
            blocks.append(dict(block))
            continue
        if not isinstance(block, Mapping):
            dumped = sdk_dump(block)
            if dumped is None:
                raise InvalidContent(f"content block {i} must be an object, got {type(block).__name__}")
            block = dumped
        blocks.append(dict(block))
    return blocks


def check_blocks(content: Content, *, allow_unknown: bool = False) -> bool:
    """Every block has a `type` and the fields its known type needs; True when one is a `compaction` block.

    A type the store does not know is refused, naming the known ones, unless `allow_unknown`
    (a message from an API response, or a caller who opted in): then it is kept as it is.
    """
    if isinstance(content, str):
        return False
    if not content:
        raise InvalidContent("content must not be an empty list")
    compaction = False
    for i, block in enumerate(content, 1):  # counted from 1, as a person reads
        kind = block.get("type")
        if not isinstance(kind, str) or not kind:
            raise UnknownBlockType(f"content block {i} has no 'type'")
        if kind not in BLOCK_TYPES:
            if allow_unknown:
                continue
            raise UnknownBlockType(
                f"content block {i} has unknown type {kind!r} (known: {KNOWN_TYPES_LINE}); a block the API "
                "returned is kept when the whole response is appended, or when unknown blocks are allowed"
            )
        if kind == COMPACTION:
            compaction = True
        if kind == "text" and not isinstance(block.get("text"), str):
            raise InvalidContent(f"content block {i} (text) needs a string 'text'")
        if kind == "tool_use":
            _check_id(block.get("id"), f"content block {i} (tool_use) 'id'")
            if not isinstance(block.get("name"), str):
                raise InvalidContent(f"content block {i} (tool_use) needs a string 'name'")
        if kind == "tool_result":
            _check_id(block.get("tool_use_id"), f"content block {i} (tool_result) 'tool_use_id'")
            inner = block.get("content")
            if inner is not None and not isinstance(inner, (str, list)):
                raise InvalidContent(f"content block {i} (tool_result) content must be a string or list")
    return compaction


def _check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidContent(f"{what} must be a non-empty string")
    if len(value) > 200:
        raise InvalidContent(f"{what} is longer than 200 characters")
    if "\x00" in value:
        raise InvalidContent(f"{what} contains a NUL character")


def check_usage(usage: Mapping[str, Any]) -> None:
    """Refuse token counts no API reports (negative, non-finite, absurdly large): the pipeline sums them into a column."""
    for key in USAGE_TOKEN_FIELDS:
        value = usage.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not 0 <= value <= MAX_USAGE_TOKENS:
            raise InvalidMessage(f"usage.{key} must be between 0 and {MAX_USAGE_TOKENS:,}, got {value!r}")


def check_depth(value: Any, what: str, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON nested deeper than `limit`, the value itself being level 1 (checked level by level, no recursion)."""
    level = [value]
    depth = 1
    while depth <= limit:
        below = []
        for item in level:
            if type(item) is dict:
                item = item.values()
            elif type(item) is not list:
                continue
            for child in item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        if not below:
            return
        level = below
        depth += 1
    raise InvalidContent(f"{what} is nested deeper than {limit} levels")


def storable_text(text: str) -> str:
    """Derived text (a preview, notes) as a TEXT column can hold it: NUL, which PostgreSQL refuses, becomes U+FFFD.

    Only text derived from a message goes through here; the message itself keeps every character.
    """
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def check_encodable(text: str, what: str) -> None:
    """Refuse text that is not valid Unicode (lone surrogates cannot be stored as UTF-8)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidContent(f"{what} is not valid Unicode (a lone surrogate at {exc.start})") from None


def _opt_str(value: Any, name: str, limit: int = MAX_ID_LENGTH) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidMessage(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise InvalidMessage(f"{name} is longer than {limit} characters")
    if "\x00" in value:
        raise InvalidMessage(f"{name} contains a NUL character")
    check_encodable(value, name)
    return value


_ALLOWED_KEYS = frozenset({"role", "content", *ENVELOPE_KEYS})


def _message_data(message: Any) -> tuple[dict[str, Any], bool]:
    """The message as a dict of allowed keys, and whether it came from an API response.

    An SDK `Message` (or its dump) is mapped onto the envelope; what the server did besides
    answering (`context_management`) goes into the metadata. A response is an SDK object, or a
    dict carrying the response's `id` and `model` (or `"type": "message"`).
    """
    sdk = type(message) is not dict and not isinstance(message, Mapping)
    data = message if type(message) is dict else dict(_plain(message))
    if data.get("type") != "message" and _SDK_MESSAGE_KEY_SET.isdisjoint(data):
        return data, sdk
    from_api = sdk or data.get("type") == "message" or ("id" in data and "model" in data)
    data = dict(data)
    if data.get("type") == "message" or from_api:
        if data.get("type") == "message":
            data.pop("type")
        data.setdefault("api_message_id", data.get("id"))
        metadata = dict(data.get("metadata") or {})
        for key in ("model", "stop_reason", "context_management"):
            if data.get(key) is not None:
                metadata[key] = data[key]
        for key in [k for k in data if k not in _ALLOWED_KEYS and k not in _SDK_MESSAGE_KEY_SET]:
            value = data.pop(key)  # a response field newer than this list (stop_details...): kept, not refused
            if value is not None:
                metadata[key] = value
        data["metadata"] = metadata
    for key in _SDK_MESSAGE_KEYS:
        data.pop(key, None)
    return data, from_api


def normalize(message: Any, *, sendable: bool = True, allow_unknown_blocks: bool = False) -> NewMessage:
    """Validate one message's shape and fill in its envelope; raises `InvalidMessage`.

    With `sendable` (the append door), user and assistant content must also be
    what the Messages API accepts (`apirules`); importers pass False to keep a
    source's record as it was (their view repair keeps refused pieces out).
    Block types the store does not know are kept verbatim on a message from an API response,
    or with `allow_unknown_blocks`; a hand-written message with one is refused.
    This runs on every append, so the common case (a plain dict) avoids copies and ABC checks.
    """
    data, from_api = _message_data(message)
    compaction = False
    if not _ALLOWED_KEYS.issuperset(data):
        unknown = set(data) - _ALLOWED_KEYS
        hint = (
            "; this is a line of a sessionstore jsonl export: bring the file in with `sessionstore import jsonl FILE`"
            if {"seq", "message"} <= unknown
            else ""
        )
        raise InvalidMessage(f"unknown message field(s): {', '.join(sorted(map(str, unknown)))}{hint}")
    role = data.get("role")
    if role not in ROLES:
        raise InvalidRole(f"role must be one of user, assistant, system; got {role!r}")
    if "content" not in data:
        raise InvalidContent("message has no 'content'")
    content = data["content"]
    if type(content) is not str:
        content = _plain_content(content)
        compaction = check_blocks(content, allow_unknown=from_api or allow_unknown_blocks)
        check_depth(content, "content")
    elif not content and role != "system":
        raise InvalidContent("content must not be empty (the API refuses an empty message)")
    if sendable and role != "system":
        check_sendable(role, content)
    mtype = data.get("type") or role
    if mtype not in TYPES_FOR_ROLE[role]:
        raise InvalidMessage(f"type {mtype!r} does not go with role {role!r}")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        if not isinstance(usage, Mapping):
            raise InvalidMessage("usage must be an object")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        if not isinstance(metadata, Mapping):
            raise InvalidMessage("metadata must be an object")
    if usage is not None:
        check_depth(usage, "usage")
        check_usage(usage)
    if metadata:
        check_depth(metadata, "metadata")
    uuid = _opt_str(data.get("uuid"), "uuid") or _new_uuid()
    if not uuid.strip():
        raise InvalidMessage("uuid must not be blank")
    get = data.get
    return NewMessage(
        role,
        content,
        uuid,
        mtype,
        _opt_str(get("subtype"), "subtype", 64),
        _opt_str(get("parent_uuid"), "parent_uuid"),
        check_timestamp(_opt_str(get("timestamp"), "timestamp", 40)) or _now_iso(),
        _opt_str(get("api_message_id"), "api_message_id", 200),
        dict(usage) if usage is not None else None,
        bool(get("is_meta", False)),
        bool(get("is_compact_summary", False)),
        dict(metadata),
        compaction,
    )


def tool_use_ids(content: Content) -> list[str]:
    """ids of the tool_use blocks in assistant content."""
    if isinstance(content, str):
        return []
    return [b["id"] for b in content if b.get("type") == "tool_use"]


def tool_result_ids(content: Content) -> list[str]:
    """tool_use_ids answered by the tool_result blocks in user content."""
    if isinstance(content, str):
        return []
    return [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]


@dataclass(slots=True)
class TailState:
    """The view's last assistant turn, as far as append validation needs it."""

    last_role: str | None = None
    api_message_id: str | None = None
    turn_ids: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)

    @classmethod
    def loads(cls, text: str | None) -> "TailState":
        data = json.loads(text) if text else {}
        return cls(
            last_role=data.get("r"),
            api_message_id=data.get("a"),
            turn_ids=list(data.get("t", ())),
            answered=list(data.get("d", ())),
        )

    def dumps(self) -> str:
        return _TAIL_ENCODE({"r": self.last_role, "a": self.api_message_id, "t": self.turn_ids, "d": self.answered})

    def copy(self) -> "TailState":
        return TailState(self.last_role, self.api_message_id, list(self.turn_ids), list(self.answered))

    @property
    def pending(self) -> list[str]:
        """tool_use ids of the last assistant turn that have no result yet."""
        done = set(self.answered)
        return [i for i in self.turn_ids if i not in done]

    def accept(self, msg: NewMessage) -> None:
        """Check `msg` against the tail and advance it; raises without changing state."""
        if msg.role == "system":
            return
        if msg.role == "assistant":
            self._accept_assistant(msg)
        else:
            self._accept_user(msg)

    def _accept_assistant(self, msg: NewMessage) -> None:
        ids = tool_use_ids(msg.content)
        if self.last_role is None:
            raise InvalidMessage("the first message sent to the model must be a user message")
        same_response = (
            self.last_role == "assistant"
            and msg.api_message_id is not None
            and msg.api_message_id == self.api_message_id
        )
        continuing = self.last_role == "assistant" and not self.pending
        if same_response or continuing:
            clash = set(ids) & set(self.turn_ids)
            if clash or len(set(ids)) != len(ids):
                raise InvalidMessage(f"duplicate tool_use id(s) in one turn: {sorted(clash or ids)}")
            self.turn_ids = self.turn_ids + ids
            self.api_message_id = msg.api_message_id or self.api_message_id
            return
        if self.pending:
            raise PendingToolUse(
                f"a new assistant turn while tool_use id(s) {', '.join(self.pending)} still await their tool_result"
            )
        if len(set(ids)) != len(ids):
            raise InvalidMessage("duplicate tool_use id(s) in one assistant message")
        self.last_role = "assistant"
        self.api_message_id = msg.api_message_id
        self.turn_ids = ids
        self.answered = []

    def _accept_user(self, msg: NewMessage) -> None:
        results = tool_result_ids(msg.content)
        if results:
            expected = set(self.pending)
            for rid in results:
                if rid not in expected:
                    raise OrphanToolResult(
                        f"tool_result for {rid!r} answers no pending tool_use of the preceding assistant turn"
                    )
                expected.discard(rid)
            self.answered = self.answered + results
        self.last_role = "user"

    @classmethod
    def from_messages(cls, messages: Iterable[tuple[str, str | None, Content]]) -> "TailState":
        """Rebuild the state from (role, api_message_id, content) of a view, in order."""
        state = cls()
        for role, api_id, content in messages:
            if role == "assistant":
                ids = tool_use_ids(content)
                if state.last_role == "assistant":
                    state.turn_ids = state.turn_ids + ids
                else:
                    state.turn_ids, state.answered = ids, []
                state.api_message_id = api_id
                state.last_role = "assistant"
            elif role == "user":
                state.answered = state.answered + tool_result_ids(content)
                state.last_role = "user"
        return state
