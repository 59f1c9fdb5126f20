"""`sessionstore delete SESSION`: remove a session and everything recorded in it, after confirmation."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .common import DbOption, JsonOption, one_line, open_store, print_json


def register(app: typer.Typer) -> None:
    """Add `delete` to the app."""
    app.command("delete")(delete_cmd)


def delete_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (for scripts).")] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Delete a session: its transcript, views, compactions and spills. This cannot be undone.

    Asks first (exit 1 when the answer is no); --yes skips the question.

    Examples:

      sessionstore delete 3f2a91c0

      sessionstore delete 3f2a91c0 --yes --json
    """
    with open_store(db) as store:
        s = store.get(session)
        state = s.refresh_state()
        what = one_line(f"session {s.id} ({s.title or 'untitled'}, {state.last_seq:,} messages)")
        if not yes and not _confirmed(what):
            raise typer.Exit(1)
        store.delete(s.id)
    if json_out:
        print_json({"deleted": s.id, "messages": state.last_seq})
    else:
        typer.echo(f"deleted {what}")


def _confirmed(what: str) -> bool:
    """Ask on the terminal; no (or no answer at all, as on an empty stdin) keeps the session and says so."""
    try:
        if typer.confirm(f"Delete {what}? This cannot be undone.", default=False, err=True):
            return True
        sys.stderr.write("nothing deleted\n")
    except typer.Abort:
        sys.stderr.write("\nnothing deleted: no answer (stdin ended); pass --yes to delete without asking\n")
    return False
