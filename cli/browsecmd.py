"""`sessionstore browse [SESSION]`: the full-screen terminal browser."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from .common import DbOption, UsageError, refuse_missing_sqlite


def register(app: typer.Typer) -> None:
    """Add `browse` to the app."""
    app.command("browse")(browse_cmd)


def browse_cmd(
    session: Annotated[Optional[str], typer.Argument(help="Open this session directly (id or unique prefix).")] = None,
    db: DbOption = None,
    light: Annotated[bool, typer.Option("--light", help="Start with the light theme (Ctrl+T switches).")] = False,
) -> None:
    """Browse sessions, boundaries and what each compaction replaced, full screen, keyboard only.

    Keys: arrows/j/k move, Enter opens, q goes back, / searches, f filters, e exports,
    y copies the resume command, n/p next/previous boundary, o opens a spilled original.

    Examples:

      sessionstore browse

      sessionstore browse 3f2a91c0 --db sqlite:///sessions.db
    """
    from .browse.app import make_app

    refuse_missing_sqlite(db)
    app = make_app(db, session_id=session, light=light)
    try:
        if not sys.stdout.isatty() or not sys.stdin.isatty():
            raise UsageError(
                "browse needs a terminal; for scripts use `sessions --json`, `history --json` or `view --json`"
            )
        app.run()
    finally:
        app.store.close()
