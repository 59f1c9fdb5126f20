"""`sessionstore prepare` (the pipeline before a model call) and the `spill` commands."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from . import spillcmd
from .common import DbOption, JsonOption, UsageError, console, note_local_continuation, open_store, print_json

if TYPE_CHECKING:
    from sessionstore.compaction.pipeline import Prepared


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("prepare")(prepare_cmd)
    app.add_typer(spillcmd.app, name="spill")


def prepare_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would happen; write nothing.")] = False,
    messages: Annotated[bool, typer.Option("--messages", help="Include the messages to send (needs --json).")] = False,
    now: Annotated[Optional[str], typer.Option(help="Pretend it is this ISO-8601 time (idle trigger).")] = None,
    query_source: Annotated[
        str, typer.Option(help="Who makes the call: main, compact, session_memory, or agent:NAME for a subagent.")
    ] = "main",
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Run the pipeline (budget, snip, microcompact, collapse, auto-compact check) and show the report.

    The warning means the design's: the fill has reached the warning level
    (effective window - 20,000), close to auto-compact; the report says how
    much of the context is left before auto-compact.

    Examples:

      sessionstore prepare SESSION --dry-run

      sessionstore prepare SESSION --json --messages
    """
    from sessionstore.compaction.pipeline import Pipeline, check_query_source

    if messages and not json_out:
        raise UsageError("--messages needs --json (the messages are only printed in the JSON report)")
    check_query_source(query_source)
    moment = _parse_now(now)
    with open_store(db) as store:
        target = store.get(session)
        given = target.id
        prepared = Pipeline(store).prepare(target, now=moment, query_source=query_source, dry_run=dry_run)
    note_local_continuation(given, target.id)
    if json_out:
        print_json(prepared.to_dict(include_messages=messages))
        return
    title = "prepare (dry run)" if dry_run else "prepare"
    table = Table(title=f"{title} · window fill {prepared.tokens:,} tokens · view version {prepared.view_version}")
    for col in ("layer", "acted", "view tokens before", "view tokens after", "items", "notes"):
        table.add_column(col, overflow="fold")
    for name, layer in prepared.report.items():
        table.add_row(
            name,
            "yes" if layer.acted else "no",
            f"{layer.tokens_before:,}",
            f"{layer.tokens_after:,}",
            str(layer.items),
            _notes(name, layer.details),
        )
    console.print(table)
    auto = prepared.report["autocompact"].details
    console.print(
        f"threshold {auto['autocompact_threshold']:,} · warning at {auto['warning_at']:,} · "
        f"above threshold: {'yes' if prepared.above_threshold else 'no'} · "
        f"warning: {_warning_text(prepared, auto)}",
        highlight=False,
    )


def _warning_text(prepared: Prepared, auto: dict[str, Any]) -> str:
    """The warning with what it means: how much context is left before auto-compact."""
    if prepared.context_left_percent is None:
        left = f"no context is left before auto-compact: its threshold is {auto['autocompact_threshold']:,} tokens"
    else:
        left = (
            f"{prepared.context_left_percent}% of the context ({prepared.tokens_until_autocompact:,} tokens) "
            f"left before auto-compact"
        )
    if not prepared.warning:
        return f"no ({left})"
    if auto["warning_at"] <= 0:
        return (
            f"yes ({left}; this window leaves no room for the 20,000-token warning buffer, so the warning is always on)"
        )
    return f"yes ({left})"


def _parse_now(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"--now: not an ISO-8601 time: {value!r}") from exc


def _notes(name: str, details: dict[str, Any]) -> str:
    """One short line per layer for the table."""
    if "skipped" in details:
        return f"skipped: {details['skipped']}"
    if name == "budget" and details.get("spilled"):
        return f"spilled {len(details['spilled'])}"
    if name == "microcompact":
        if details.get("mode") == "server":
            return "server-side context management"
        return f"{details.get('trigger', 'no')} trigger · {details.get('registered', 0)} registered"
    if name == "snip" and details.get("rules"):
        return ", ".join(f"{k} {v}" for k, v in details["rules"].items())
    if name == "collapse":
        return "blocked" if details.get("blocked") else ("on" if details.get("enabled") else "off")
    if name == "autocompact":
        return "suppressed by collapse" if details.get("suppressed_by_collapse") else ""
    return ""
