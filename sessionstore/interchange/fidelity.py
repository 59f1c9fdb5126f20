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
from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.read.history import boundaries, view_before

if TYPE_CHECKING:
    from sessionstore.storage.write.session import Session


class UnfaithfulExport(SessionStoreError):
    """The Claude Code format cannot carry this session's view or history: use the jsonl format."""


def check_claude_code(session: "Session", path: str) -> None:
    """Raise `UnfaithfulExport` when the exported file at `path` would import as another view or history."""
    importer = ClaudeCodeImport(path)
    for _ in importer.lines():
        pass
    plan = importer.plan()
    mine = [e.uuid for e in session.active_entries()]
    if _differs(session, plan.active_chain, mine):
        _refuse(session, f"its active view ({len(mine)} entries) would come back as another")
    theirs = {b.boundary_uuid: b for b in plan.boundaries}
    found = boundaries(session, summaries=False)
    if len(theirs) != len(found):
        _refuse(session, f"its {len(found)} boundaries would come back as {len(theirs)}")
    for b in found:
        again = theirs.get(b.boundary_uuid)
        if again is None or _differs(session, again.view_before, [e.uuid for e in view_before(session, b.index)]):
            _refuse(session, f"boundary {b.index} ({b.kind}) would come back with another view before it")


def _differs(session: "Session", chain: list[str], mine: list[str]) -> bool:
    """True when the chain read back holds other messages than the view (lines the store never took as
    messages, e.g. one nested too deep, are left out of both)."""
    missing = set(mine) - set(chain)
    extra = sorted(set(chain) - set(mine))
    if missing:
        return True
    for start in range(0, len(extra), 500):
        part = extra[start : start + 500]
        marks = ", ".join(f":u{i}" for i in range(len(part)))
        if (
            session.db.one(
                f"SELECT 1 FROM messages WHERE session_id = :id AND uuid IN ({marks}) LIMIT 1",
                {"id": session.id, **{f"u{i}": u for i, u in enumerate(part)}},
            )
            is not None
        ):
            return True
    return False


def _refuse(session: "Session", why: str) -> None:
    raise UnfaithfulExport(
        f"session {session.id} cannot be exported as claude-code: {why}; nothing written. "
        f"`sessionstore export {session.id} --format jsonl` keeps every view and compaction; "
        "`--as-recorded` writes every recorded message for Claude Code to resume, without the view's edits"
    )
