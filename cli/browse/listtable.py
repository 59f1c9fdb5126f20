"""The browser's tables of rows (sessions, search hits, boundaries, days) with the keys every list takes.

Textual's DataTable moves its row cursor with the arrows and PgUp/PgDn only (its Home/End
scroll sideways); the README promises `j`/`k`, Home/End and `g`/`G` on every list, as the
view lists have. A table read a page at a time loads the rest before End goes to the last row.
"""

from __future__ import annotations

from typing import Any, Callable

from textual.binding import Binding
from textual.widgets import DataTable


class ListTable(DataTable[Any]):
    """A row-cursor DataTable that also moves with j/k, g/G and Home/End."""

    BINDINGS = [
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
    ]

    def __init__(self, *, load_rest: Callable[[], None] | None = None, **options: Any) -> None:
        super().__init__(cursor_type="row", **options)
        #: Reads the rows not loaded yet (a paged list), before End moves to the last one.
        self.load_rest = load_rest

    def action_first(self) -> None:
        """The first row."""
        if self.row_count:
            self.move_cursor(row=0)

    def action_last(self) -> None:
        """The last row, once every page is loaded."""
        if self.load_rest is not None:
            self.load_rest()
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)
