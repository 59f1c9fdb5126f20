"""Where a message list gets its rows: the active view, a past view, a preserved segment.

Each source knows its length from one cheap query and hands out pages by
position; the list widget asks only for the pages it draws.
"""

from __future__ import annotations

from typing import Protocol

from sessionstore.storage.read import paging
from sessionstore.storage.read.paging import ViewRow
from sessionstore.storage.write.session import Session


class RowSource(Protocol):
    """A view (or part of one) read by position."""

    #: The view version the rows belong to (None: the active view).
    version: int | None

    def count(self) -> int:
        """How many rows there are."""

    def rows(self, start: int, count: int) -> list[ViewRow]:
        """Rows [start, start + count), fewer at the end."""


class ActiveView:
    """The active view: what the model sees on the next call."""

    version: int | None = None

    def __init__(self, session: Session):
        self.session = session

    def count(self) -> int:
        return paging.active_count(self.session)

    def rows(self, start: int, count: int) -> list[ViewRow]:
        return paging.active_rows(self.session, start, count)


class PastView:
    """The view as it stood at the end of a replaced version (what the model saw before a boundary).

    `through` keeps it to the seqs up to there: a background API compaction's request (history.request_end).
    """

    def __init__(self, session: Session, version: int, floor: int = 0, through: int | None = None):
        self.session = session
        self.version: int | None = version
        self.floor = floor
        self.through = through

    def count(self) -> int:
        return paging.past_count(self.session, int(self.version or 0), self.floor, self.through)

    def rows(self, start: int, count: int) -> list[ViewRow]:
        return paging.past_rows(
            self.session, int(self.version or 0), start, count, floor=self.floor, through=self.through
        )


class Segment:
    """The run of a view between two keys (a compaction's preserved segment in the view it made)."""

    def __init__(self, session: Session, version: int, keys: tuple[int, int] | None):
        self.session = session
        self.version: int | None = version
        self.keys = keys

    def count(self) -> int:
        if self.keys is None:
            return 0
        return paging.segment_count(self.session, int(self.version or 0), self.keys)

    def rows(self, start: int, count: int) -> list[ViewRow]:
        if self.keys is None:
            return []
        return paging.past_rows(self.session, int(self.version or 0), start, count, key_range=self.keys)
