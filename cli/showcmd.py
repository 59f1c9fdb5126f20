"""`sessionstore show SESSION UUID|SEQ`: one message with its envelope, usage, spills and boundaries."""

from __future__ import annotations

import json
import textwrap
from typing import Annotated, Any

import typer

from sessionstore.sanitize import one_line, visible

from .common import DbOption, JsonOption, open_store, print_json


def register(app: typer.Typer) -> None:
    """Add this module's command to the app."""
    app.command("show")(show_cmd)


def show_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    message: Annotated[str, typer.Argument(help="The message: its uuid, a unique start of it, or its seq.")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Show one message: content, envelope, usage, spilled results, the boundaries it belongs to.

    Examples:

      sessionstore show SESSION 3f2a9c1e

      sessionstore show SESSION 42 --json
    """
    from sessionstore.storage.write.apicompaction import server_notes
    from sessionstore.storage.read.message_info import message_info

    with open_store(db) as store:
        info = message_info(store.get(session), message)
    if json_out:
        print_json(info.to_dict())
        return
    m = info.message
    head = [
        ("session", info.session_id),
        ("seq", str(m.seq)),
        ("uuid", m.uuid),
        ("parent", m.parent_uuid or "-"),
        ("role", m.role),
        ("type", m.type + (f" / {m.subtype}" if m.subtype else "")),
        ("timestamp", m.timestamp or "-"),
        ("api message", m.api_message_id or "-"),
        ("tokens", f"{m.tokens:,} (estimate)"),
        ("in view", "yes" if info.in_view else "no"),
    ]
    if m.usage:
        shown = {k: v for k, v in m.usage.items() if k != "iterations" and v is not None}
        head.append(("usage", ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in shown.items())))
    head.extend(server_notes(m.content, m.usage, m.metadata))
    flags = [name for name, on in (("meta", m.is_meta), ("compact summary", m.is_compact_summary)) if on]
    if flags:
        head.append(("flags", ", ".join(flags)))
    for spill in info.spills:
        head.append(
            (
                "spill",
                f"{spill['tool_use_id']} {spill['kind']}, {int(spill['original_size'] or 0):,} bytes "
                f"(sessionstore spill cat {info.session_id} {spill['tool_use_id']})",
            )
        )
    for b in info.boundaries:
        head.append(("boundary", f"{b['boundary']} ({b['kind']}): {b['as']}"))
    for label, value in head:
        lines = textwrap.wrap(one_line(str(value)), width=80 - 14, break_on_hyphens=False, break_long_words=False) or [
            ""
        ]
        typer.echo(f"{label:>12}  {lines[0]}")
        for more in lines[1:]:
            typer.echo(f"{'':>12}  {more}")
    typer.echo("")
    typer.echo(_content_text(m.content))


def _content_text(content: Any) -> str:
    """The message's content as readable text: text blocks as they are, other blocks as indented JSON."""
    if isinstance(content, str):
        return visible(content)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(visible(str(block.get("text", ""))))
        else:
            parts.append(visible(json.dumps(block, ensure_ascii=False, indent=2)))
    return "\n\n".join(parts)
