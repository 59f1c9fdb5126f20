"""Typed errors of the pipeline that callers act on."""

from __future__ import annotations

from sessionstore.storage.errors import SessionStoreError


class ContextFull(SessionStoreError):
    """The view is past the collapse blocking level and nothing more can be folded.

    Raised by `Pipeline.prepare` while context collapse is enabled (which keeps
    auto-compact off): the caller must compact (manually or reactively) before
    the next model call.
    """

    def __init__(self, tokens: int, limit: int):
        super().__init__(
            f"context full: {tokens:,} tokens is at or above the collapse blocking level of {limit:,}; "
            "compact the session before the next model call"
        )
        self.tokens = tokens
        self.limit = limit
