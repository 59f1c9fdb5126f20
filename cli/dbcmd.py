"""`sessionstore db upgrade|current|history`: Alembic, without an alembic.ini."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .common import DbOption, JsonOption, err_console, open_store, print_json

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

app = typer.Typer(help="Schema migrations (Alembic).", no_args_is_help=True)


@app.command("upgrade")
def upgrade_cmd(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    db: DbOption = None,
) -> None:
    """Upgrade the database schema (one transaction).

    Example: sessionstore db upgrade --db sqlite:///sessions.db
    """
    from sessionstore.storage.engine.config import default_db_url
    from sessionstore.storage.engine.db import open_engine
    from sessionstore.storage.engine.migrate import current_revision, head_revision, repack_note, upgrade

    engine = open_engine(db or default_db_url())
    try:
        with engine.connect() as conn:
            before = current_revision(conn)
        upgrade(engine, revision)
        with engine.connect() as conn:
            after = current_revision(conn)
            sqlite = conn.dialect.name == "sqlite"
            superuser = None if sqlite else superuser_owner(conn)
        if before != after and after == head_revision():
            from sessionstore.storage.engine.db import open_database
            from sessionstore.storage.derived.search import forget_cut_index

            index_db = open_database(db or default_db_url())
            try:
                forget_cut_index(index_db, before)
            finally:
                index_db.close()
                index_db.engine.dispose()
        typer.echo(f"database at {after}")
        if superuser:
            err_console.print(
                f"note: the store's tables belong to {superuser}, a superuser, whom row-level security does not "
                f"bind: never use {superuser} as a person's login. For a team, give the tables to an owner role "
                "(createuser sessions_owner, then as it: `sessionstore db upgrade`, `sessionstore db grant ROLE`)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        note = repack_note(before, after, db or default_db_url())
        if sqlite and note:
            err_console.print(note, markup=False, highlight=False, soft_wrap=True)  # one line: copied whole
    finally:
        engine.dispose()


def superuser_owner(conn: Connection) -> str | None:
    """PostgreSQL: the superuser that owns the store's tables, or None (an ordinary owner role, or no tables)."""
    row = conn.exec_driver_sql(
        "SELECT r.rolname FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
        "WHERE c.oid = to_regclass('sessions') AND r.rolsuper"
    ).fetchone()
    return None if row is None else str(row[0])


@app.command("current")
def current_cmd(db: DbOption = None, json_out: JsonOption = False) -> None:
    """Print the database's revision and the newest one this version ships.

    Example: sessionstore db current --json
    """
    from sessionstore.storage.engine.config import default_db_url
    from sessionstore.storage.engine.db import open_engine
    from sessionstore.storage.engine.migrate import current_revision, head_revision

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

    from sessionstore.storage.engine.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    revs = list(reversed(list(script.walk_revisions())))
    if json_out:
        print_json([{"revision": r.revision, "down_revision": r.down_revision, "message": r.doc} for r in revs])
        return
    for r in revs:
        typer.echo(f"{r.revision}  {r.doc}")


@app.command("grant")
def grant_cmd(role: Annotated[str, typer.Argument(help="An existing PostgreSQL role.")], db: DbOption = None) -> None:
    """Let a role use this store (run by the owner of its tables): rows in and out, no schema changes.

    Row-level security keeps each role to its own sessions and those shared with it.
    Example: sessionstore db grant alice --db postgresql://owner@db.example/sessions
    """
    from sessionstore.storage.team.ownership import grant

    with open_store(db) as store:
        schema = grant(store, role)
    typer.echo(f"{role} may now use the store in schema {schema}")


@app.command("revoke")
def revoke_cmd(
    role: Annotated[str, typer.Argument(help="A role given access with `db grant`.")], db: DbOption = None
) -> None:
    """Take a role's access to this store away (its sessions stay, still its own).

    Example: sessionstore db revoke alice
    """
    from sessionstore.storage.team.ownership import revoke

    with open_store(db) as store:
        schema = revoke(store, role)
    typer.echo(f"{role} may no longer use the store in schema {schema}")


@app.command("vacuum")
def vacuum_cmd(
    db: DbOption = None,
    json_out: JsonOption = False,
    progress: Annotated[
        Optional[bool], typer.Option("--progress/--no-progress", help="Progress bar (default: on a terminal).")
    ] = None,
) -> None:
    """Give the free space of deleted sessions, rebuilt indexes and upgrades back (SQLite: VACUUM).

    Example: sessionstore db vacuum --db sqlite:///sessions.db
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sessionstore.storage.upkeep.vacuum import vacuum

    show = sys.stderr.isatty() if progress is None else progress
    with open_store(db) as store:
        if show:
            with Progress(
                TextColumn("vacuum {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err_console,
            ) as bar:
                task = bar.add_task("", total=None)
                result = vacuum(
                    store, lambda done, steps, what: bar.update(task, completed=done, total=steps, description=what)
                )
        else:
            result = vacuum(store)
    if json_out:
        print_json({"bytes_before": result.bytes_before, "bytes_after": result.bytes_after, "freed": result.freed})
    else:
        typer.echo(f"{result.bytes_before:,} bytes before, {result.bytes_after:,} after ({result.freed:,} freed)")
