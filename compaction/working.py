"""The view as the pipeline's layers change it in memory, and the one rewrite that commits it.

Layers never write: they replace entry contents, remove entries, insert new
messages and queue persisted decisions (spill blobs, cleared ids) on a
`WorkingView`. `commit_working` then writes blobs, replacement decisions and
the view rewrite in one transaction (invariant 2). A dry run simply never
commits, so it reports exactly what a real run would do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Sequence

from sessionstore.storage.codecs.blobs import put_blob
from sessionstore.storage.core.faults import fault_in
from sessionstore.storage.write.replacements import Replacement, save_cleared, save_spills
from sessionstore.storage.write.rewrite import Add, Keep, RewriteResult, commit_rewrite
from sessionstore.storage.records.rows import stored_from_new
from sessionstore.storage.records.state import ViewSnapshot
from sessionstore.storage.write.session import Session
from sessionstore.storage.codecs.tokens import estimate_content
from sessionstore.storage.core.types import Content, ViewEntry
from sessionstore.storage.records.validate import NewMessage, normalize

#: Subtypes of the system messages the layers append; never snipped, never counted as notices.
MARKER_SUBTYPES = frozenset({"snip_marker", "microcompact_boundary", "collapse_commit", "compact_boundary"})
#: The rewrite kind each layer's marker names (fault points are `rewrite.<kind>.<group>`).
MARKER_KINDS = {"collapse_commit": "collapse", "snip_marker": "snip", "microcompact_boundary": "microcompact"}


@dataclass(slots=True)
class LayerReport:
    """What one layer did: whether it acted, items touched, the view's token estimate before/after."""

    layer: str
    acted: bool = False
    tokens_before: int = 0
    tokens_after: int = 0
    items: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "acted": self.acted,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "items": self.items,
            "details": self.details,
        }


@dataclass(slots=True)
class Spill:
    """A spill decision waiting to be written: the decision row and the original bytes."""

    decision: Replacement
    data: bytes


class WorkingView:
    """A mutable copy of a snapshot's entries with a running token total."""

    def __init__(self, snapshot: ViewSnapshot):
        self.snapshot = snapshot
        self.entries: list[ViewEntry] = snapshot.entries
        self.tokens = snapshot.view_tokens
        self.changed = False
        self.structure_changed = False
        self.reordered = False
        self.spills: list[Spill] = []
        self.cleared: list[str] = []
        self.cleared_text = ""
        self._new: dict[int, NewMessage] = {}
        self._replaced: dict[int, tuple[Content, int]] = {}

    # ------------------------------------------------------------ changes

    def replace_content(self, index: int, content: Content) -> int:
        """Show `content` for entry `index`; returns the tokens saved (negative if it grew)."""
        entry = self.entries[index]
        tokens = estimate_content(content)
        self.entries[index] = ViewEntry(entry.position, entry.message, content, tokens, replaced=True)
        self.tokens += tokens - entry.tokens
        if entry.seq > 0:
            self._replaced[entry.seq] = (content, tokens)
        self.changed = True
        return entry.tokens - tokens

    def remove(self, indexes: set[int]) -> int:
        """Drop entries from the view (the transcript keeps them); returns tokens freed."""
        if not indexes:
            return 0
        freed = sum(self.entries[i].tokens for i in indexes)
        self.entries = [e for i, e in enumerate(self.entries) if i not in indexes]
        self.tokens -= freed
        self.changed = self.structure_changed = self.reordered = True
        return freed

    def insert(self, index: int, message: NewMessage) -> ViewEntry:
        """Place a new message (recorded in the transcript on commit) at `index`."""
        tokens = estimate_content(message.content)
        seq = -(len(self._new) + 1)
        self._new[seq] = message
        entry = ViewEntry(index, stored_from_new(seq, message, tokens), message.content, tokens)
        self.reordered = self.reordered or index < len(self.entries)
        self.entries.insert(index, entry)
        self.tokens += tokens
        self.changed = self.structure_changed = True
        return entry

    def append(self, message: NewMessage) -> ViewEntry:
        """Place a new message at the end of the view (markers go here)."""
        return self.insert(len(self.entries), message)

    # ------------------------------------------------------------ commit

    def plan(self) -> list[Keep | Add]:
        """Every entry of the new view in order, as `commit_rewrite` wants it."""
        plan: list[Keep | Add] = []
        for entry in self.entries:
            if entry.seq < 0:
                plan.append(Add(self._new[entry.seq]))
            elif entry.seq in self._replaced:
                content, tokens = self._replaced[entry.seq]
                plan.append(Keep(entry.seq, content, tokens))
            else:
                plan.append(Keep(entry.seq))
        return plan

    def kind(self) -> str:
        """Which layers this rewrite commits: "spill", "snip", ... or several joined by "+"."""
        kinds = ["spill"] if self.spills else []
        kinds += [MARKER_KINDS[m.subtype] for m in self._new.values() if m.subtype in MARKER_KINDS]
        return "+".join(dict.fromkeys(kinds)) or "plan"


def commit_working(session: Session, work: WorkingView) -> RewriteResult:
    """Blobs, replacement decisions and the rewrite, all in one transaction."""
    plan = work.plan()
    kind = work.kind()

    def body(db: Any) -> RewriteResult:
        for spill in work.spills:
            put_blob(db, spill.data)
        fault_in(db, "after_blobs")
        save_spills(db, session.id, [s.decision for s in work.spills])
        if work.cleared:
            save_cleared(db, session.id, work.cleared, work.cleared_text)
        fault_in(db, "after_decisions")
        return commit_rewrite(
            session,
            base_version=work.snapshot.view_version,
            snapshot_last_seq=work.snapshot.last_seq,
            plan=plan,
            kind=kind,
        )

    try:
        return session.db.run_write(body, session_id=session.id, point=f"rewrite.{kind}")
    finally:
        session.invalidate()


def system_marker(subtype: str, text: str, metadata: dict[str, Any], now: datetime) -> NewMessage:
    """A `system` message recording what a layer did (stored and exported, never sent)."""
    return normalize(
        {"role": "system", "subtype": subtype, "content": text, "timestamp": iso(now), "metadata": metadata}
    )


def iso(moment: datetime) -> str:
    """An ISO-8601 UTC timestamp with milliseconds, as the store writes them."""
    utc = moment.astimezone(timezone.utc)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def blocks(entry: ViewEntry) -> Sequence[dict[str, Any]]:
    """The entry's content blocks (a plain string has none)."""
    return entry.content if isinstance(entry.content, list) else ()
