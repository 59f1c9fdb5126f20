"""`sessionstore usage`: tokens and cost by day, week, month, session, project, model or host."""

from __future__ import annotations

import csv
import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from sessionstore.sanitize import one_line
from sessionstore.usage_groupings import GROUPINGS

from .common import DbOption, JsonOption, UsageError, console, open_store, print_json

if TYPE_CHECKING:
    from sessionstore.usage import Usage, UsageReport, UsageRow

HELP = """Tokens by kind (input, cache write, cache read, output), cache hit rate and cost.

Each API response counts once (its streamed pieces are one response); sub-agent
sessions count, and --by session lists them under their main session
(--fold-subagents adds them into it). Days are UTC. Cost uses the price table shipped
in the package (its date is printed), over which --prices FILE or SESSIONSTORE_PRICES
lays your own; a model the table does not name has an unknown cost (?), never zero.
--by host groups by the machine each session was captured on; sessions captured
before hosts were recorded are counted in one "(no host)" row.

Examples:

  sessionstore usage --since 7d

  sessionstore usage --by session --cwd ~/code/app

  sessionstore usage --by model --since 2026-11-01 --until 2026-11-30 --json

  sessionstore usage --by host --since 30d
"""

#: Numeric columns of the table and CSV: (heading, Usage attribute).
COLUMNS = (
    ("input", "input_tokens"),
    ("cache wr", "cache_write"),
    ("cache rd", "cache_read"),
    ("output", "output_tokens"),
)


def register(app: typer.Typer) -> None:
    """Add `usage` to the app."""
    app.command("usage", help=HELP)(usage_cmd)


def usage_cmd(
    by: Annotated[str, typer.Option(help=f"Group by {', '.join(GROUPINGS)}.")] = "day",
    since: Annotated[Optional[str], typer.Option(help="A date (2026-11-01), an ISO time or an age (7d, 12h).")] = None,
    until: Annotated[Optional[str], typer.Option(help="A date (counted through its end) or an ISO time.")] = None,
    session: Annotated[Optional[str], typer.Option(help="Only this session and its sub-agents (id or prefix).")] = None,
    cwd: Annotated[Optional[str], typer.Option(help="Only sessions whose working directory is under this.")] = None,
    fold_subagents: Annotated[
        bool, typer.Option("--fold-subagents", help="Count sub-agent sessions in their main session's row.")
    ] = False,
    prices: Annotated[
        Optional[str],
        typer.Option(help="A price file over the shipped table (JSON, same format).", envvar="SESSIONSTORE_PRICES"),
    ] = None,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print CSV (exact counts) instead of a table.")] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    if json_out and csv_out:
        raise UsageError("--json and --csv exclude each other: pick one")
    from sessionstore.prices import load_prices
    from sessionstore.usage import usage_report

    table = load_prices(prices)
    with open_store(db) as store:
        report = usage_report(
            store,
            by=by,
            since=since,
            until=until,
            session=session,
            cwd=cwd,
            fold_subagents=fold_subagents,
            prices=table,
        )
    if json_out:
        print_json(report.to_dict())
    elif csv_out:
        _write_csv(report)
    else:
        console.print(usage_table(report, console.width))


def usage_table(report: UsageReport, width: int = 80) -> Table:
    """The report as a table that keeps one line per row at `width` columns (counts shortened, keys cut)."""
    by = report.by
    title = (
        f"usage by {by}"
        + (f" since {report.since}" if report.since else "")
        + (f" until {report.until}" if report.until else "")
        + f" · prices of {report.prices.date}"
    )
    heads = ("resp", *(h for h, _ in COLUMNS), "hit", "cost")
    lines = [(_key_text(row, by), _cells(row.usage)) for row in report.rows]
    footer = _cells(report.total)
    widths = [max(len(heads[i]), len(footer[i]), *(len(c[i]) for _, c in lines)) for i in range(len(heads))]
    room = max(6, width - sum(widths) - 3 * (len(heads) + 1) - 1)
    key_width = min(room, max([len(by), 5, *(len(k) for k, _ in lines)]))
    table = Table(title=one_line(title), show_footer=bool(lines))
    table.add_column(by, "total", no_wrap=True, overflow="ellipsis", width=key_width)
    for i, heading in enumerate(heads):
        table.add_column(heading, footer[i], justify="right", no_wrap=True, width=widths[i])
    for key, cells in lines:
        table.add_row(Text(key), *cells)
    if not lines:
        table.caption = "no usage recorded in this range"
    elif any(row.usage.unpriced_models for row in report.rows):
        unpriced = sorted({m for row in report.rows for m in row.usage.unpriced_models})
        table.caption = one_line("? = not in the price table: " + ", ".join(unpriced))
    return table


def _cells(usage: Usage) -> list[str]:
    """The numeric cells of one row: responses, the token kinds shortened, hit rate, cost."""
    from sessionstore.usage import cost_text, hit_rate_text, short_count

    return [
        f"{usage.responses:,}",
        *(short_count(getattr(usage, attr)) for _, attr in COLUMNS),
        hit_rate_text(usage),
        cost_text(usage),
    ]


def _key_text(row: UsageRow, by: str) -> str:
    """A row's key as shown: a session as its short id and title (a sub-agent indented), else the key."""
    if by != "session":
        return one_line(row.key or "(none)")
    label = row.key[:8] + (" " + " ".join((row.title or "").split()) if row.title else "")
    if row.parent is not None:
        label = "└ " + label
    return one_line(label)


def _write_csv(report: UsageReport) -> None:
    """One CSV row per report row, then `total`; exact counts, cost empty when unknown."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    fields = [
        "responses",
        "input_tokens",
        "cache_write_5m_tokens",
        "cache_write_1h_tokens",
        "cache_read_tokens",
        "output_tokens",
        "cache_hit_rate",
        "cost_usd",
        "cost_usd_known",
        "unpriced_models",
    ]
    extra = ["title", "parent"] if report.by == "session" else []
    writer.writerow([report.by, *extra, *fields])
    rows = [(row.key, row.to_dict(report.by)) for row in report.rows]
    rows.append(("total", report.total.to_dict()))
    for key, values in rows:
        cells = [values.get(f) for f in extra] + [values.get(f) for f in fields[:-1]]
        cells.append(" ".join(values.get("unpriced_models") or []))
        writer.writerow([one_line(str(key)), *(one_line(str(c)) if c is not None else "" for c in cells)])
