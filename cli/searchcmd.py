"""`sessionstore search QUERY`: find any message ever recorded, and the command that opens it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from .common import (
    MAX_LIMIT,
    DbOption,
    JsonOption,
    bounded,
    cell,
    console,
    err_console,
    one_line,
    open_store,
    print_json,
)

if TYPE_CHECKING:
    from sessionstore.storage.derived.search import Hit

#: Messages waiting to be indexed from which the first search shows a progress bar.
PROGRESS_FROM = 5_000

HELP = """Search every message of every session: the transcript, compacted spans included.

Query language: words (a message must contain all of them), "exact phrases" in
double quotes, and nothing else: every word or phrase is matched as a plain,
case-insensitive substring, so paths (src/app/main.py), identifiers
(test_word_frequencies), error strings ("KeyError: 'id'") and text without spaces
(東京都の天気) are found as written. Characters like * - ( : are searched
literally; there are no operators. A query with no letter or digit is refused;
one that starts with - goes after -- (sessionstore search -- -v).

Searched: user and assistant text, tool inputs (commands, paths), tool results
(spilled ones from their original content) and summaries; not thinking blocks.
The index catches up with new messages at the start of each search.

Each hit says whether its message is in the active view or which boundary
replaced it, and the command that opens it there.

Examples:

  sessionstore search "flaky test" --since 7d

  sessionstore search test_word_frequencies --role tool --in compacted

  sessionstore search src/parser.py --cwd ~/code/app --json
"""


def register(app: typer.Typer) -> None:
    """Add `search` to the app."""
    app.command("search", help=HELP)(search_cmd)


def search_cmd(
    query: Annotated[str, typer.Argument(help='Words, "exact phrases", paths or identifiers.')],
    session: Annotated[Optional[str], typer.Option("--session", help="Only this session (id or prefix).")] = None,
    role: Annotated[Optional[str], typer.Option(help="user, assistant, tool or summary.")] = None,
    since: Annotated[Optional[str], typer.Option(help="A date (2026-11-01) or an age (7d, 12h, 2w).")] = None,
    cwd: Annotated[
        Optional[str], typer.Option(help="Only sessions whose working directory is under this path.")
    ] = None,
    in_: Annotated[str, typer.Option("--in", help="active, compacted or all.")] = "all",
    host: Annotated[Optional[str], typer.Option(help="Only sessions captured on this host.")] = None,
    limit: Annotated[int, typer.Option(help="How many hits at most.", callback=bounded("--limit", 1, MAX_LIMIT))] = 20,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    from sessionstore.storage.derived.search import LIMIT_MAX, parse_query

    parse_query(query)
    with open_store(db, read_only=True) as store:
        _catch_up_with_progress(store)
        # One hit past the page tells whether the page holds them all (then `total` is exact).
        hits = store.search(
            query,
            session=session,
            role=role,
            since=since,
            cwd=_expand(cwd),
            in_=in_,
            limit=min(limit + 1, LIMIT_MAX),
            host=host,
        )
    more = len(hits) > limit
    hits = hits[:limit]
    if json_out:
        print_json(
            {"query": query, "total": None if more else len(hits), "more": more, "hits": [h.to_dict() for h in hits]}
        )
        return
    print_hits(query, hits)


def _catch_up_with_progress(store: Any) -> None:
    """Index what was recorded since the last search (through the store's index connection: the store is
    read-only), with a progress bar on stderr when it is a lot."""
    from rich.progress import Progress

    from sessionstore.storage.derived.search import pending_count, update_index

    waiting = pending_count(store.db)
    if waiting < PROGRESS_FROM:
        return
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task(f"indexing {waiting:,} messages for search", total=waiting)
        update_index(store, progress=lambda n: bar.advance(task, n))


def _expand(path: Optional[str]) -> Optional[str]:
    """`~` expanded; other paths as given (sessions record absolute working directories)."""
    import os

    return os.path.expanduser(path) if path else path


def print_hits(query: str, hits: list[Hit]) -> None:
    """Hits grouped by session (sessions in the order of their best hit), each with where it lives now."""
    if not hits:
        console.print(cell(f"no message matches {query!r}"))
        return
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(hit.session, []).append(hit)
    for sid, group in groups.items():
        head = group[0]
        table = Table(title=cell(f"{sid} · {head.title or '(untitled)'} · {head.cwd or ''}"), title_justify="left")
        for col in ("seq", "role", "when", "where", "snippet"):
            table.add_column(col, overflow="fold")
        for hit in group:
            where = "active view" if hit.boundary is None else f"boundary {hit.boundary}"
            table.add_row(str(hit.seq), cell(hit.role), cell((hit.timestamp or "")[:16]), where, marked(hit.snippet))
        console.print(table)
        console.print(cell(f"  open: sessionstore show {sid} SEQ"))
    console.print(Text(f"{len(hits)} hit(s) in {len(groups)} session(s)"))


def marked(snippet: str) -> Text:
    """The snippet as Rich text, matches in reverse on a terminal, «marked» elsewhere (never parsed as markup)."""
    if not console.is_terminal:
        return cell(snippet)
    from sessionstore.storage.derived.search import MARK_CLOSE, MARK_OPEN

    text = Text()
    rest = snippet
    while MARK_OPEN in rest:
        before, _, after = rest.partition(MARK_OPEN)
        inside, _, rest = after.partition(MARK_CLOSE)
        text.append(one_line(before))
        text.append(one_line(inside), style="bold reverse")
    text.append(one_line(rest))
    return text
