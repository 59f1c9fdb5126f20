"""The session screen: the context-token timeline, the boundary list and the active view.

Opening it reads the session row, the boundaries and the first page of the
view: its cost does not grow with the transcript.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from sessionstore.sanitize import one_line
from sessionstore.storage.read import history
from sessionstore.storage.read import paging
from sessionstore.storage.write.session import Session

from ..forkcmd import lineage_of
from ..tables import ellipsize, short_model, when
from .boundary import BoundaryScreen
from .keybar import KeyBar
from .listtable import ListTable
from .message import MessageScreen
from .requests import CopyResume, ExportSession
from .sources import ActiveView
from .timeline import Timeline
from .usage import UsageScreen
from .viewlist import ViewList

#: Boundary rows shown before the list scrolls.
BOUNDARY_ROWS = 5


class SessionScreen(Screen[None]):
    """One session; Enter on a boundary opens it, Enter on a message opens the message."""

    BINDINGS = [
        Binding("q,escape", "app.back", "Back", id="back"),
        Binding("e", "export", "Export", id="export"),
        Binding("y", "copy", "Copy resume", id="copy"),
        Binding("b", "focus_boundaries", "Boundaries", id="boundaries"),
        Binding("m", "focus_messages", "Messages", id="messages"),
        Binding("u", "usage", "Usage", id="usage", show=False),
    ]

    def __init__(self, session: Session, *, seq: int | None = None):
        super().__init__()
        self.session = session
        self.seq = seq
        self.found = history.boundaries(session, summaries=False)
        self.row = paging.session_row(session.db, session.id)
        self.ready = False

    def compose(self) -> ComposeResult:
        yield Static(self._info(), id="session-info")
        yield Timeline(paging.timeline(self.session, self.found), window=self.row.context_window, id="timeline")
        table: DataTable[Any] = ListTable(id="boundaries")
        table.display = bool(self.found)
        yield table
        yield Static(
            Text(f" active view · {paging.active_count(self.session):,} entries · ≈ replaced content · Enter opens"),
            id="view-title",
        )
        yield ViewList(ActiveView(self.session), id="messages", empty="(the view is empty)")
        yield KeyBar()

    def _info(self) -> Text:
        r = self.row
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" {ellipsize(r.title or '(untitled)', 60)}", "bold")
        text.append(
            one_line(
                f" · {r.id[:8]} · {short_model(r.model) or 'no model'} · {r.source} · "
                f"{r.messages:,} msgs · {r.view_tokens:,} tokens · {len(self.found)} ✂"
            )
        )
        lineage = lineage_of(self.session.store, self.session.id)
        if lineage:
            text.append(one_line(f" · {lineage}"), "italic")
        return text

    def on_mount(self) -> None:
        table = self.query_one("#boundaries", DataTable)
        table.styles.height = min(len(self.found), BOUNDARY_ROWS) + 1
        for label, width in (
            ("#", 3),
            ("kind", 14),
            ("trigger", 8),
            ("tokens before → after", 22),
            ("replaced", 8),
            ("time", 11),
        ):
            table.add_column(label, width=width)
        for b in self.found:
            table.add_row(
                Text(str(b.index), justify="right"),
                Text(one_line(b.kind)),
                Text(one_line(b.trigger)),
                Text(f"{b.pre_tokens:,} → {b.post_tokens:,}"),
                Text(f"{b.messages_summarized:,}", justify="right"),
                Text(when(b.timestamp, b.created_at)),
                key=str(b.index),
            )
        messages = self.query_one("#messages", ViewList)
        messages.focus()
        if self.seq is not None:
            position = paging.active_position(self.session, self.seq)
            if position is not None:
                messages.move_to(position, center=True)
        self.ready = True

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.push_screen(BoundaryScreen(self.session, int(event.row_key.value), total=len(self.found)))

    def on_view_list_selected(self, event: ViewList.Selected) -> None:
        self.app.push_screen(MessageScreen(self.session, event.row.seq))

    def action_focus_boundaries(self) -> None:
        if self.found:
            self.query_one("#boundaries", DataTable).focus()

    def action_focus_messages(self) -> None:
        self.query_one("#messages", ViewList).focus()

    def action_export(self) -> None:
        self.post_message(ExportSession(self.session.id))

    def action_copy(self) -> None:
        self.post_message(CopyResume(self.session.id))

    def action_usage(self) -> None:
        """The usage screen of this session and its sub-agents."""
        self.app.push_screen(UsageScreen(self.session.store.url, self.session.id))
