"""The usage screen: cost by day as a bar chart drawn in block characters, and the days as a table.

Opened with `u` from the sessions list (every session) or from a session (it and its
sub-agents). It reads `usage_report` by day in a worker thread on its own connection: the
report answers from the usage rollup after counting what was appended since the last one
(as a search first catches its index up), so its cost follows the days shown, not the messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Static

from sessionstore import SessionStore, SessionStoreError
from sessionstore.sanitize import one_line
from sessionstore.usage import Usage, UsageReport, UsageRow, cost_text, hit_rate_text, short_count, usage_report

from .keybar import KeyBar
from .listtable import ListTable
from .timeline import BLOCKS


@dataclass(frozen=True)
class Column:
    """One bar of the chart: `days` consecutive days (from `key` to `last`), their cost added up."""

    key: str
    last: str
    days: int
    cost: float
    unpriced: bool


def day_columns(days: list[UsageRow], width: int) -> list[Column]:
    """Every day of `days` in at most `width` bars: one day a bar when they fit, else the same number of
    consecutive days in each (the latest day ends the last bar; the first bar may hold fewer)."""
    per = days_per_column(days, width)
    columns = []
    for end in range(len(days), 0, -per):
        group = days[max(0, end - per) : end]
        columns.append(
            Column(
                group[0].key,
                group[-1].key,
                len(group),
                sum(row.usage.cost_usd_known for row in group),
                any(row.usage.unpriced_models for row in group),
            )
        )
    return columns[::-1]


def days_per_column(days: list[UsageRow], width: int) -> int:
    """How many days each bar of a chart `width` columns wide holds (1 when every day has its own)."""
    return max(1, -(-len(days) // max(1, width)))


def chart_rows(days: list[UsageRow], width: int, height: int, mark: Style | str = "") -> list[Text]:
    """`height - 1` rows of bars covering every day of `days` in `width` columns, then an axis with their dates.

    A day is one column when many days are shown and up to 8 (a bar and a gap) when few are; when
    there are more days than columns, each bar adds up as many consecutive days (`day_columns`).
    """
    shown = day_columns(days, width) if width > 0 else []
    cols = max(1, min(8, width // max(1, len(shown)))) if width > 0 else 1
    bar = cols - 1 if cols >= 3 else cols
    values = [column.cost for column in shown]
    top = max(values + [0.0]) or 1.0
    rows = max(1, height - 1)
    lines = []
    for r in range(rows):
        floor = (rows - 1 - r) / rows
        line = Text(no_wrap=True, end="")
        for column, value in zip(shown, values, strict=True):
            fill = (value / top - floor) * rows
            char = BLOCKS[max(0, min(8, int(round(fill * 8))))] if fill < 1 else BLOCKS[8]
            line.append(char * bar, mark if column.unpriced else None)
            line.append(" " * (cols - bar))
        lines.append(line)
    lines.append(Text(_axis(shown, cols), no_wrap=True, end=""))
    return lines


def _axis(shown: list[Column], cols: int) -> str:
    """Each day's MM-DD under its bar when bars are wide enough, else the first and last dates at the ends."""
    if not shown:
        return ""
    if cols >= 6:
        return "".join(column.key[5:].ljust(cols) for column in shown)
    first, last = shown[0].key, shown[-1].last
    gap = len(shown) * cols - len(first) - len(last)
    return first + " " * gap + last if gap >= 1 else last[5:]


def calendar_days(report: UsageReport) -> list[UsageRow]:
    """The report's day rows with the days between them filled in (zero rows), oldest first."""
    if not report.rows:
        return []
    found = {row.key: row for row in report.rows}
    first, last = date.fromisoformat(report.rows[0].key), date.fromisoformat(report.rows[-1].key)
    return [
        found.get(d.isoformat()) or UsageRow(d.isoformat(), Usage())
        for d in (first + timedelta(days=i) for i in range((last - first).days + 1))
    ]


