"""Typed errors of the pipeline that callers act on."""

from __future__ import annotations

from sessionstore.storage.core.errors import SessionStoreError

from .summarizers.base import SummarizerError


class NothingToCompact(SummarizerError):
    """The view holds nothing a compaction could summarize."""


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


class CompactionWouldNotShrink(NothingToCompact):
    """The summary plus what is kept would be as big as the view or bigger: nothing was written."""

    def __init__(self, pre_tokens: int, post_tokens: int):
        super().__init__(
            f"compaction declined: it would not shrink the view ({pre_tokens:,} -> about {post_tokens:,} tokens); "
            "nothing was written"
        )
        self.pre_tokens = pre_tokens
        self.post_tokens = post_tokens


class InvalidQuerySource(SessionStoreError, ValueError):
    """`prepare` was given a query source it does not know (a typo would silently change the layers)."""
