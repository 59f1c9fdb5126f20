"""The browser's widgets on their own: ViewList and Timeline in a small harness app, fed from memory.

No store and no shared transcripts: each test builds the rows it needs, so the widgets' own promises
(cursor, paging, empty list, resize, the Selected message, the curve) are checked wherever the tests run.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from textual import on
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from sessionstore.cli.browse.timeline import Timeline
from sessionstore.cli.browse.viewlist import PAGE, ViewList
from sessionstore.storage.read.paging import TimelinePoint, ViewRow


class MemoryRows:
    """A RowSource over a list, counting the pages the widget asks for."""

    version: int | None = None

    def __init__(self, count: int):
        self.data = [
            ViewRow(
                position=i,
                seq=i + 1,
                uuid=f"uuid-{i:05d}",
                role="user" if i % 2 == 0 else "assistant",
                type="user" if i % 2 == 0 else "assistant",
                subtype=None,
                timestamp=None,
                tokens=10 + i,
                replaced=False,
                is_compact_summary=False,
                is_meta=False,
                preview=f"message number {i}",
            )
            for i in range(count)
        ]
        self.fetched: list[int] = []

    def count(self) -> int:
        return len(self.data)

    def rows(self, start: int, count: int) -> list[ViewRow]:
        self.fetched.append(start)
        return self.data[start : start + count]


class Harness(App[None]):
    """Two lists (#main, #side) and, optionally, a timeline; records what `@on(..., "#main")` received."""

    def __init__(self, main: MemoryRows, side: MemoryRows | None = None, points: list[TimelinePoint] | None = None):
        super().__init__()
        self.main_rows, self.side_rows, self.points = main, side or MemoryRows(3), points
        self.chosen: list[tuple[Any, int]] = []

    def compose(self) -> ComposeResult:
        if self.points is not None:
            yield Timeline(self.points, window=200_000, id="timeline")
        yield ViewList(self.main_rows, id="main", empty="(no messages)")
        yield ViewList(self.side_rows, id="side")

    @on(ViewList.Selected, "#main")
    def main_selected(self, event: ViewList.Selected) -> None:
        self.chosen.append((event.control, event.row.position))


Steps = Callable[[Pilot[None], Harness], Awaitable[None]]


def run(app: Harness, steps: Steps, size: tuple[int, int] = (80, 24)) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await steps(pilot, app)

    asyncio.run(main())


def main_list(app: Harness) -> ViewList:
    return app.query_one("#main", ViewList)


def visible(listing: ViewList) -> range:
    top = listing.scroll_offset.y
    return range(top, top + listing.scrollable_content_region.height)


# ------------------------------------------------------------------ ViewList


def test_the_cursor_moves_and_stays_in_bounds() -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        listing = main_list(app)
        listing.focus()
        await pilot.press("down", "down", "j", "up")
        seen["after moves"] = listing.current
        await pilot.press("up", "up", "up", "k")
        seen["at top"] = listing.cursor
        await pilot.press("end")
        seen["end"] = listing.current
        await pilot.press("down")
        seen["past end"] = listing.cursor
        await pilot.press("g")
        seen["home"] = listing.cursor

    rows = MemoryRows(50)
    run(Harness(rows), steps)
    assert seen["after moves"] == rows.data[2]
    assert seen["at top"] == 0
    assert seen["end"] == rows.data[49] and seen["past end"] == 49
    assert seen["home"] == 0


def test_paging_moves_a_screen_and_fetches_only_the_pages_drawn() -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        listing = main_list(app)
        listing.focus()
        seen["height"] = listing.scrollable_content_region.height
        await pilot.press("pagedown")
        seen["one page"] = listing.cursor
        seen["visible after page"] = listing.cursor in visible(listing)
        await pilot.press("pageup")
        seen["back"] = listing.cursor
        await pilot.press("end")
        await pilot.pause()
        seen["end visible"] = listing.cursor in visible(listing)
        seen["last line"] = listing.render_line(listing.cursor - listing.scroll_offset.y).text

    rows = MemoryRows(10_000)
    run(Harness(rows), steps, size=(80, 24))
    assert seen["height"] > 2
    assert seen["one page"] == seen["height"] - 1
    assert seen["visible after page"] and seen["end visible"]
    assert seen["back"] == 0
    assert "message number 9999" in seen["last line"]
    assert set(rows.fetched) <= {0, (10_000 // PAGE - 1) * PAGE}, "only the first and the last page are read"


def test_an_empty_list_says_so_and_selects_nothing() -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        listing = main_list(app)
        listing.focus()
        await pilot.press("down", "pagedown", "end", "enter")
        seen["cursor"] = listing.cursor
        seen["current"] = listing.current
        seen["first line"] = listing.render_line(0).text

    app = Harness(MemoryRows(0))
    run(app, steps)
    assert seen["cursor"] == 0 and seen["current"] is None
    assert "(no messages)" in seen["first line"]
    assert app.chosen == []


def test_a_resize_keeps_the_cursor_on_screen() -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        listing = main_list(app)
        listing.focus()
        listing.move_to(35)
        await pilot.pause()
        seen["before"] = listing.cursor in visible(listing)
        await pilot.resize_terminal(60, 12)
        await pilot.pause()
        seen["height"] = listing.scrollable_content_region.height
        seen["after"] = listing.cursor in visible(listing)
        seen["cursor"] = listing.cursor
        seen["width"] = len(listing.render_line(0).text)

    run(Harness(MemoryRows(100)), steps, size=(100, 60))
    assert seen["before"] and seen["after"], "the cursor row is visible before and after the terminal shrinks"
    assert seen["cursor"] == 35 and seen["height"] < 12
    assert seen["width"] <= 60


def test_selected_carries_its_list_so_on_can_filter_by_id() -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        app.query_one("#side", ViewList).focus()
        await pilot.press("down", "enter")
        seen["after side"] = list(app.chosen)
        listing = main_list(app)
        listing.focus()
        await pilot.press("down", "down", "enter")
        seen["list"] = listing

    app = Harness(MemoryRows(10))
    run(app, steps)
    assert seen["after side"] == [], "Enter in #side does not reach the handler for #main"
    assert app.chosen == [(seen["list"], 2)]


# ------------------------------------------------------------------ Timeline


def _rendered(app: Harness) -> list[str]:
    return app.query_one("#timeline", Timeline).render().plain.splitlines()


def test_the_timeline_draws_the_curve_and_marks_each_compaction() -> None:
    # Grows to 9000 tokens by seq 40, compacts to 1000, grows to 6000 by seq 80, compacts to 500, ends at 2000.
    points = [
        TimelinePoint(0, 0),
        TimelinePoint(40, 9000),
        TimelinePoint(40, 1000),
        TimelinePoint(80, 6000),
        TimelinePoint(80, 500),
        TimelinePoint(100, 2000),
    ]
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        seen["wide"] = _rendered(app)
        await pilot.resize_terminal(50, 24)
        await pilot.pause()
        seen["narrow"] = _rendered(app)

    run(Harness(MemoryRows(5), points=points), steps, size=(100, 24))
    title, *bars, axis = seen["wide"]
    assert "peak 9,000" in title and "now 2,000" in title and "window 200,000" in title
    assert "✂1" in axis and "✂2" in axis and axis.index("✂1") < axis.index("✂2")
    assert len(axis) == 100 and all(len(b) == 100 for b in bars)
    tallest = max(range(100), key=lambda x: sum(b[x] != " " for b in bars))
    assert 30 <= tallest <= 45, "the highest column sits at the first compaction (seq 40 of 100)"
    assert len(seen["narrow"][-1]) == 50, "a resize redraws the curve at the new width"


def test_an_empty_timeline_draws_a_flat_line() -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None], app: Harness) -> None:
        seen["lines"] = _rendered(app)

    run(Harness(MemoryRows(0), points=[]), steps)
    title, *bars, axis = seen["lines"]
    assert "peak 0" in title and "now 0" in title
    assert set(axis) == {"─"} and all(set(b) <= {" "} for b in bars)
