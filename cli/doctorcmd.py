"""`sessionstore doctor`: check the store's invariants, optionally repair the derived counters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .common import DbOption, JsonOption, echo, one_line, open_store, print_json

if TYPE_CHECKING:
    from sessionstore.storage.upkeep.doctor import Report


def doctor_cmd(
    session: Annotated[Optional[str], typer.Argument(help="Check only this session (id or unique prefix).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
    fix: Annotated[
        bool,
        typer.Option(
            "--repair", help="Recompute derived counters and rebuild the search index (never deletes transcript rows)."
        ),
    ] = False,
) -> None:
    """Check the database and every session (or one); exit 1 when a problem is found.

    --repair recomputes what is derived from the rows (view token total,
    explicit row count, tail state, last seq; the search index) and prints each change; it never
    deletes or rewrites transcript rows.

    Example: sessionstore doctor --repair --json
    """
    from sessionstore.storage.upkeep.doctor import check, repair

    with open_store(db, read_only=not fix) as store:
        report = repair(store, session) if fix else check(store, session)
    if json_out:
        print_json(report.to_dict())
    else:
        _print_report(report)
    if not report.ok:
        raise typer.Exit(1)


def _print_report(report: Report) -> None:
    """Repairs, then problems, then a one-line verdict."""
    for line in report.repairs:
        echo(f"repaired: {one_line(line)}")
    for problem in report.problems:
        echo(f"problem [{problem.code}]: {one_line(str(problem))}")
    scope = "database and " if report.database_checked else ""
    verdict = "no problems" if report.ok else f"{len(report.problems)} problem(s)"
    typer.echo(f"checked {scope}{report.sessions_checked} session(s): {verdict}")


def register(app: typer.Typer) -> None:
    """Add `doctor` to the app."""
    app.command("doctor")(doctor_cmd)
