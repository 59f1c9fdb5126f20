"""The sessions screen: every session newest first, a filter, a search box and a preview pane.

The list is read a page at a time (the next page when the cursor nears the
end); the filter runs one bounded query per keystroke; the preview reads
the highlighted session's first and latest typed messages and its latest
boundaries, nothing more.
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from sessionstore import SessionStore
from sessionstore.sanitize import one_line
from sessionstore.storage.read import paging
from sessionstore.storage.read.paging import SessionRow
from sessionstore.storage.derived.search import MARK_CLOSE, MARK_OPEN

from ..tables import ellipsize, short_model, short_path, short_time, when
from .keybar import KeyBar
from .listtable import ListTable
from .requests import CopyResume, ExportSession, OpenHit, OpenSession, Search
from .search import SearchOutcome
from .usage import UsageScreen

PAGE = 100
#: Below this width the cwd column is left to the preview pane.
WIDE = 100


class SessionsScreen(Screen[None]):
    """Sessions, newest first; Enter opens one."""

    BINDINGS = [
        Binding("q", "back_or_quit", "Quit", id="quit"),
        Binding("slash", "search", "Search", key_display="/", id="search"),
        Binding("f", "filter", "Filter", id="filter"),
        Binding("e", "export", "Export", id="export"),
        Binding("y", "copy", "Copy resume", id="copy"),
        Binding("u", "usage", "Usage", id="usage", show=False),
        Binding("escape", "clear", "Clear", show=False),
    ]

    def __init__(self, store: SessionStore) -> None:
        """`store`: the browser's store, read a page at a time on the UI thread."""
        super().__init__()
        self.store = store
        self.rows: list[SessionRow] = []
        self.more = False
        self.hits: list[Any] = []
        self.title_width = 20

    def compose(self) -> ComposeResult:
        with Horizontal(id="boxes"):
            yield Input(placeholder="f: filter by title, cwd, model, id", id="filter")
            yield Input(placeholder="/: search every message", id="search")
        yield ListTable(zebra_stripes=True, id="sessions", load_rest=self.load_rest)
        yield ListTable(zebra_stripes=True, id="hits", classes="hidden")
        yield Static(id="preview")
        yield KeyBar()

    def action_usage(self) -> None:
        """The usage screen of every session."""
        self.app.push_screen(UsageScreen(self.store.url))

    def on_mount(self) -> None:
        self.load(reset=True)
        self.query_one("#sessions", DataTable).focus()

    # ----------------------------------------------------------------- the list

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#sessions", DataTable)

    def load(self, *, reset: bool) -> None:
        """Read the first page (reset) or the next one, for the current filter."""
        text = self.query_one("#filter", Input).value
        offset = 0 if reset else len(self.rows)
        page = paging.list_sessions(self.store.db, text=text, limit=PAGE + 1, offset=offset)
        self.more = len(page) > PAGE
        page = page[:PAGE]
        self.rows = page if reset else self.rows + page
        if reset:
            self._columns()
        for row in page:
            self.table.add_row(*self._cells(row), key=row.id)
        if reset:
            self._preview(self.rows[0] if self.rows else None)

    def load_rest(self) -> None:
        """Every page not read yet (End on the list goes to the last session, not the last one loaded)."""
        while self.more:
            self.load(reset=False)

    def _columns(self) -> None:
        """(Re)build the columns for the screen's width: the title takes what the others leave."""
        table = self.table
        table.clear(columns=True)
        wide = self.app.size.width >= WIDE
        fixed = [("model", 10), ("msgs", 6), ("tokens", 7), ("✂", 2), ("last", 11), ("source", 6)]
        if wide:
            fixed.insert(0, ("cwd", 22))
        used = sum(w + 2 for _, w in fixed) + 2 + 2
        self.title_width = max(12, self.app.size.width - used)
        table.add_column("title", width=self.title_width, key="title")
        for label, width in fixed:
            table.add_column(label, width=width, key=label)

    def _cells(self, row: SessionRow) -> list[Text]:
        title = Text(ellipsize(row.title or row.id, self.title_width))
        cells = [title]
        if self.app.size.width >= WIDE:
            cells.append(Text(short_path(row.cwd, 22)))
        source = {"claude-code": "claude", "native": "native"}.get(row.source, row.source)
        cells += [
            Text(ellipsize(short_model(row.model), 10)),
            Text(f"{row.messages:,}", justify="right"),
            Text(f"{row.view_tokens:,}", justify="right"),
            Text(str(row.boundaries or ""), justify="right"),
            Text(short_time(row.updated_at)),
            Text(one_line(source[:6])),
        ]
        return cells

    def on_resize(self) -> None:
        if self.rows:
            self._columns()
            for row in self.rows:
                self.table.add_row(*self._cells(row), key=row.id)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "sessions":
            index = event.cursor_row
            if 0 <= index < len(self.rows):
                self._preview(self.rows[index])
            if self.more and index >= len(self.rows) - 5:
                self.load(reset=False)
        elif 0 <= event.cursor_row < len(self.hits):
            self._hit_preview(self.hits[event.cursor_row])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "sessions" and event.row_key.value:
            self.post_message(OpenSession(str(event.row_key.value)))
        elif event.data_table.id == "hits" and 0 <= event.cursor_row < len(self.hits):
            hit = self.hits[event.cursor_row]
            self.post_message(OpenHit(hit.session, int(hit.seq), getattr(hit, "boundary", None)))

    @property
    def highlighted(self) -> SessionRow | None:
        """The session under the cursor."""
        index = self.table.cursor_row
        return self.rows[index] if self.rows and 0 <= index < len(self.rows) else None

    # --------------------------------------------------------------- the preview

    def _preview(self, row: SessionRow | None) -> None:
        pane = self.query_one("#preview", Static)
        if row is None:
            pane.update(
                Text(
                    "No sessions match."
                    if self.query_one("#filter", Input).value
                    else "No sessions yet: import some with `sessionstore import claude-code PATH`."
                )
            )
            return
        session = self.store.get(row.id)
        first = paging.typed_user_text(session, latest=False)
        latest = paging.typed_user_text(session, latest=True)
        recent = paging.recent_boundaries(self.store.db, row.id)
        text = Text(no_wrap=False)
        text.append(ellipsize(row.title or "(untitled)", 300), "bold")
        text.append(
            "\n"
            + one_line(
                f"{row.id} · {row.source} · {row.model or 'no model'} · {row.messages:,} "
                f"messages · {row.view_tokens:,} of {row.context_window:,} tokens in view · "
                f"last message {when(row.last_timestamp)}"
            )
        )
        text.append("\ncwd: " + one_line(row.cwd or "-"))
        text.append("\nfirst: ", "bold")
        text.append(ellipsize(first or "-", 400))
        text.append("\nlatest: ", "bold")
        text.append(ellipsize(latest or "-", 400))
        text.append(f"\nboundaries: {row.boundaries}", "bold")
        for b in recent:
            text.append(one_line(f"  ✂ {b.kind}/{b.trigger} {b.pre_tokens:,} → {b.post_tokens:,}"))
        pane.update(text)

    # ----------------------------------------------------------------- the boxes

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.load(reset=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.query_one("#preview", Static).update(Text(one_line(f"searching for {event.value!r}…")))
            self.post_message(Search(event.value))
        else:
            self.table.focus()

    def show_hits(self, query: str, outcome: SearchOutcome) -> None:
        """List the hits of a search (or say why there are none) in place of the sessions."""
        hits_table = self.query_one("#hits", DataTable)
        self.hits = outcome.hits
        hits_table.clear(columns=True)
        pane = self.query_one("#preview", Static)
        if outcome.error:
            pane.update(Text(one_line(outcome.error)))
            self.notify(one_line(outcome.error), severity="warning", markup=False)
            return
        width = self.app.size.width
        hits_table.add_column("session", width=14)
        hits_table.add_column("role", width=9)
        hits_table.add_column("where", width=8)
        hits_table.add_column("snippet", width=max(10, width - 14 - 9 - 8 - 8 - 4))
        for hit in self.hits:
            where = "view" if getattr(hit, "boundary", None) in (None, 0) else f"✂{hit.boundary}"
            hits_table.add_row(
                Text(ellipsize(hit.title or hit.session, 14)),
                Text(one_line(str(hit.role))),
                Text(where),
                marked_snippet(hit.snippet),
            )
        self.table.add_class("hidden")
        hits_table.remove_class("hidden")
        hits_table.focus()
        pane.update(
            Text(
                one_line(
                    f"{len(self.hits)} hit(s) for {query!r}; Enter opens the session at the message, "
                    "Escape or q goes back to the sessions."
                )
            )
        )
        if self.hits:
            self._hit_preview(self.hits[0])

    def _hit_preview(self, hit: Any) -> None:
        text = Text()
        text.append(one_line(f"{hit.title or hit.session}"), "bold")
        text.append("\n" + one_line(f"{hit.session} · seq {hit.seq} · {hit.role} · {hit.timestamp or ''}"))
        text.append("\ncwd: " + one_line(hit.cwd or "-"))
        text.append("\n")
        text.append_text(marked_snippet(hit.snippet))
        self.query_one("#preview", Static).update(text)

    # -------------------------------------------------------------------- verbs

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear(self) -> None:
        """Escape: leave the boxes, close the hits, then clear the filter."""
        hits = self.query_one("#hits", DataTable)
        if not hits.has_class("hidden"):
            hits.add_class("hidden")
            self.table.remove_class("hidden")
            self.hits = []
            self._preview(self.highlighted)
        elif self.query_one("#filter", Input).value and not isinstance(self.focused, Input):
            self.query_one("#filter", Input).value = ""
        self.table.focus()

    async def action_back_or_quit(self) -> None:
        """q: close the search hits when they are shown, else the app's back (which quits from here)."""
        if not self.query_one("#hits", DataTable).has_class("hidden"):
            self.action_clear()
        else:
            await self.run_action("app.back")

    def action_export(self) -> None:
        row = self.highlighted
        if row is not None:
            self.post_message(ExportSession(row.id))

    def action_copy(self) -> None:
        row = self.highlighted
        if row is not None:
            self.post_message(CopyResume(row.id))


def marked_snippet(snippet: Any) -> Text:
    """A hit's snippet on one line, the matches (between « and ») in bold; never read as markup."""
    flat = one_line(" ".join(str(snippet or "").split()))
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, part in enumerate(re.split(f"[{re.escape(MARK_OPEN + MARK_CLOSE)}]", flat)):
        text.append(part, "bold reverse" if i % 2 else None)
    return text
