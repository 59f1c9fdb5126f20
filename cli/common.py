"""Shared pieces of the CLI: the `--db` option, opening the store, errors, JSON output, safe printing.

Stored text is untrusted: everything printed goes through `sessionstore.sanitize` (see `echo`, `cell`,
`print_json` and the consoles below, which never parse markup and sanitize whatever they render).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterator, Optional

import typer
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from sessionstore.sanitize import json_visible, one_line, visible

if TYPE_CHECKING:
    from sessionstore.storage.engine.config import Config
    from sessionstore.storage.store import SessionStore

DbOption = Annotated[
    Optional[str],
    typer.Option(
        "--db",
        envvar="SESSIONSTORE_DB_URL",
        help="Database URL (sqlite:///PATH or postgresql+psycopg://...). "
        "Default: SQLite under $XDG_DATA_HOME/sessionstore.",
        show_envvar=True,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class _Sanitized:
    """A renderable drawn as its inner renderable is, with every text segment passed through `visible`."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.inner, options):
            yield segment if segment.control else Segment(visible(segment.text), segment.style, segment.control)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.inner)


class _SanitizeHook(RenderHook):
    """The last line of defence: whatever a console prints is sanitized, even text a caller forgot to."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Sanitized(r) for r in renderables]


def safe_console(**options: Any) -> Console:
    """A Rich console that never parses markup and sanitizes every text segment it prints."""
    made = Console(markup=False, **options)
    made.push_render_hook(_SanitizeHook())
    return made


console = safe_console()
err_console = safe_console(stderr=True)


def echo(text: str, *, err: bool = False) -> None:
    """One message line (or block) on stdout or stderr, controls shown as text (see `sessionstore.sanitize`)."""
    typer.echo(visible(text), err=err)


def cell(value: Any) -> Text:
    """A table cell holding `value` as plain text on one line: never markup, never a control character."""
    return Text(one_line("" if value is None else str(value)))


class UsageError(Exception):
    """Bad input on the command line or in a file: one line on stderr, exit 2."""


#: The largest integer either database stores (a signed 64-bit column).
INT64_MAX = 2**63 - 1
#: Most rows one page of a listing (sessions, history, search hits) shows.
MAX_LIMIT = 1_000_000


def bounded(option: str, low: int, high: int) -> Callable[[Optional[int]], Optional[int]]:
    """An option callback refusing integers outside [low, high] (one line, exit 2, never an OverflowError)."""

    def check(value: Optional[int]) -> Optional[int]:
        if value is not None and not low <= value <= high:
            raise UsageError(f"{option} must be between {low:,} and {high:,}, got {value:,}")
        return value

    return check


@contextmanager
def open_store(url: str | None, *, create: bool = False, read_only: bool = False) -> Iterator[SessionStore]:
    """Open the store for one command and close it afterwards.

    Only commands that record something (`create`) may make a new SQLite file at a path the
    user gave; a read at a mistyped path says so instead of leaving an empty database there.
    A `read_only` command never upgrades an older database: it names `sessionstore db upgrade`.
    The store is imported here, not at the top: `--help` and `--version` never load it.
    """
    from sessionstore.storage.engine.config import Config
    from sessionstore.storage.store import SessionStore

    config = Config.from_env()  # a bad setting is reported before a missing file
    if not create:
        refuse_missing_sqlite(url)
    store = SessionStore.open(url, config=config, read_only=read_only)
    try:
        import_pending_sdk_entries(store, url, config)
        yield store
    finally:
        store.close()


def import_pending_sdk_entries(store: SessionStore, url: str | None, config: Config) -> None:
    """Agent SDK entries an adapter kept but had not imported yet (it stopped before its appends paused) become
    their sessions before the command reads; a store this command may not write is opened writable for it.

    One indexed query when nothing is pending. When the import cannot run, the command goes on and
    says so in one line: the entries stay kept, and pending.
    """
    from sessionstore.integrations.sdk_pending import has_pending

    if not has_pending(store.db):
        return
    from sessionstore.integrations.sdk_entries import catch_up
    from sessionstore.storage.core.errors import SessionStoreError
    from sessionstore.storage.store import SessionStore

    try:
        if not store.read_only:
            catch_up(store)
            return
        with SessionStore.open(url, config=config) as writer:
            catch_up(writer)
    except SessionStoreError as exc:
        typer.echo(f"note: Agent SDK entries are kept but not yet in their sessions: {one_line(str(exc))}", err=True)


def print_json(value: Any) -> None:
    """JSON on stdout, UTF-8, one document; controls json.dumps leaves raw (DEL, C1, bidi) written as \\u escapes."""
    sys.stdout.write(json_visible(json.dumps(value, ensure_ascii=False, indent=2, default=str)))
    sys.stdout.write("\n")


def refuse_missing_sqlite(url: str | None) -> None:
    """UsageError when `--db` (or SESSIONSTORE_DB_URL) names a SQLite file that does not exist.

    The default location is left alone: a first `sessions` there lists nothing.
    """
    given = url or os.environ.get("SESSIONSTORE_DB_URL")
    path = sqlite_file(given) if given else None
    if path is not None and not path.exists():
        raise UsageError(f"no database at {path}: check --db (`sessionstore new` or `sessionstore import` create one)")


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for other engines, memory databases and URLs that do not parse."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # a URL that does not parse is reported by the open that follows
        return None
    database = parsed.database
    if (
        not parsed.drivername.startswith("sqlite")
        or not database
        or database == ":memory:"
        or parsed.query.get("mode") == "memory"
        or database.startswith("file:")
    ):
        return None
    return Path(database).expanduser()


def fmt_time(epoch: float | None) -> str:
    """A local, human-readable timestamp."""
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


def short_ids(ids: list[str], minimum: int = 8) -> dict[str, str]:
    """Each id cut to the shortest prefix (at least `minimum` characters) no other id in `ids` starts with.

    Codex imports number their messages `codex-<line>`: eight characters would
    show the same `codex-17` on every row.
    """
    ordered = sorted(set(ids))
    out: dict[str, str] = {}
    for i, value in enumerate(ordered):
        shared = max(
            _common(value, ordered[i - 1]) if i else 0, _common(value, ordered[i + 1]) if i + 1 < len(ordered) else 0
        )
        out[value] = value[: max(minimum, shared + 1)]
    return out


def message_short_ids(store: SessionStore, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """For (session id, message uuid) pairs, each uuid's shortest prefix that `show SESSION PREFIX` resolves.

    A prefix unique among the pairs alone can start another message of the session (uuid7 ids
    of one batch share their first 13 characters): the session's uuids that share the first
    eight characters are read too, and each prefix is long enough to tell them all apart.
    """
    out: dict[str, str] = {}
    for session_id, first in sorted({(sid, uuid[:8]) for sid, uuid in pairs}):
        rows = store.db.all(
            "SELECT uuid FROM messages WHERE session_id = :id AND substr(uuid, 1, 8) = :p",
            {"id": session_id, "p": first},
        )
        out.update(short_ids([str(r[0]) for r in rows]))
    listing = short_ids([uuid for _, uuid in pairs])
    return {uuid: max(out.get(uuid, ""), listing[uuid], key=len) for _, uuid in pairs}


def _common(a: str, b: str) -> int:
    """Length of the common prefix of `a` and `b`."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def preview(content: Any, width: int = 80) -> str:
    """One line that says what a message holds."""
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for block in content:
            kind = block.get("type")
            if kind == "text":
                parts.append(block.get("text", ""))
            elif kind == "tool_use":
                parts.append(f"[tool_use {block.get('name')}]")
            elif kind == "tool_result":
                parts.append("[tool_result" + (" error" if block.get("is_error") else "") + "]")
            elif kind == "compaction":
                from sessionstore.storage.core.blocktypes import compaction_line

                parts.append(compaction_line(block))
            else:
                parts.append(f"[{kind}]")
        text = " ".join(parts)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def note_local_continuation(given: str, written_to: str) -> None:
    """Say on stderr when a write to an imported session went to its local continuation (a fork of it)."""
    if written_to != given:
        typer.echo(
            f"note: {given} is an imported session (its source file keeps feeding it); this write went to "
            f"its local continuation {written_to}",
            err=True,
        )
