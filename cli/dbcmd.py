"""`sessionstore db upgrade|current|history`: Alembic, without an alembic.ini."""

from __future__ import annotations

from typing import Annotated

import typer

from sessionstore.storage.config import default_db_url
from sessionstore.storage.db import open_engine
from sessionstore.storage.migrate import current_revision, head_revision, upgrade, alembic_config

from .common import DbOption, JsonOption, print_json

app = typer.Typer(help="Schema migrations (Alembic).", no_args_is_help=True)


@app.command("upgrade")
def upgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    db: DbOption = None,
) -> None:
    """Upgrade the database schema (one transaction).

    Example: sessionstore db upgrade --db sqlite:///sessions.db
    """
    engine = open_engine(db or default_db_url())
    try:
        upgrade(engine, revision)
        with engine.connect() as conn:
            typer.echo(f"database at {current_revision(conn)}")
    finally:
        engine.dispose()


@app.command("current")
def current_cmd(db: DbOption = None, json_out: JsonOption = False) -> None:
    """Print the database's revision and the newest one this version ships.

    Example: sessionstore db current --json
    """
    engine = open_engine(db or default_db_url())
    try:
        with engine.connect() as conn:
            current = current_revision(conn)
    finally:
        engine.dispose()
    head = head_revision()
    if json_out:
        print_json({"current": current, "head": head, "up_to_date": current == head})
    else:
        typer.echo(f"current: {current or '(empty)'}  head: {head}")


@app.command("history")
def history_cmd(json_out: JsonOption = False) -> None:
    """List the schema revisions this version ships, oldest first.

    Example: sessionstore db history
    """
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    revs = list(reversed(list(script.walk_revisions())))
    if json_out:
        print_json([{"revision": r.revision, "down_revision": r.down_revision, "message": r.doc} for r in revs])
        return
    for r in revs:
        typer.echo(f"{r.revision}  {r.doc}")
