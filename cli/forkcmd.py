"""`sessionstore fork`: a new session from a view another one had; and `export --install`, which hands it back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from sessionstore.sanitize import one_line

from .common import INT64_MAX, DbOption, JsonOption, UsageError, bounded, open_store, print_json
from .redaction import say_secrets

if TYPE_CHECKING:
    from sessionstore.storage.write.fork import Lineage


def register(app: typer.Typer) -> None:
    """Add `fork` to the app."""
    app.command("fork")(fork_cmd)


def fork_cmd(
    session: Annotated[str, typer.Argument(help="Session id, source id, or a unique prefix of either.")],
    at: Annotated[
        Optional[str],
        typer.Option(
            "--at",
            help="Fork the view as it stood right after this message: "
            "its seq (a number) or its uuid (or a unique prefix).",
        ),
    ] = None,
    before_boundary: Annotated[
        Optional[int],
        typer.Option(
            "--before-boundary",
            "-b",
            help="Fork exactly the view the model saw before boundary K (from 1).",
            callback=bounded("--before-boundary", 1, INT64_MAX),
        ),
    ] = None,
    title: Annotated[Optional[str], typer.Option(help="The fork's title (default: the parent's).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Fork a session: a new session whose view is one the parent had, the parent untouched.

    No option forks the active view. A cut that would leave a tool_use without its
    result is refused with the nearest valid points.

    Examples:

      sessionstore fork 3f2a91c0 --before-boundary 1

      sessionstore fork 3f2a91c0 --at 7c1d --title 'try the other fix' --json
    """
    if at is not None and before_boundary is not None:
        raise UsageError("give --at or --before-boundary, not both")
    if at is not None and not at.strip():
        raise UsageError("--at needs a message seq or uuid (see `sessionstore view SESSION`), got an empty value")
    from sessionstore.storage.write.fork import ancestry

    with open_store(db) as store:
        parent = store.get(session)
        fork = parent.fork(at, before_boundary=before_boundary, title=title)
        chain = ancestry(store.db, fork.id)
        entries = len(fork.active_entries())
        tokens = fork.view_tokens
    info = chain[0]
    if json_out:
        print_json(
            {
                "id": fork.id,
                "title": fork.title,
                "entries": entries,
                "view_tokens": tokens,
                "fork": info.to_dict(),
                "lineage": [x.parent_id for x in chain],
            }
        )
        return
    typer.echo(fork.id)
    typer.echo(
        f"forked from {info.parent_id} {one_line(info.point)}: {entries} entries, {tokens:,} tokens "
        f"(continue it: sessionstore chat {fork.id[:8]}; hand it back: sessionstore export {fork.id[:8]} "
        "--format claude-code --install)",
        err=True,
    )


def lineage_line(info: Lineage | None, children: list[Lineage]) -> str | None:
    """One line saying where a session was forked from and how many forks it has, or None for neither."""
    parts = []
    if info is not None:
        gone = "" if info.parent_exists else " (deleted)"
        parts.append(f"forked from {info.parent_id}{gone} {one_line(info.point)}")
    if children:
        parts.append(
            f"{len(children)} fork{'s' if len(children) != 1 else ''}: "
            + ", ".join(c.session_id[:8] for c in children[:5])
            + (", ..." if len(children) > 5 else "")
        )
    return "; ".join(parts) or None


def lineage_of(store: Any, session_id: str) -> str | None:
    """`lineage_line` for one session, read in two indexed lookups."""
    from sessionstore.storage.write.fork import ancestry, forks_of

    chain = ancestry(store.db, session_id, limit=1)
    return lineage_line(chain[0] if chain else None, forks_of(store.db, session_id, limit=6))


def install(
    store: Any,
    session: str,
    fmt: str,
    claude_dir: str | None,
    codex_home: str | None,
    json_out: bool,
    *,
    redact: bool = False,
) -> None:
    """`export --format claude-code|codex --install`: write where the tool resumes from and print the command.

    With `redact`, every credential `secrets` lists for the session is replaced in the file written.
    """
    from sessionstore.interchange.install import install_claude_code, install_codex
    from sessionstore.secrets import Redactor

    s = store.get(session)
    if fmt not in ("claude-code", "codex"):
        raise UsageError(f"--install writes claude-code or codex sessions, not {fmt}")
    if fmt == "claude-code" and codex_home is not None:
        raise UsageError("--codex-home goes with --format codex")
    if fmt == "codex" and claude_dir is not None:
        raise UsageError("--claude-dir goes with --format claude-code")
    redactor = Redactor.for_session(s, redact=True) if redact else None
    if fmt == "claude-code":
        done = install_claude_code(s, claude_config=claude_dir, redactor=redactor)
    else:
        done = install_codex(s, home=codex_home, redactor=redactor)
    if redactor is not None:
        say_secrets(redactor, s.id)
    if json_out:
        print_json(done.to_dict())
        return
    note = f" ({done.left_out} block(s) {fmt} cannot hold left out)" if done.left_out else ""
    typer.echo(f"wrote {done.entries} entries to {one_line(str(done.path))}{note}", err=True)
    typer.echo(one_line(done.command))
