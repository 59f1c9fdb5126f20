"""A message list of any length: one line per view entry, drawn from pages fetched on demand.

A Line API widget: its virtual height is the row count, and drawing a line
asks the source for the page holding it (cached, least recently used pages
dropped), so a 100,000-entry view costs what the screen shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from sessionstore.sanitize import one_line
from sessionstore.storage.read.paging import ViewRow

from ..tables import ellipsize
from .sources import RowSource

PAGE = 100
CACHED_PAGES = 32


def kind_of(row: ViewRow) -> str:
    """What a row is, in a word: the role, or what a system/attachment message is for."""
    if row.subtype == "compact_boundary":
        return "boundary"
    if row.is_compact_summary:
        return "summary"
    if row.type == "attachment":
        return "attach"
    if row.role == "system":
        return (row.subtype or "system")[:9]
    return row.role


def clock(timestamp: str | None) -> str:
    """HH:MM (local time) of an ISO 8601 timestamp, or nothing."""
    try:
        parsed = datetime.fromisoformat(timestamp) if timestamp else None
    except ValueError:
        return ""
    return parsed.astimezone().strftime("%H:%M") if parsed is not None else ""


class ViewList(ScrollView, can_focus=True):
    """Rows of a view, with a cursor; Enter selects."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup,ctrl+b", "page(-1)", "Page up", show=False),
        Binding("pagedown,ctrl+f,space", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", "First", show=False),
        Binding("end,G", "jump(-1)", "Last", show=False),
        Binding("enter", "select", "Open", show=True, id="open"),
    ]

    COMPONENT_CLASSES = {
        "viewlist--cursor",
        "viewlist--user",
        "viewlist--assistant",
        "viewlist--system",
        "viewlist--dim",
        "viewlist--marked",
    }

    DEFAULT_CSS = """
    ViewList {
        background: $surface;
        color: $foreground;
        height: 1fr;
        & > .viewlist--cursor { background: $block-cursor-blurred-background; }
        &:focus > .viewlist--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .viewlist--user { color: $text-success; }
        & > .viewlist--assistant { color: $text-primary; }
        & > .viewlist--system { color: $text-warning; }
        & > .viewlist--dim { color: $text-muted; }
        & > .viewlist--marked { color: $text-error; }
    }
    """

    cursor: reactive[int] = reactive(0)

    @dataclass
    class Selected(Message):
        """Enter on a row."""

        view_list: "ViewList"
        row: ViewRow

        @property
        def control(self) -> "ViewList":
            """The list the row was chosen in: what `@on(ViewList.Selected, "#id")` matches against."""
            return self.view_list

    def __init__(
        self,
        source: RowSource,
        *,
        marked: frozenset[int] = frozenset(),
        empty: str = "(empty)",
        id: str | None = None,
        classes: str | None = None,
    ):
        super().__init__(id=id, classes=classes)
        self.source = source
        self.marked = marked
        self.empty = empty
        self.total = source.count()
        self._pages: LRUCache[int, list[ViewRow]] = LRUCache(CACHED_PAGES)
        self.virtual_size = Size(0, self.total)

    # ------------------------------------------------------------- data

    def row_at(self, index: int) -> ViewRow | None:
        """The row at `index`, fetching its page when it is not cached."""
        if not 0 <= index < self.total:
            return None
        number = index // PAGE
        page = self._pages.get(number)
        if page is None:
            page = self.source.rows(number * PAGE, PAGE)
            self._pages[number] = page
        offset = index - number * PAGE
        return page[offset] if offset < len(page) else None

    @property
    def current(self) -> ViewRow | None:
        """The row under the cursor."""
        return self.row_at(self.cursor)

    # ---------------------------------------------------------- drawing

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        index = self.scroll_offset.y + y
        if self.total == 0 and y == 0:
            return Strip([Segment(self.empty, self.get_component_rich_style("viewlist--dim"))]).crop_extend(
                0, width, self.rich_style
            )
        row = self.row_at(index)
        if row is None:
            return Strip.blank(width, self.rich_style)
        line = self._line(row, width)
        if index == self.cursor:
            line.stylize(self.get_component_rich_style("viewlist--cursor"))
        segments = list(line.render(self.app.console))
        return Strip(segments).crop_extend(0, width, self.rich_style)

    def _line(self, row: ViewRow, width: int) -> Text:
        """`#pos kind tokens time preview`, fitted to the width."""
        kind = kind_of(row)
        style = self._kind_style(row)
        mark = "✂" if row.seq in self.marked else ("≈" if row.replaced else " ")
        head = f"{row.position:>6} {mark}"
        tail = f" {row.tokens:>6} {clock(row.timestamp):>5} "
        room = max(0, width - len(head) - 10 - len(tail))
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        text.append(head, self.get_component_rich_style("viewlist--marked") if row.seq in self.marked else None)
        text.append(f" {one_line(kind):<9}", style)
        text.append(tail, self.get_component_rich_style("viewlist--dim"))
        text.append(ellipsize(row.preview, room))
        return text

    def _kind_style(self, row: ViewRow) -> Style:
        if row.role == "user" and row.type == "user" and not row.is_compact_summary:
            return self.get_component_rich_style("viewlist--user")
        if row.role == "assistant":
            return self.get_component_rich_style("viewlist--assistant")
        return self.get_component_rich_style("viewlist--system")

    # ----------------------------------------------------------- moving

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()

    def _scroll_cursor_into_view(self) -> None:
        top = self.scroll_offset.y
        height = max(1, self.scrollable_content_region.height)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)

    def move_to(self, index: int, *, center: bool = False) -> None:
        """Put the cursor on `index` (clamped) and scroll it into view; `center` it for a jump from elsewhere."""
        if self.total:
            self.cursor = max(0, min(self.total - 1, index))
            if center:
                self.call_after_refresh(self._center_cursor)

    def _center_cursor(self) -> None:
        """Scroll so the cursor sits mid-screen (once the list knows its height)."""
        height = max(1, self.scrollable_content_region.height)
        self.scroll_to(y=max(0, self.cursor - height // 2), animate=False)

    def on_resize(self, event: events.Resize) -> None:
        self._scroll_cursor_into_view()

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump(self, where: int) -> None:
        self.move_to(self.total - 1 if where < 0 else where)

    def action_select(self) -> None:
        row = self.current
        if row is not None:
            self.post_message(self.Selected(self, row))

    def on_click(self, event: events.Click) -> None:
        self.move_to(self.scroll_offset.y + event.y)
