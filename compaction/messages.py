"""The messages a compaction records: boundary, summary, re-injected attachments."""

from __future__ import annotations

import uuid as uuid_mod
from typing import Any

from sessionstore.storage.core.types import BOUNDARY_SUBTYPE
from sessionstore.storage.records.validate import NewMessage, normalize

from .prompt import summary_message_text

__all__ = ["BOUNDARY_SUBTYPE", "attachment_message", "boundary_message", "is_boundary", "summary_message"]


def boundary_message(
    *,
    trigger: str,
    kind: str,
    pre_tokens: int,
    post_tokens: int,
    messages_summarized: int,
    preserved_segment: dict[str, str | None] | None,
    custom_instructions: str | None,
    summarizer: str | None,
    extra: dict[str, Any] | None = None,
) -> NewMessage:
    """The `system` message with subtype compact_boundary; its metadata tells the story."""
    metadata = {
        "trigger": trigger,
        "kind": kind,
        "pre_tokens": pre_tokens,
        "post_tokens": post_tokens,
        "messages_summarized": messages_summarized,
        "preserved_segment": preserved_segment,
        "custom_instructions": custom_instructions,
        "summarizer": summarizer,
        **(extra or {}),
    }
    return normalize(
        {
            "role": "system",
            "subtype": BOUNDARY_SUBTYPE,
            "content": f"Conversation compacted ({kind}, {trigger})",
            "uuid": str(uuid_mod.uuid4()),
            "metadata": metadata,
        }
    )


def summary_message(text: str, *, truncated: bool, summarizer: str, parent_uuid: str) -> NewMessage:
    """The user message carrying the summary; flagged so tools can tell it apart."""
    return normalize(
        {
            "role": "user",
            "content": summary_message_text(text, truncated=truncated),
            "uuid": str(uuid_mod.uuid4()),
            "parent_uuid": parent_uuid,
            "is_compact_summary": True,
            "metadata": {"summarizer": summarizer, "truncated": truncated},
        }
    )


def attachment_message(text: str, *, kind: str, **metadata: Any) -> NewMessage:
    """A user message of type attachment (a re-read file, the plan, a skill)."""
    return normalize(
        {
            "role": "user",
            "type": "attachment",
            "content": text,
            "uuid": str(uuid_mod.uuid4()),
            "metadata": {"attachment": kind, "reinjected": True, **metadata},
        }
    )


def is_boundary(entry: Any) -> bool:
    """True for a compact_boundary entry."""
    return bool(entry.role == "system" and entry.subtype == BOUNDARY_SUBTYPE)
