"""`sessionstore secrets [SESSION] [--json]`: credentials kept in stored messages, masked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from sessionstore.sanitize import one_line

from .common import DbOption, JsonOption, console, err_console, open_store, print_json, short_ids

if TYPE_CHECKING:
    from sessionstore.secrets import SecretFinding


def register(app: typer.Typer) -> None:
    """Add `secrets` to the app."""
    app.command("secrets")(secrets_cmd)


def secrets_cmd(
    session: Annotated[Optional[str], typer.Argument(help="Only this session (id, source id or prefix).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """List credentials found in stored sessions (text, tool inputs and results, metadata, spills, title, cwd), masked.

    Each row names the session, the message (seq and uuid; seq 0 for the title and cwd),
    where in it, the kind of credential and a masked preview; the secret itself is never
    printed. Before sharing an export, `sessionstore export SESSION --redact` replaces each one.

    Examples:

      sessionstore secrets

      sessionstore secrets 3f2a91c0 --json
    """
    from sessionstore.secrets import scan_store  # detect-secrets costs a tenth of a second: only this command pays it

    with open_store(db, read_only=True) as store:
        findings = scan_store(store, session)
    if json_out:
        print_json([f.to_dict() for f in findings])
        return
    if not findings:
        err_console.print("no secrets found")
        return
    console.print(_table(findings))
    err_console.print(f"{len(findings)} secret(s) found; `sessionstore export SESSION --redact` leaves them out")


def _table(findings: list[SecretFinding]) -> Table:
    """One row per finding; every cell plain text (nothing stored is read as markup)."""
    table = Table("session", "seq", "uuid", "where", "kind", "preview")
    sessions, uuids = short_ids([f.session for f in findings]), short_ids([f.uuid for f in findings])
    for f in findings:
        table.add_row(
            *(
                Text(one_line(cell))
                for cell in (sessions[f.session], str(f.seq), uuids[f.uuid], f.where, f.kind, f.preview)
            )
        )
    return table
