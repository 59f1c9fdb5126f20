"""`sessionstore chat SESSION|--new`: a small REPL over the agent loop, with slash commands and clear failures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Optional, cast

import typer

from sessionstore.credentials import hide_credentials
from sessionstore.sanitize import one_line, visible

from .common import DbOption, UsageError, open_store

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
#: Who compacts in `chat --compaction`: our pipeline, or the Messages API in one of its modes.
COMPACTION_CHOICES = ("ours", "on-demand", "background", "threshold")
KEPT = "your message is kept and will be answered on your next message or when you resume this session"


def register(app: typer.Typer) -> None:
    """Add `chat` to the app."""
    app.command("chat")(chat_cmd)


def chat_cmd(
    session: Annotated[Optional[str], typer.Argument(help="Session to continue (id or unique prefix).")] = None,
    new: Annotated[bool, typer.Option("--new", help="Start a new session.")] = False,
    workdir: Annotated[Path, typer.Option(help="Working directory of the read/run tools.")] = Path("."),
    model: Annotated[
        Optional[str], typer.Option(help="Model (default: ANTHROPIC_MODEL or the built-in default).")
    ] = None,
    db: DbOption = None,
    compaction: Annotated[
        str,
        typer.Option(
            help="Who compacts at the threshold: ours (the pipeline's summarizer), or the Messages API: "
            "on-demand, background or threshold."
        ),
    ] = "ours",
) -> None:
    """Talk to the model with two tools (read a file, run a command), every message stored.

    A session that was interrupted resumes first (pending tool calls run, an unanswered
    request is answered). Empty line or Ctrl-D quits. Lines starting with / are
    commands that never reach the model: /history, /history K, /search QUERY,
    /compact [instructions], /export FORMAT PATH, /stats, /help. When the API
    fails, one line says why and what to do; your message stays recorded.

    Examples:

      sessionstore chat --new --workdir ./project

      sessionstore chat 3f2a91c0

      sessionstore chat 3f2a91c0 --compaction on-demand
    """
    import anthropic

    from sessionstore.agent import DEFAULT_MODEL, Agent
    from sessionstore.compaction.engine import make_summarizer
    from sessionstore.compaction.pipeline import Pipeline
    from sessionstore.compaction.server import Mode, ServerCompactor

    from .chatslash import SlashContext, run_slash

    if compaction not in COMPACTION_CHOICES:
        raise UsageError(f"--compaction must be one of {', '.join(COMPACTION_CHOICES)}, got {compaction!r}")
    if session and new:
        raise UsageError("give a SESSION to continue or --new, not both")
    if not session and not new:
        raise UsageError("give a SESSION to continue, or --new to start one (sessionstore chat --new)")
    if not any(os.environ.get(name) for name in KEY_VARIABLES):
        raise UsageError(
            "no API key: set ANTHROPIC_API_KEY (https://console.anthropic.com/settings/keys) "
            "and run chat again; nothing was created"
        )
    if not workdir.is_dir():
        raise UsageError(f"--workdir {workdir}: not a folder (the read/run tools work inside it); nothing was created")
    chosen = model or os.environ.get("ANTHROPIC_MODEL", DEFAULT_MODEL)
    with open_store(db, create=new) as store:
        s = (
            store.create_session(title="chat", model=chosen, cwd=str(workdir.resolve()))
            if new
            else store.get(session or "")
        )
        typer.echo(f"session {s.id} (Ctrl-D to quit, /help for commands)")
        summarizer = make_summarizer()
        client = anthropic.Anthropic(max_retries=2)
        compactor = None if compaction == "ours" else ServerCompactor(client, chosen, mode=cast(Mode, compaction))
        agent = Agent(
            session=s,
            pipeline=Pipeline(store, summarizer=summarizer, compactor=compactor),
            client=client,
            workdir=workdir,
            model=chosen,
            on_event=lambda kind, payload: typer.echo(f"  [{kind}]", err=True),
        )
        slash = SlashContext(
            store=store, session=s, read_line=_read_line, summarizer=summarizer, config=agent.pipeline.config
        )
        state = s.refresh_state().tail
        if state.pending or state.last_role == "user":
            _answer(agent.resume, client)
        while True:
            text = _read_line("you> ")
            if text is None or not text.strip():
                break
            if text.strip().startswith("/"):
                run_slash(slash, text)
                continue
            _answer(lambda: agent.ask(text.strip()), client)  # noqa: B023  (called before the loop moves on)


def _read_line(prompt: str) -> str | None:
    """One line from the person, None at end of input."""
    try:
        return input(prompt)
    except EOFError:
        return None


def _answer(turn: Callable[[], str], client: Any) -> None:
    """Run one turn and print the answer; an API or store failure is one line and the REPL goes on."""
    import anthropic

    from sessionstore.compaction.summarizers.base import SummarizerError
    from sessionstore.storage.core.errors import SessionStoreError

    try:
        typer.echo(visible(turn()))
    except (anthropic.APIError, SessionStoreError, SummarizerError) as exc:
        known = (getattr(client, "api_key", None), getattr(client, "auth_token", None))
        typer.echo(f"error: {one_line(explain_failure(exc, str(client.base_url), known))}", err=True)


def explain_failure(exc: BaseException, base_url: str, known: Iterable[str | None] = ()) -> str:
    """One line: what went wrong with the model call and what to do about it, credentials hidden.

    Every quoted text (the URL, the API's message, the cause) has its credentials hidden before it
    is cut to length, so a cut never leaves half a password behind.
    """
    import anthropic

    known = tuple(known)

    def quoted(text: object, limit: int) -> str:
        return " ".join(hide_credentials(str(text), known).split())[:limit]

    base_url = quoted(base_url, 300)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        reason = f" ({quoted(cause, 120)})" if cause else ""
        return f"cannot reach the API at {base_url}{reason}: check the network or ANTHROPIC_BASE_URL; {KEPT}"
    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return (
            f"the API refused the key ({exc.status_code}): check ANTHROPIC_API_KEY, then resume this session "
            f"with sessionstore chat SESSION; {KEPT}"
        )
    if isinstance(exc, anthropic.APIStatusError) and (exc.status_code in (429, 529) or exc.status_code >= 500):
        what = "rate-limited" if exc.status_code == 429 else "overloaded or failing"
        return f"the API is {what} ({exc.status_code}) even after retries: wait a minute; {KEPT}"
    if isinstance(exc, anthropic.BadRequestError) and "prompt is too long" in str(exc):
        return (
            "the conversation is still too long for the model after compacting it: try /compact with "
            f"instructions or a model with a larger window; {KEPT}"
        )
    if isinstance(exc, anthropic.APIStatusError):
        return f"the API answered {exc.status_code}: {quoted(exc.message, 200)}; {KEPT}"
    return f"{quoted(exc, 300)}; {KEPT}"
