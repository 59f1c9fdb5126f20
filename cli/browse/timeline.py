"""The context-token timeline in the terminal: the HTML export's curve, in block characters.

The curve rises as messages are appended and drops at each compaction to
the view's new size; boundaries are marked under the axis with their index.
Its points come from the store's records (paging.timeline), so it costs the
boundaries, not the transcript.
"""

from __future__ import annotations

from itertools import pairwise

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from sessionstore.storage.read.paging import TimelinePoint

BLOCKS = " ▁▂▃▄▅▆▇█"


def tokens_at(points: list[TimelinePoint], seq: float) -> float:
    """The curve's value at `seq`: the line between the recorded points around it (after a drop at `seq`)."""
    value = 0.0
    for a, b in pairwise(points):
        if a.seq <= seq <= b.seq:
            if b.seq == a.seq:
                value = b.tokens
                continue
            value = a.tokens + (b.tokens - a.tokens) * (seq - a.seq) / (b.seq - a.seq)
    if points and seq >= points[-1].seq:
        value = points[-1].tokens
    return value


def column_peaks(points: list[TimelinePoint], width: int) -> list[float]:
    """The highest value of the curve within each of `width` equal seq ranges."""
    last = max((p.seq for p in points), default=0)
    if width <= 0:
        return []
    span = max(last, 1) / width
    peaks = []
    for x in range(width):
        lo, hi = x * span, (x + 1) * span
        inside = [p.tokens for p in points if lo <= p.seq < hi]
        peaks.append(max([tokens_at(points, lo), tokens_at(points, min(hi, last)), *inside]))
    return peaks


def boundary_columns(points: list[TimelinePoint], width: int) -> dict[int, int]:
    """Column -> boundary index (from 1) for each drop of the curve (a repeated seq)."""
    last = max((p.seq for p in points), default=0)
    span = max(last, 1) / max(width, 1)
    out: dict[int, int] = {}
    index = 0
    for a, b in pairwise(points):
        if a.seq == b.seq and a is not points[0]:
            index += 1
            out.setdefault(min(width - 1, int(a.seq / span)), index)
    return out


def draw(points: list[TimelinePoint], width: int, height: int, mark: Style | str = "bold") -> list[Text]:
    """`height - 1` rows of bars plus one axis row marking each boundary."""
    rows = max(1, height - 1)
    peaks = column_peaks(points, width)
    top = max(peaks + [1.0])
    marks = boundary_columns(points, width)
    lines = []
    for r in range(rows):
        floor = (rows - 1 - r) / rows
        line = Text(no_wrap=True, end="")
        for x, value in enumerate(peaks):
            fill = (value / top - floor) * rows
            char = BLOCKS[max(0, min(8, int(round(fill * 8))))] if fill < 1 else BLOCKS[8]
            line.append(char, mark if x in marks else None)
        lines.append(line)
    cells = ["─"] * width
    marked = [False] * width
    for x, index in sorted(marks.items()):
        label = f"✂{index}"
        start = max(0, min(x, width - len(label)))
        for offset, char in enumerate(label[:width]):
            cells[start + offset] = char
            marked[start + offset] = True
    axis = Text(no_wrap=True, end="")
    for char, is_mark in zip(cells, marked, strict=True):
        axis.append(char, mark if is_mark else None)
    lines.append(axis)
    return lines


class Timeline(Widget):
    """Context tokens across the session, with the boundaries marked."""

    COMPONENT_CLASSES = {"timeline--mark", "timeline--title"}

    DEFAULT_CSS = """
    Timeline {
        height: 6;
        color: $text-primary;
        background: $surface;
        & > .timeline--mark { color: $text-warning; text-style: bold; }
        & > .timeline--title { color: $foreground; text-style: bold; }
    }
    """

    def __init__(self, points: list[TimelinePoint], *, window: int, id: str | None = None):
        super().__init__(id=id)
        self.points = points
        self.window = window

    def render(self) -> Text:
        width, height = self.size.width, self.size.height
        top = max((p.tokens for p in self.points), default=0)
        now = self.points[-1].tokens if self.points else 0
        title = Text(
            f" context tokens · peak {top:,} · now {now:,} · window {self.window:,}",
            style=self.get_component_rich_style("timeline--title"),
            no_wrap=True,
            overflow="ellipsis",
            end="",
        )
        body = draw(self.points, width, max(2, height - 1), self.get_component_rich_style("timeline--mark"))
        return Text("\n", end="").join([title] + body)
