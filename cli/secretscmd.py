"""`sessionstore secrets [SESSION] [--json]`: credentials kept in stored messages, masked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from sessionstore.sanitize import one_line

from .common import DbOption, JsonOption, console, err_console, message_short_ids, open_store, print_json, short_ids

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
        uuids = {} if json_out else message_short_ids(store, [(f.session, f.uuid) for f in findings])
    if json_out:
        print_json([f.to_dict() for f in findings])
        return
    if not findings:
        err_console.print("no secrets found")
        return
    console.print(_table(findings, uuids))
    err_console.print(f"{len(findings)} secret(s) found; `sessionstore export SESSION --redact` leaves them out")


def _table(findings: list[SecretFinding], uuids: dict[str, str]) -> Table:
    """One row per finding; every cell plain text (nothing stored is read as markup).

    The ids are the shortest prefixes that tell the listing's apart and that `show` resolves
    (`uuids`): their columns are never cut, the others fold instead.
    """
    sessions = short_ids([f.session for f in findings])
    table = Table()
    table.add_column("session", no_wrap=True, min_width=max(map(len, sessions.values())))
    table.add_column("seq", no_wrap=True, justify="right")
    table.add_column("uuid", no_wrap=True, min_width=max(map(len, uuids.values())))
    table.add_column("where", overflow="fold")
    table.add_column("kind", no_wrap=True, min_width=max(len(f.kind) for f in findings))
    table.add_column("preview", overflow="fold")
    for f in findings:
        table.add_row(
            *(
                Text(one_line(cell))
                for cell in (sessions[f.session], str(f.seq), uuids[f.uuid], f.where, f.kind, f.preview)
            )
        )
    return table
