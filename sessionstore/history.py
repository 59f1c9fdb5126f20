"""The history API under a short name: `sessionstore.history.recall(session, boundary=K, query=...)`.

Browsing a session by compaction boundary: `boundaries`, `boundary`, `view_before`
(what the model saw before boundary K), `summarized_messages` (what K replaced) and
`recall` (the exact earlier messages as text within a token budget). The code lives in
`sessionstore.storage.read.history` and `sessionstore.storage.read.recall`; this module only
gives them the path the README uses.
"""

from .storage.read.history import (
    Boundary,
    BoundaryNotFound,
    boundaries,
    boundary,
    boundary_count,
    summarized_messages,
    view_at,
    view_before,
    view_tokens,
)
from .storage.read.recall import Recall, RecallError, recall

__all__ = [
    "Boundary",
    "BoundaryNotFound",
    "Recall",
    "RecallError",
    "boundaries",
    "boundary",
    "boundary_count",
    "recall",
    "summarized_messages",
    "view_at",
    "view_before",
    "view_tokens",
]
