"""Would a Claude Code export import back as the same session? Read it back and compare.

Claude Code's format says what a view is only through its parent chain,
logical parents and preserved segments; some views the store builds (a
partial compaction of an imported session, a snipped view) have no such
shape. Rather than write a file that imports as something else, the export
is parsed back with the importer and compared with the session: the active
view and, per boundary, the view before it, each as a set of messages (the
loader may put a tool result right after its call, the same request).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessionstore.interchange.importers.claude_code import ClaudeCodeImport
from sessionstore.storage.errors import SessionStoreError
from sessionstore.storage.history import boundaries, view_before

if TYPE_CHECKING:
    from sessionstore.storage.session import Session


class UnfaithfulExport(SessionStoreError):
    """The Claude Code format cannot carry this session's view or history: use the jsonl format."""


def check_claude_code(session: "Session", path: str) -> None:
    """Raise `UnfaithfulExport` when the exported file at `path` would import as another view or history."""
    importer = ClaudeCodeImport(path)
    for _ in importer.lines():
        pass
    plan = importer.plan()
    mine = [e.uuid for e in session.active_entries()]
    if sorted(plan.active_chain) != sorted(mine):
        _refuse(session, f"its active view ({len(mine)} entries) would come back as another "
                         f"({len(plan.active_chain)} entries)")
    theirs = {b.boundary_uuid: b for b in plan.boundaries}
    for b in boundaries(session, summaries=False):
        again = theirs.get(b.boundary_uuid)
        before = sorted(e.uuid for e in view_before(session, b.index))
        if again is None or sorted(again.view_before) != before:
            _refuse(session, f"boundary {b.index} ({b.kind}) would come back with another view before it")


def _refuse(session: "Session", why: str) -> None:
    raise UnfaithfulExport(
        f"session {session.id} cannot be exported as claude-code: {why}; nothing written. "
        f"`sessionstore export {session.id} --format jsonl` keeps every view and compaction")