class DayChart(Widget):
    """Cost per UTC day, the latest day at the right; a day holding unpriced tokens is drawn in the mark colour."""

    COMPONENT_CLASSES = {"daychart--mark", "daychart--title"}

    DEFAULT_CSS = """
    DayChart {
        height: 8;
        color: $text-primary;
        background: $surface;
        & > .daychart--mark { color: $text-warning; }
        & > .daychart--title { color: $foreground; text-style: bold; }
    }
    """

    def __init__(self, days: list[UsageRow], *, id: str | None = None):
        super().__init__(id=id)
        self.days = days

    def render(self) -> Text:
        width, height = self.size.width, self.size.height
        shown = day_columns(self.days, width) if width > 0 and self.days else []
        peak = max((column.cost for column in shown), default=0.0)
        per = days_per_column(self.days, width)
        days = f"{len(self.days)} day{'s' if len(self.days) != 1 else ''}"
        title = Text(
            f" cost per {'day' if per == 1 else f'{per} days'} (UTC) · {days} · peak ${peak:,.2f}",
            no_wrap=True,
            overflow="ellipsis",
            end="",
            style=self.get_component_rich_style("daychart--title"),
        )
        if not shown:
            return Text("\n", end="").join([title, Text(" no usage recorded", end="")])
        body = chart_rows(self.days, width, max(2, height - 1), self.get_component_rich_style("daychart--mark"))
        return Text("\n", end="").join([title] + body)


def read_report(url: str, session_id: str | None) -> UsageReport:
    """The by-day report on a connection of its own (it may first count what was appended since the last one)."""
    with SessionStore.open(url) as store:
        return usage_report(store, by="day", session=session_id)


class UsageScreen(Screen[None]):
    """Usage and cost of every session, or of one session and its sub-agents.

    The report is read in a worker thread on its own connection, as a search is: counting what was
    appended since the last report (a first report after an upgrade counts everything) never blocks the screen.
    """

    BINDINGS = [Binding("q,escape", "app.pop_screen", "Back", id="back")]

    DEFAULT_CSS = """
    #usage-info { height: 1; background: $primary 15%; text-wrap: nowrap; text-overflow: ellipsis; }
    #usage-days { height: 1fr; }
    """

    def __init__(self, url: str, session_id: str | None = None):
        """`url`: the store the report is read from, on a connection of its own."""
        super().__init__()
        self.url = url
        self.session_id = session_id
        self.report: UsageReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(" usage · counting…"), id="usage-info")
        yield DayChart([], id="usage-chart")
        yield ListTable(zebra_stripes=True, id="usage-days")
        yield KeyBar()

    def on_mount(self) -> None:
        table: DataTable[Any] = self.query_one("#usage-days", DataTable)
        for label, width in (
            ("day", 10),
            ("resp", 6),
            ("input", 6),
            ("cache wr", 8),
            ("cache rd", 8),
            ("output", 6),
            ("hit", 4),
            ("cost", 9),
        ):
            table.add_column(label, width=width)
        table.focus()
        self.load()

    @work(thread=True, exclusive=True, group="usage")
    def load(self) -> None:
        """Read the report off the UI thread, then show it."""
        try:
            report = read_report(self.url, self.session_id)
        except SessionStoreError as exc:
            self.app.call_from_thread(self.app.notify, f"usage: {one_line(str(exc))}", severity="error")
            return
        self.app.call_from_thread(self.show, report)

    def show(self, report: UsageReport) -> None:
        """Fill the header, the chart and the table from `report`."""
        self.report = report
        self.query_one("#usage-info", Static).update(self._info(report))
        chart = self.query_one("#usage-chart", DayChart)
        chart.days = calendar_days(report)
        chart.refresh()
        table: DataTable[Any] = self.query_one("#usage-days", DataTable)
        for row in reversed(report.rows):
            u = row.usage
            table.add_row(
                Text(row.key),
                *(
                    Text(v, justify="right")
                    for v in (
                        f"{u.responses:,}",
                        short_count(u.input_tokens),
                        short_count(u.cache_write),
                        short_count(u.cache_read),
                        short_count(u.output_tokens),
                        hit_rate_text(u),
                        cost_text(u),
                    )
                ),
                key=row.key,
            )

    def _info(self, report: UsageReport) -> Text:
        total = report.total
        scope = f"session {self.session_id[:8]} and its sub-agents" if self.session_id else "all sessions"
        line = (
            f" usage · {scope} · {cost_text(total)} · {total.responses:,} responses · "
            f"{short_count(total.prompt_tokens)} in · {short_count(total.output_tokens)} out · "
            f"cache hit {hit_rate_text(total)} · prices of {report.prices.date}"
        )
        if total.unpriced_models:
            line += " · unpriced: " + ", ".join(sorted(total.unpriced_models))
        return Text(one_line(line), no_wrap=True, overflow="ellipsis")
