"""`recall`: the exact messages from before a compaction, within a token budget (what the agent's tool returns)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import DbOption, JsonOption, echo, open_store, print_json


def register(app: typer.Typer) -> None:
    """Add this module's command to the app."""
    app.command("recall")(recall_cmd)


def recall_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    boundary: Annotated[
        Optional[str],
        typer.Option(
            "--boundary",
            "-b",
            help="Boundary K (default: the latest), or a range A..B: the messages recorded from "
            "boundary A-1 to boundary B, as a summary's condensed references name them.",
        ),
    ] = None,
    query: Annotated[Optional[str], typer.Option("--query", "-q", help="Only messages containing this text.")] = None,
    around: Annotated[Optional[str], typer.Option("--around", help="This message uuid and its neighbours.")] = None,
    max_tokens: Annotated[int, typer.Option(help="Token budget of the answer.")] = 4000,
    cursor: Annotated[Optional[int], typer.Option(help="next_cursor of an earlier recall: page on.")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Read back the exact messages a compaction summarized: the last ones, a query, or around a uuid.

    Examples:

      sessionstore recall SESSION --query 'port'

      sessionstore recall SESSION -b 2 --max-tokens 1000 --cursor 131072 --json

      sessionstore recall SESSION -b 3..40 --query src/app.py
    """
    from sessionstore.storage.read.recall import recall

    with open_store(db, read_only=True) as store:
        found = recall(
            store.get(session), boundary, query=query, around_uuid=around, max_tokens=max_tokens, cursor=cursor
        )
    if json_out:
        print_json(found.to_dict())
    else:
        echo(found.text)
