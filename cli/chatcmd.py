"""`sessionstore chat SESSION|--new`: a small REPL over the agent loop."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import DbOption, UsageError, open_store


def register(app: typer.Typer) -> None:
    """Add `chat` to the app."""
    app.command("chat")(chat_cmd)


def chat_cmd(
    session: Annotated[Optional[str], typer.Argument(help="Session to continue (id or unique prefix).")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start a new session.")] = False,
    workdir: Annotated[Path, typer.Option(help="Working directory of the read/run tools.")] = Path("."),
    model: Annotated[Optional[str], typer.Option(help="Model (default: ANTHROPIC_MODEL or the built-in default).")] = None,
    db: DbOption = None,
) -> None:
    """Talk to the model with two tools (read a file, run a command), every message stored.

    A session that was interrupted resumes first (pending tool calls run, an unanswered
    request is answered). Empty line or Ctrl-D quits.

    Examples:

      sessionstore chat --new --workdir ./project

      sessionstore chat 3f2a91c0
    """
    import anthropic

    from sessionstore.compaction.engine import make_summarizer
    from sessionstore.compaction.pipeline import Pipeline
    from sessionstore.agent import DEFAULT_MODEL, Agent

    if bool(session) == new:
        raise UsageError("give a SESSION to continue or --new, not both")
    chosen = model or os.environ.get("ANTHROPIC_MODEL", DEFAULT_MODEL)
    with open_store(db) as store:
        s = store.create_session(title="chat", model=chosen, cwd=str(workdir.resolve())) if new else store.get(session or "")
        typer.echo(f"session {s.id} (Ctrl-D to quit)")
        agent = Agent(session=s, pipeline=Pipeline(store, summarizer=make_summarizer()),
                      client=anthropic.Anthropic(max_retries=2), workdir=workdir, model=chosen,
                      on_event=lambda kind, payload: typer.echo(f"  [{kind}]", err=True))
        state = s.refresh_state().tail
        if state.pending or state.last_role == "user":
            typer.echo(agent.resume())
        while True:
            try:
                text = input("you> ").strip()
            except EOFError:
                break
            if not text:
                break
            typer.echo(agent.ask(text))
