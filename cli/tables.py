"""Tables that keep one line per row at 80 columns: short forms for cells, and the sessions table.

Model names, paths and text are cut to say the most in the fewest characters.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any, Callable

from rich.table import Table
from rich.text import Text

from sessionstore.sanitize import one_line

_CLAUDE = re.compile(r"^(?:anthropic[./])?claude-(?P<rest>.+?)(?:-(?:20\d{6}|latest))?(?:-v\d+(?::\d+)?)?$")
_FAMILIES = ("opus", "sonnet", "haiku")


def short_model(name: str | None) -> str:
    """`claude-sonnet-4-5-20250929` -> `sonnet-4.5`, `claude-3-5-haiku-latest` -> `haiku-3.5`; others as they are."""
    if not name:
        return ""
    found = _CLAUDE.match(name.strip())
    if not found:
        return one_line(name.strip())
    parts = found.group("rest").split("-")
    family = next((p for p in parts if p in _FAMILIES), None)
    numbers = [p for p in parts if p.isdigit() and len(p) <= 2]
    if family is None or not numbers:
        return "claude-" + found.group("rest")
    return f"{family}-{'.'.join(numbers)}"


def ellipsize(text: str | None, width: int) -> str:
    """`text` on one line (controls shown, see `sessionstore.sanitize`), cut to `width` characters with a trailing
    ellipsis when longer."""
    flat = one_line(" ".join((text or "").split()))
    if width <= 0:
        return ""
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def short_path(path: str | None, width: int) -> str:
    """A path cut from the left (the end says the most), with a leading ellipsis when longer."""
    flat = one_line(path or "")
    if width <= 0:
        return ""
    return flat if len(flat) <= width else "…" + flat[len(flat) - width + 1 :]


def short_time(epoch: float | None, now: float | None = None) -> str:
    """Local time as `MM-DD HH:MM` within the current year, else `YYYY-MM-DD`."""
    if epoch is None:
        return ""
    when = datetime.fromtimestamp(epoch)
    this_year = datetime.fromtimestamp(time.time() if now is None else now).year
    return when.strftime("%m-%d %H:%M") if when.year == this_year else when.strftime("%Y-%m-%d")


def when(timestamp: str | None, fallback: float | None = None) -> str:
    """An ISO 8601 timestamp (as messages record them) in short_time's form; `fallback` epoch if unreadable."""
    try:
        parsed = datetime.fromisoformat(timestamp) if timestamp else None
    except ValueError:
        parsed = None
    if parsed is None:
        return short_time(fallback)
    return short_time(parsed.timestamp())


#: Terminal width from which the sessions table has a cost column.
COST_COLUMN_FROM = 100


def sessions_table(
    rows: list[dict[str, Any]],
    width: int,
    source_id: Callable[[dict[str, Any]], str] | None = None,
    costs: dict[str, str] | None = None,
) -> Table:
    """One line per session at any width: long titles end in an ellipsis, model names are shortened.

    `source_id` gives an imported session's id in its source tool; the column shows when any row has one.
    `costs` (session id -> cost text) adds a cost column from COST_COLUMN_FROM columns up.
    """
    ids = [source_id(r) if source_id else "" for r in rows]
    cells = [
        tuple(
            map(
                one_line,
                (
                    r["id"][:8],
                    ids[i],
                    _forked(r) + " ".join((r["title"] or "").split()),
                    short_model(r["model"]),
                    f"{r['messages']:,}",
                    f"{r['view_tokens']:,}",
                    short_time(r["updated_at"]),
                    (costs or {}).get(r["id"], ""),
                    ellipsize(r.get("owner"), 12),
                    ellipsize(r.get("host"), 12),
                ),
            )
        )
        for i, r in enumerate(rows)
    ]
    heads = ("id", "source id", "title", "model", "msgs", "tokens", "updated", "cost", "owner", "host")
    with_cost = costs is not None and width >= COST_COLUMN_FROM
    # Whose session, once the list holds more than one owner's (sessions shared with you); the host,
    # once it holds sessions from more than one machine. `--json` always has both.
    owners = len({r.get("owner") for r in rows}) > 1
    hosts = len({r.get("host") for r in rows}) > 1
    hidden = {1: not any(ids), 7: not with_cost, 8: not owners, 9: not hosts}
    shown = [i for i in range(len(heads)) if not hidden.get(i, False)]
    widths = {i: max([len(heads[i])] + [len(c[i]) for c in cells]) for i in shown}
    widths[3] = min(widths[3], 12)
    if 1 in widths:
        widths[1] = min(widths[1], 14)
    for column, narrow in ((1, 8), (3, 10), (6, 11), (8, 8), (9, 8)):
        if _fixed(widths, shown) + 10 > width and column in widths:
            widths[column] = min(widths[column], narrow)
    widths[2] = max(6, min(widths[2], width - _fixed(widths, shown)))
    table = Table(title=f"sessions ({len(rows)}; ids shortened: any unique prefix of an id or source id works)")
    for i in shown:
        table.add_column(
            heads[i],
            no_wrap=True,
            overflow="ellipsis",
            width=widths[i],
            justify="right" if heads[i] in ("msgs", "tokens", "cost") else "left",
        )
    for c in cells:
        table.add_row(*(Text(c[i]) for i in shown))
    return table


def _forked(row: dict[str, Any]) -> str:
    """`⑂<parent id> ` before a fork's title (the parent's id shortened like the ids), else nothing."""
    fork = row.get("fork")
    return f"⑂{fork['parent_id'][:8]} " if fork else ""


def _fixed(widths: dict[int, int], shown: list[int]) -> int:
    """Characters every column but the title takes, with the borders and padding."""
    return sum(w for i, w in widths.items() if i != 2) + 3 * len(shown) + 1
