"""`sessionstore spill cat|list|materialize`: the originals of spilled tool results."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table

from .common import DbOption, JsonOption, cell, console, echo, fmt_time, open_store, print_json

app = typer.Typer(help="Spilled tool results: print, list, write to a file.", no_args_is_help=True)

SessionArg = Annotated[str, typer.Argument(help="Session id (or a unique prefix).")]
ToolUseArg = Annotated[str, typer.Argument(help="The tool_use_id the spill is referenced by.")]


@app.command("cat")
def cat_cmd(session: SessionArg, tool_use_id: ToolUseArg, db: DbOption = None) -> None:
    """Print a spilled result's original content, byte for byte.

    Example: sessionstore spill cat SESSION toolu_01ABC > output.txt
    """
    from sessionstore.storage.write.spill import spill_original

    with open_store(db, read_only=True) as store:
        data = spill_original(store.get(session), tool_use_id)
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@app.command("list")
def list_cmd(session: SessionArg, db: DbOption = None, json_out: JsonOption = False) -> None:
    """List the session's spilled results (also those microcompact cleared later, and those a compaction summarized).

    `now shown` says what the active view holds of each: `spilled` (its preview), `cleared`, or
    `compacted` (nothing: a compaction summarized it; the original is still in `spill cat`).

    Example: sessionstore spill list SESSION --json
    """
    from sessionstore.storage.write.spill import list_spills

    with open_store(db, read_only=True) as store:
        spills = list_spills(store.get(session))
    if json_out:
        print_json([s.to_dict() for s in spills])
        return
    gone = sum(1 for s in spills if not s.in_view)
    table = Table(title=f"spills ({len(spills)}{f'; {gone} compacted out of the view' if gone else ''})")
    for col in ("tool_use_id", "now shown", "bytes", "sha256", "spilled"):
        table.add_column(col, overflow="fold")
    for s in spills:
        table.add_row(
            cell(s.tool_use_id), cell(s.now), f"{s.original_size:,}", cell(s.blob_sha256[:12]), fmt_time(s.created_at)
        )
    console.print(table)


@app.command("materialize")
def materialize_cmd(
    session: SessionArg,
    tool_use_id: ToolUseArg,
    directory: Annotated[str, typer.Argument(help="Folder to write into (created if missing); '-' for stdout.")],
    db: DbOption = None,
) -> None:
    """Write a spilled result's original to a file inside DIRECTORY and print its path ('-': the bytes to stdout).

    Example: sessionstore spill materialize SESSION toolu_01ABC ./spills
    """
    from sessionstore.storage.core.output import STDIO
    from sessionstore.storage.write.spill import materialize_spill

    if directory == STDIO:
        cat_cmd(session, tool_use_id, db)
        return
    with open_store(db) as store:
        path = materialize_spill(store.get(session), tool_use_id, directory)
    echo(str(path))
