"""One entry point for every compaction kind, as the CLI and the pipeline call it."""

from __future__ import annotations

from typing import Any, Literal

from sessionstore.storage.engine.config import Config
from sessionstore.storage.write.session import Session

from .commit import CompactionOutcome
from .full import compact_full
from .partial import compact_partial
from .session_memory import compact_with_memory
from .summarizers.base import Summarizer

SummarizerName = Literal["extractive", "anthropic"]


def make_summarizer(name: str = "extractive", **options: Any) -> Summarizer:
    """A summarizer by name: `extractive` (offline default) or `anthropic` (the real API)."""
    if name == "extractive":
        from .summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "anthropic":
        from .summarizers.anthropic import AnthropicSummarizer

        return AnthropicSummarizer(**options)
    raise ValueError(f"unknown summarizer {name!r}: use extractive or anthropic")


def compact(
    session: Session,
    *,
    summarizer: Summarizer | None = None,
    trigger: str = "manual",
    custom_instructions: str | None = None,
    from_uuid: str | None = None,
    up_to_uuid: str | None = None,
    use_memory: bool = False,
    config: Config | None = None,
) -> CompactionOutcome:
    """Compact the session's view: partial around a pivot, session memory, or full.

    With `use_memory`, session-memory compaction is tried first and full
    compaction runs only when it declines. An empty pivot uuid is refused
    (`MessageNotFound`), never read as "no pivot".
    """
    if from_uuid is not None and up_to_uuid is not None:
        raise ValueError("give either from_uuid or up_to_uuid, not both")
    session.before_local_write()
    summarizer = summarizer or make_summarizer()
    if from_uuid is not None or up_to_uuid is not None:
        return compact_partial(
            session,
            summarizer,
            pivot_uuid=from_uuid if from_uuid is not None else up_to_uuid or "",
            direction="from" if from_uuid is not None else "up_to",
            trigger=trigger,
            custom_instructions=custom_instructions,
            config=config,
        )
    if use_memory:
        outcome = compact_with_memory(session, trigger=trigger, config=config)
        if outcome is not None:
            return outcome
    return compact_full(session, summarizer, trigger=trigger, custom_instructions=custom_instructions, config=config)
