"""The `sessionstore` command line: a thin layer over the Python API."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from . import (
    browsecmd,
    chatcmd,
    compactcmd,
    dbcmd,
    deletecmd,
    doctorcmd,
    evalcmd,
    forkcmd,
    importcmd,
    mcpcmd,
    pincmd,
    pipelinecmd,
    recallcmd,
    searchcmd,
    sharecmd,
    showcmd,
    usagecmd,
    watchcmd,
)
from . import secretscmd
from .common import (
    INT64_MAX,
    MAX_LIMIT,
    DbOption,
    JsonOption,
    UsageError,
    bounded,
    cell,
    console,
    err_console,
    note_local_continuation,
    one_line,
    open_store,
    preview,
    print_json,
    short_ids,
)
from .tables import COST_COLUMN_FROM, sessions_table

if TYPE_CHECKING:
    from sessionstore.storage.store import SessionStore
    from sessionstore.usage import Usage

#: Most tokens a context window can be.
MAX_WINDOW = 100_000_000

app = typer.Typer(
    name="sessionstore",
    help="A durable memory for LLM coding agents: sessions, active views, compaction, history.\n\n"
    "Examples:\n\n"
    "  sessionstore new --title 'fix flaky test' --model claude-sonnet-4-6\n\n"
    "  sessionstore append SESSION messages.jsonl\n\n"
    "  sessionstore view SESSION --json",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(dbcmd.app, name="db")


def _print_version(value: bool) -> None:
    """`--version`: print the installed version and exit."""
    if value:
        from sessionstore import __version__

        typer.echo(f"sessionstore {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """A durable memory for LLM coding agents: sessions, active views, compaction, history."""


#: Exit codes: a runtime failure (the database busy, unreachable, corrupt or foreign) is not the caller's input.
EXIT_RUNTIME, EXIT_USAGE = 1, 2


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning expected errors into one line on stderr and an exit code (see exit_code)."""
    _warnings_to_stderr()
    args = sys.argv[1:] if argv is None else argv
    try:
        refuse_undecodable(args)
        app_for(args)(args=args, prog_name="sessionstore")
    except Exception as exc:
        if not reported(exc):
            raise
        sys.stderr.write(f"error: {one_line(' '.join(str(exc).split()))}\n")
        sys.exit(exit_code(exc))


def app_for(args: list[str]) -> typer.Typer:
    """The app to run `args` with: when they start with a command's name, a copy holding that command alone.

    Typer builds every registered command's parameters (from their annotations) before it dispatches: for forty
    commands that is a tenth of `sessions`' run. Anything else (no command, an option first, an unknown name)
    gets the whole app, so `--help`, `--version` and a misspelt command behave as they always did.
    """
    name = args[0] if args else None
    commands = [info for info in app.registered_commands if info.name == name]
    groups = [info for info in app.registered_groups if info.name == name]
    if not commands and not groups:
        return app
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def reported(exc: Exception) -> bool:
    """Whether `main` turns `exc` into one line and an exit code: a usage error or the store's own error.

    The store's error class is imported only once something failed, so a run that fails nothing never loads it.
    """
    if isinstance(exc, UsageError):
        return True
    from sessionstore.storage.core.errors import SessionStoreError

    return isinstance(exc, SessionStoreError)


