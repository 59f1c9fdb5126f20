"""`sessionstore share|unshare|shares`: share a session with another role of a PostgreSQL store."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import DbOption, JsonOption, open_store, print_json


def register(app: typer.Typer) -> None:
    """Add `share`, `unshare` and `shares` to the app."""
    app.command("share")(share_cmd)
    app.command("unshare")(unshare_cmd)
    app.command("shares")(shares_cmd)


def share_cmd(
    session: Annotated[str, typer.Argument(help="One of your sessions (id, source id or a prefix).")],
    with_: Annotated[Optional[str], typer.Option("--with", help="The role to share it with (required).")] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="The role may read it, not write it.")] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Share one of your sessions with another role (PostgreSQL); again to change --read-only.

    Example: sessionstore share 3f2a --with bob --read-only
    """
    from sessionstore.storage.team.ownership import share

    with open_store(db) as store:
        made = share(store, session, with_ or "", read_only=read_only)
    if json_out:
        print_json(made.to_dict())
    else:
        typer.echo(f"shared {made.session} with {made.grantee}{' (read-only)' if made.read_only else ''}")


def unshare_cmd(
    session: Annotated[str, typer.Argument(help="One of your sessions (id, source id or a prefix).")],
    with_: Annotated[Optional[str], typer.Option("--with", help="The role to stop sharing it with (required).")] = None,
    db: DbOption = None,
) -> None:
    """Stop sharing one of your sessions with a role.

    Example: sessionstore unshare 3f2a --with bob
    """
    from sessionstore.storage.team.ownership import unshare

    with open_store(db) as store:
        removed = unshare(store, session, with_ or "")
    typer.echo(f"{'no longer shared' if removed else 'was not shared'} with {with_}")


def shares_cmd(
    session: Annotated[Optional[str], typer.Argument(help="Only this session.")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """List the shares you made and those made with you.

    Example: sessionstore shares --json
    """
    from sessionstore.storage.team.ownership import shares

    with open_store(db) as store:
        found = shares(store, session)
    if json_out:
        print_json([s.to_dict() for s in found])
        return
    if not found:
        typer.echo("no shares")
    for s in found:
        typer.echo(f"{s.session}  {s.grantee}  {'read-only' if s.read_only else 'read-write'}")
