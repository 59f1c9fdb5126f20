"""The pin step of a compaction: plan the pins it carries, then summarize within the budget they leave.

Full and partial compaction take this step alike. The carried pins share the summary message with
the summary, and `summary_budget` counts their text as already held, so they are planned first.
"""

from __future__ import annotations

from typing import Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import ViewEntry

from .commit import summary_budget
from .pinning import PinPlan, plan_pins
from .summarize import GatedSummary, summarize_gated
from .summarizers.base import Summarizer


def summarize_with_pins(
    session: Session,
    summarizer: Summarizer,
    summarized: Sequence[ViewEntry],
    kept: Sequence[ViewEntry],
    *,
    config: Config,
    custom_instructions: str | None,
) -> tuple[PinPlan, GatedSummary]:
    """The pins the compaction carries (detected ones too, when enabled), and the gated summary of `summarized`."""
    pins = plan_pins(session, summarized, kept, auto=config.auto_pin_instructions)
    gated = summarize_gated(
        summarizer,
        summarized,
        cwd=session.cwd,
        config=config,
        custom_instructions=custom_instructions,
        budget=summary_budget(session, config, pins),
    )
    return pins, gated