def exit_code(exc: Exception) -> int:
    """1 when the store failed (busy, unreachable, corrupt or foreign, a schema it cannot upgrade, a rewrite that
    lost a race, a search index it could not build or read) or the summarizer's API did (unreachable, an error
    status, no summary): trying again later may work; 2 for a usage error or bad input (click's own usage errors
    exit 2)."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    from sessionstore.compaction.summarizers.base import SummarizerUnavailable
    from sessionstore.storage.codecs.blobs import BlobCorrupt
    from sessionstore.storage.core.errors import (
        DatabaseUnavailable,
        MigrationError,
        NotPermitted,
        RewriteConflict,
        StoreBusy,
    )
    from sessionstore.storage.derived.search import SearchIndexError
    from sessionstore.storage.codecs.textpack import TextCorrupt

    runtime = (
        StoreBusy,
        DatabaseUnavailable,
        MigrationError,
        BlobCorrupt,
        RewriteConflict,
        SearchIndexError,
        SummarizerUnavailable,
        TextCorrupt,
        NotPermitted,
    )
    return EXIT_RUNTIME if isinstance(exc, runtime) else EXIT_USAGE


def refuse_undecodable(args: list[str]) -> None:
    """UsageError for an argument that was not valid UTF-8 (Python carries its bytes as lone surrogates)."""
    for number, arg in enumerate(args, 1):
        if any("\ud800" <= ch <= "\udfff" for ch in arg):
            try:
                shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                shown = arg.encode("utf-8", "backslashreplace").decode("utf-8")
            raise UsageError(f"argument {number} is not valid UTF-8: {shown}")


def _warnings_to_stderr() -> None:
    """The library's warnings (an unknown setting, a BPE file that will not load) as `warning: ...` lines."""
    logger = logging.getLogger("sessionstore")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_OneLineFormatter("warning: %(message)s"))
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)


class _OneLineFormatter(logging.Formatter):
    """A warning as one line of visible text: warnings quote stored ids and file names."""

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record))


@app.command("sessions")
def sessions_cmd(
    db: DbOption = None,
    json_out: JsonOption = False,
    limit: Annotated[
        int, typer.Option(help="How many sessions to show.", callback=bounded("--limit", 0, MAX_LIMIT))
    ] = 50,
    offset: Annotated[
        int, typer.Option(help="Skip this many (paging).", callback=bounded("--offset", 0, INT64_MAX))
    ] = 0,
    host: Annotated[Optional[str], typer.Option(help="Only sessions captured on this host.")] = None,
) -> None:
    """List sessions, most recently updated first (with whose they are, on a shared store).

    Example: sessionstore sessions --limit 10 --host laptop --json
    """
    with open_store(db, read_only=True) as store:
        rows = store.list(limit=limit, offset=offset, host=host)
        some = bool(rows) or (limit == 0 and bool(store.list(limit=1, offset=offset, host=host)))
        hosts = store.hosts() if not rows and host is not None else {}
        usage = _usage_of(store, [r["id"] for r in rows]) if json_out or console.width >= COST_COLUMN_FROM else {}
    if json_out:
        print_json([{**r, "cost_usd": usage[r["id"]].cost_usd} for r in rows])
        return
    if not rows and some:
        err_console.print("--limit 0 lists no session; there are some here: give --limit N (default 50)")
        return
    if not rows and host is not None and not offset:
        err_console.print(_no_host_line(host, hosts))
        return
    if not rows:
        err_console.print(
            "no sessions here yet"
            + (f" past the first {offset}" if offset else "")
            + ": `sessionstore new`, or bring in your transcripts with "
            "`sessionstore watch --once` (Claude Code and Codex) or `sessionstore import ...`"
        )
        return
    console.print(sessions_table(rows, console.width, _short_source, _cost_texts(usage) if usage else None))


def _usage_of(store: SessionStore, ids: list[str]) -> dict[str, Usage]:
    """Each session's usage and cost; imported only here, since a table too narrow for costs needs none of it."""
    from sessionstore.usage import session_usage

    return session_usage(store, ids)


def _cost_texts(usage: dict[str, Usage]) -> dict[str, str]:
    """Session id -> its cost as the table shows it."""
    from sessionstore.usage import cost_text

    return {sid: cost_text(u) for sid, u in usage.items()}


def _no_host_line(host: str, hosts: dict[str, int]) -> str:
    """What `sessions --host H` says when no session was captured on H: the hosts there are, with their counts."""
    if not hosts:
        return f"no sessions captured on host {one_line(host)!r}: there are no sessions here yet"
    named = sorted(hosts.items(), key=lambda item: -item[1])[:HOSTS_NAMED]
    there = ", ".join(f"{one_line(name)} ({count:,})" for name, count in named)
    more = f" and {len(hosts) - len(named):,} more" if len(hosts) > len(named) else ""
    return f"no sessions captured on host {one_line(host)!r}; hosts here: {there}{more}"


