"""The parent link of each transcript message, as a chain-following loader (Claude Code's) needs it.

A message's parent is the entry just before it in the first view it appeared
in: the view it was appended to, or the one the rewrite that wrote it (a
boundary, a summary, a re-injected attachment) produced. A boundary has no
parent; its logical parent is the last entry of the view it replaced, and the
run a compaction kept is reattached by its preserved segment. Views are read
one version at a time (each at most a view's size), in version order: a
message first appears in the version where its seq first exceeds every seq
seen before, so one integer tells new from old.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from sessionstore.storage.read.history import Boundary, boundaries, view_at
from sessionstore.storage.core.types import BOUNDARY_SUBTYPE

if TYPE_CHECKING:
    from sessionstore.storage.write.session import Session
    from sessionstore.storage.core.types import StoredMessage


@dataclass(frozen=True, slots=True)
class Link:
    """Where one message hangs in the chain."""

    parent: str | None
    logical_parent: str | None = None
    boundary: Boundary | None = None
    #: (head, anchor, tail) of the one run of older messages the boundary's new view shows, if one.
    segment: tuple[str, str, str] | None = None


def linked_transcript(session: "Session", *, after_seq: int = 0) -> Iterator[tuple["StoredMessage", Link]]:
    """Every message after `after_seq`, in order, with its link (a message in no view follows the previous one)."""
    by_seq = {b.boundary_seq: b for b in boundaries(session)}
    views = _Versions(session)
    previous: str | None = None
    for message in session.transcript():
        parent = views.parent_of(message.seq, previous)
        b = by_seq.get(message.seq)
        if message.seq > after_seq:
            if b is not None and message.subtype == BOUNDARY_SUBTYPE:
                yield (
                    message,
                    Link(None, views.last_of(b.replaced_version), b, views.segment_of(b.replaced_version + 1)),
                )
            else:
                yield message, Link(parent)
        previous = message.uuid


class _Versions:
    """The view versions read in order, each once: who precedes each message where it first appears."""

    def __init__(self, session: "Session") -> None:
        self.session = session
        self.next_version = 0
        self.newest = session.refresh_state().view_version
        self.horizon = 0
        self.parents: dict[int, str | None] = {}
        self.lasts: dict[int, str | None] = {}
        self.segments: dict[int, tuple[str, str, str] | None] = {}

    def parent_of(self, seq: int, default: str | None) -> str | None:
        """The entry before `seq` in the first view showing it, else `default`."""
        while seq > self.horizon and self.next_version <= self.newest:
            self._read(self.next_version)
            self.next_version += 1
        return self.parents.pop(seq, default)

    def last_of(self, version: int) -> str | None:
        """The last entry of view `version` (a boundary's logical parent); read already, the boundary being later."""
        return self.lasts.get(version)

    def segment_of(self, version: int) -> tuple[str, str, str] | None:
        """The run of older messages view `version` shows, when there is exactly one (kept and late ones)."""
        return self.segments.get(version)

    def _read(self, version: int) -> None:
        entries = view_at(self.session, version)
        old = [i for i, entry in enumerate(entries) if entry.seq <= self.horizon]
        for i, entry in enumerate(entries):
            if entry.seq > self.horizon:
                self.parents[entry.seq] = entries[i - 1].uuid if i else None
        self.horizon = max([self.horizon, *(e.seq for e in entries)])
        self.lasts[version] = entries[-1].uuid if entries else None
        one_run = old and old[0] > 0 and old[-1] - old[0] == len(old) - 1
        self.segments[version] = (
            (entries[old[0]].uuid, entries[old[0] - 1].uuid, entries[old[-1]].uuid) if one_run else None
        )
