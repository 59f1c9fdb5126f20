"""`pin` / `unpin` / `pins`: mark messages to be carried verbatim through every compaction."""

from __future__ import annotations

from typing import Annotated

import typer

from sessionstore.sanitize import one_line

from .common import DbOption, JsonOption, console, open_store, print_json, short_ids
from .tables import ellipsize

#: The fewest characters of a pin's text `pins` shows, however narrow the terminal.
PIN_TEXT_MIN = 10


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("pin")(pin_cmd)
    app.command("unpin")(unpin_cmd)
    app.command("pins")(pins_cmd)


def pin_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    uuid: Annotated[str, typer.Argument(help="The message: its seq, its uuid or a unique start of it.")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Pin a message: it is carried verbatim through every compaction, within the pin budget.

    A pin over the budget (SESSIONSTORE_PINS_MAX_TOKENS, default 5% of the window) is refused
    with exit code 2 and nothing is written.

    Example:

      sessionstore pin SESSION 0b5c2f9e
    """
    with open_store(db) as store:
        pinned = store.get(session).pin(uuid)
    if json_out:
        print_json(pinned.to_dict())
    else:
        typer.echo(f"pinned {one_line(pinned.uuid)} ({pinned.tokens:,} tokens)")


def unpin_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    uuid: Annotated[str, typer.Argument(help="The pinned message: its seq, its uuid or a unique start of it.")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Unpin a message: later compactions summarize it like any other.

    Example:

      sessionstore unpin SESSION 0b5c2f9e-6a53-4c1e-9d7e-2f8a1c3b4d5e
    """
    from sessionstore.storage.engine.resolve import resolve_message

    with open_store(db) as store:
        target = store.get(session)
        uuid = resolve_message(target, uuid)[1]
        removed = target.unpin(uuid)
    if json_out:
        print_json({"uuid": uuid, "unpinned": removed})
    else:
        typer.echo(f"unpinned {one_line(uuid)}" if removed else f"{one_line(uuid)} was not pinned")


def pins_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """List a session's pinned messages, oldest first, with what they take of the pin budget.

    Example:

      sessionstore pins SESSION --json
    """
    from sessionstore.storage.write.pins import pins_budget

    with open_store(db) as store:
        target = store.get(session)
        pinned, budget = target.pins(), pins_budget(target)
    used = sum(p.tokens for p in pinned)
    if json_out:
        print_json({"session": target.id, "budget": budget, "used": used, "pins": [p.to_dict() for p in pinned]})
        return
    shown = short_ids([p.uuid for p in pinned])
    for p in pinned:
        head = f"{one_line(shown[p.uuid])}  {p.role:<9} {p.tokens:>6,}  "
        typer.echo(head + ellipsize(p.text, max(PIN_TEXT_MIN, console.width - len(head))))
    typer.echo(f"{len(pinned)} pinned, {used:,} of {budget:,} tokens")