#: How many hosts `sessions --host H` names when H has no session (the ones with the most sessions).
HOSTS_NAMED = 10


def _short_source(row: dict[str, Any]) -> str:
    """The source tool's id of an imported session, shortened like the ids ("" for a native session)."""
    key = row.get("source_id") or ""
    if not key or key.startswith("/"):
        return ""
    main, _, agent = key.partition("/")
    return main[:8] + (f"/{agent}" if agent else "")


@app.command("new")
def new_cmd(
    db: DbOption = None,
    title: Annotated[Optional[str], typer.Option(help="A title to find the session by.")] = None,
    model: Annotated[Optional[str], typer.Option(help="The model the agent talks to.")] = None,
    context_window: Annotated[
        Optional[int],
        typer.Option(
            help="The model's context window in tokens. Auto-compact fires at window - min(max output, 20,000) "
            "- 13,000; below 40,000 tokens the reserve is at most half the window and the buffer 65% of the "
            "rest, so a 30,000 window compacts at 5,250 (not at -3,000).",
            callback=bounded("--context-window", 1, MAX_WINDOW),
        ),
    ] = None,
    cwd: Annotated[
        Optional[str],
        typer.Option(help="The agent's working directory; a relative path is stored absolute, from the current one."),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Create a session and print its id.

    Example: sessionstore new --title 'refactor parser' --context-window 200000
    """
    with open_store(db, create=True) as store:
        s = store.create_session(
            title=title, model=model, context_window=context_window, cwd=os.path.abspath(cwd) if cwd else cwd
        )
    if json_out:
        print_json({"id": s.id, "title": s.title, "model": s.model, "context_window": s.context_window})
    else:
        typer.echo(s.id)


def read_messages(source: str) -> list[Any]:
    """Messages from a file or stdin: one JSON object, a JSON list, or JSON Lines."""
    if not source:
        raise UsageError("an empty path names no file: give a file, or - for stdin")
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror}") from exc
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source}: not valid UTF-8 (byte {exc.start})") from exc
    if not text.strip():
        raise UsageError(f"{source}: no message given")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return _read_jsonl(source, text)
    except RecursionError as exc:
        raise UsageError(f"{source}: JSON nested too deeply") from exc
    if isinstance(value, dict):
        return _checked(source, [value])
    if isinstance(value, list):
        return _checked(source, value)
    raise UsageError(f"{source}: expected a JSON object, a list of objects, or JSON Lines")


def _read_jsonl(source: str, text: str) -> list[Any]:
    """One message per line; only a newline ends a line (U+2028 and friends may sit inside JSON strings)."""
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise UsageError(f"{source}:{number}: invalid JSON ({exc.msg})") from exc
        except RecursionError as exc:
            raise UsageError(f"{source}:{number}: JSON nested too deeply") from exc
    return _checked(source, out)


#: Deepest JSON nesting `append` takes: real messages stay far below, deeper input hits recursion limits.
MAX_JSON_DEPTH = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


def _checked(source: str, messages: list[Any]) -> list[Any]:
    """`messages`, once no value nests deeper than MAX_JSON_DEPTH and every string is valid Unicode."""
    stack: list[tuple[Any, int]] = [(messages, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found:
                raise UsageError(
                    f"{source}: a string holds a lone surrogate (U+{ord(found.group()):04X}), "
                    "which is not valid Unicode"
                )
        elif isinstance(item, (list, dict)):
            if depth > MAX_JSON_DEPTH:
                raise UsageError(f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
            children = [*item, *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return messages


@app.command("append")
def append_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    source: Annotated[str, typer.Argument(help="A JSON message, a JSON list, or JSONL; '-' for stdin.")] = "-",
    db: DbOption = None,
    json_out: JsonOption = False,
    allow_unknown_blocks: Annotated[
        bool,
        typer.Option(
            "--allow-unknown-blocks",
            help="Keep content block types the store does not know, verbatim (an API response's are kept anyway).",
        ),
    ] = False,
) -> None:
    """Append messages to a session, all in one transaction (all or nothing).

    A message holding the API's `compaction` block with a summary becomes a boundary: the view
    starts at it.

    Example: echo '{"role":"user","content":"hi"}' | sessionstore append SESSION -
    """
    messages = read_messages(source)
    if not messages:
        raise UsageError(f"nothing to append: {'stdin' if source == '-' else source} holds no message")
    with open_store(db) as store:
        target = store.get(session)
        given = target.id
        stored = target.append_many(messages, allow_unknown_blocks=allow_unknown_blocks)
    note_local_continuation(given, target.id)
    if json_out:
        print_json([{"seq": m.seq, "uuid": m.uuid} for m in stored])
    else:
        typer.echo(f"appended {len(stored)} message(s)")


def view_payload(s: Any) -> dict[str, Any]:
    """The `view --json` document: the API messages and the entries behind them."""
    entries = s.active_entries()
    from sessionstore.storage.records.view import to_api_messages

    state = s.refresh_state()
    return {
        "session": s.id,
        "view_version": state.view_version,
        "tokens": state.view_tokens,
        "messages": to_api_messages(entries),
        "entries": [e.to_dict() for e in entries],
    }


@app.command("view")
def view_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Show the active view: what the model sees on the next call.

    Example: sessionstore view SESSION --json | jq '.messages | length'
    """
    with open_store(db, read_only=True) as store:
        payload = view_payload(store.get(session))
    if json_out:
        print_json(payload)
        return
    table = Table(
        title=cell(f"view of {payload['session']} · version {payload['view_version']} · {payload['tokens']:,} tokens")
    )
    for col in ("#", "role", "type", "tokens", "uuid", "content"):
        table.add_column(col, overflow="fold")
    shown = short_ids([e["uuid"] for e in payload["entries"]])
    for e in payload["entries"]:
        kind = e["subtype"] or e["type"]
        table.add_row(
            str(e["position"]),
            cell(e["role"]),
            cell(kind),
            str(e["tokens"]),
            cell(shown[e["uuid"]]),
            cell(preview(e["content"])),
        )
    console.print(table)


@app.command("stats")
def stats_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Counts for one session: messages, view entries and tokens, bytes, boundaries, usage and cost.

    Example: sessionstore stats SESSION --json
    """
    from sessionstore.storage.upkeep.stats import session_stats, stat_rows
    from sessionstore.usage import cost_text, hit_rate_text, session_usage

    with open_store(db, read_only=True) as store:
        found = store.get(session)
        stats = session_stats(found)
        usage = session_usage(store, [found.id])[found.id]
    if json_out:
        print_json({**stats, "usage": usage.to_dict()})
        return
    title = one_line(f"stats of {stats['session']}")
    table = Table(title=Text(title), min_width=len(title))
    table.add_column("what")
    table.add_column("value", justify="right")
    for label, value in stat_rows(stats):
        table.add_row(cell(label), cell(value))
    for label, value in (
        ("API responses", f"{usage.responses:,}"),
        ("input tokens", f"{usage.input_tokens:,}"),
        ("cache write tokens", f"{usage.cache_write:,}"),
        ("cache read tokens", f"{usage.cache_read:,}"),
        ("output tokens", f"{usage.output_tokens:,}"),
        ("cache hit rate", hit_rate_text(usage)),
        ("cost", cost_text(usage)),
    ):
        table.add_row(cell(label), cell(value))
    if usage.unpriced_models:
        table.add_row(cell("not in the price table"), cell(", ".join(sorted(usage.unpriced_models))))
    console.print(table)


for _module in (
    compactcmd,
    importcmd,
    pipelinecmd,
    doctorcmd,
    chatcmd,
    deletecmd,
    searchcmd,
    watchcmd,
    browsecmd,
    mcpcmd,
    evalcmd,
    recallcmd,
    forkcmd,
    showcmd,
    usagecmd,
    pincmd,
    sharecmd,
):
    _module.register(app)
secretscmd.register(app)
