"""What the pipeline's layers remember about one session between calls.

Its own module so the pipeline (which updates it) and `persisted` (which saves and loads it)
both depend on it, and neither on the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .budget import BudgetState
from .microcompact import MicroState
from .snip import SnipState


@dataclass(slots=True)
class PipelineState:
    """Everything the layers remember about one session between calls."""

    view_version: int
    scanned: int = 0
    budget: BudgetState = field(default_factory=BudgetState)
    snip: SnipState = field(default_factory=SnipState)
    micro: MicroState = field(default_factory=MicroState)
    usage_index: int | None = None
    #: View tokens when the session notes were last written (None: not known yet).
    memory_tokens: int | None = None
    #: (view_version, scanned) as last saved to the store (None: never saved).
    saved: tuple[int, int] | None = None
