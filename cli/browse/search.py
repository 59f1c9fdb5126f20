"""The browser's full-text search: `store.search` on a connection of its own, with a clear answer.

A store without `search` (an older version of the library) gives a message
instead of hits, so the search box says why it found nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessionstore import SessionStore, SessionStoreError

#: Hits one search lists.
SEARCH_LIMIT = 200
UNAVAILABLE = "search is not available in this version of sessionstore"


@dataclass
class SearchOutcome:
    """The hits of one query, or the reason there are none to show."""

    hits: list[Any] = field(default_factory=list)
    error: str | None = None


def run_search(url: str, query: str, limit: int = SEARCH_LIMIT) -> SearchOutcome:
    """Search every session for `query`; errors become a message, never an exception."""
    if not query.strip():
        return SearchOutcome()
    with SessionStore.open(url) as store:
        search = getattr(store, "search", None)
        if search is None:
            return SearchOutcome(error=UNAVAILABLE)
        try:
            return SearchOutcome(hits=list(search(query, limit=limit)))
        except SessionStoreError as exc:
            return SearchOutcome(error=" ".join(str(exc).split()))
