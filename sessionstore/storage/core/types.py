"""Plain data shapes shared by storage, compaction, import and export.

A `StoredMessage` is one transcript row (immutable once written); a `ViewEntry`
is one position of an active (or past) view pointing at a stored message,
possibly with replaced content (a cleared or spilled tool result).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "system"]
MessageType = Literal["user", "assistant", "system", "attachment"]
Content = str | list[dict[str, Any]]

#: The subtype of the system message each compaction appends.
BOUNDARY_SUBTYPE = "compact_boundary"

#: Envelope keys a caller may pass to `append` next to `role` and `content`.
ENVELOPE_KEYS = (
    "uuid",
    "parent_uuid",
    "type",
    "subtype",
    "timestamp",
    "api_message_id",
    "usage",
    "is_meta",
    "is_compact_summary",
    "metadata",
)


@dataclass(slots=True, eq=True)
class StoredMessage:
    """One message of the transcript: a Messages-API message plus its envelope.

    Treat it as immutable (it mirrors a row that is never updated); it is not
    declared frozen only because frozen construction costs 5x on the resume path.
    """

    seq: int
    uuid: str
    role: str
    type: str
    content: Content
    subtype: str | None = None
    parent_uuid: str | None = None
    timestamp: str | None = None
    api_message_id: str | None = None
    usage: dict[str, Any] | None = None
    is_meta: bool = False
    is_compact_summary: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    tokens: int = 0

    @property
    def is_sent(self) -> bool:
        """True when the message goes to the model (user/assistant, not system)."""
        return self.role in ("user", "assistant")

    def to_dict(self) -> dict[str, Any]:
        """The envelope and message as a JSON-ready dict (the export shape)."""
        return {
            "seq": self.seq,
            "uuid": self.uuid,
            "parent_uuid": self.parent_uuid,
            "type": self.type,
            "subtype": self.subtype,
            "timestamp": self.timestamp,
            "api_message_id": self.api_message_id,
            "usage": self.usage,
            "is_meta": self.is_meta,
            "is_compact_summary": self.is_compact_summary,
            "metadata": self.metadata,
            "tokens": self.tokens,
            "message": {"role": self.role, "content": self.content},
        }


@dataclass(slots=True, eq=True)
class ViewEntry:
    """One position of a view: a transcript message, maybe with replaced content (treat as immutable)."""

    position: int
    message: StoredMessage
    content: Content
    tokens: int
    replaced: bool = False

    # Convenience accessors so view-level code reads naturally.
    @property
    def uuid(self) -> str:
        return self.message.uuid

    @property
    def role(self) -> str:
        return self.message.role

    @property
    def type(self) -> str:
        return self.message.type

    @property
    def subtype(self) -> str | None:
        return self.message.subtype

    @property
    def api_message_id(self) -> str | None:
        return self.message.api_message_id

    @property
    def seq(self) -> int:
        return self.message.seq

    def to_dict(self) -> dict[str, Any]:
        """JSON shape used by `view --json` entries."""
        return {
            "position": self.position,
            "uuid": self.uuid,
            "seq": self.seq,
            "role": self.role,
            "type": self.type,
            "subtype": self.subtype,
            "api_message_id": self.api_message_id,
            "tokens": self.tokens,
            "replaced": self.replaced,
            "is_compact_summary": self.message.is_compact_summary,
            "content": self.content,
        }
