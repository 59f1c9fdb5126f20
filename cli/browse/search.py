"""The browser's full-text search: `store.search` on a connection of its own, errors as a message.

A search catches the index up before it queries (its own write transactions, off the
append path), so it runs in a worker thread and never blocks the screen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessionstore import SessionStore, SessionStoreError

#: Hits one search lists.
SEARCH_LIMIT = 200


@dataclass
class SearchOutcome:
    """The hits of one query, or the reason there are none to show."""

    hits: list[Any] = field(default_factory=list)
    error: str | None = None


def run_search(url: str, query: str, limit: int = SEARCH_LIMIT) -> SearchOutcome:
    """Search every session for `query`; a bad query becomes a message, never an exception."""
    with SessionStore.open(url) as store:
        try:
            return SearchOutcome(hits=list(store.search(query, limit=limit)))
        except SessionStoreError as exc:
            return SearchOutcome(error=" ".join(str(exc).split()))
