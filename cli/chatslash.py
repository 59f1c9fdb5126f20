"""Slash commands inside `sessionstore chat`: look back, search, compact, export, stats; none reaches the model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from sessionstore.storage.read import history as hist
from sessionstore.storage.core.errors import SessionStoreError

from .common import UsageError, echo, fmt_time, one_line, preview
from .compactcmd import view_tokens_line

#: Rows of a past view shown before asking whether to go on.
PAGE_ROWS = 20

HELP = {
    "/history": "the compaction boundaries of this session",
    "/history K": "the view the model saw just before boundary K, a page at a time",
    "/search QUERY": 'messages of this session matching QUERY (words, "phrases"); /search --all QUERY: every session',
    "/compact [instructions]": "compact the view now, optionally telling the summary what to keep",
    "/export FORMAT PATH": "write the whole transcript as jsonl, markdown, html or claude-code to PATH",
    "/stats": "messages, view tokens, boundaries of this session",
    "/help": "this list",
}


@dataclass
class SlashContext:
    """What a slash command works on: the store, the session, and how to ask the person for more."""

    store: Any
    session: Any
    read_line: Callable[[str], str | None]
    summarizer: Any = None
    #: The agent's pipeline config (its summaries name the recall tool the agent has).
    config: Any = None


def run_slash(ctx: SlashContext, line: str) -> None:
    """Run one slash command; an error is one line and the REPL goes on."""
    name, _, arg = line.strip().partition(" ")
    handler = HANDLERS.get(name)
    if handler is None:
        echo(f"unknown command {name}; the commands are:")
        _help(ctx, "")
        return
    try:
        handler(ctx, arg.strip())
    except (SessionStoreError, UsageError, OSError, ValueError) as exc:
        echo(f"error: {one_line(' '.join(str(exc).split()))}", err=True)


def _help(ctx: SlashContext, arg: str) -> None:
    for usage, what in HELP.items():
        echo(f"  {usage:<26} {what}")
    echo("  (anything else is sent to the model; an empty line or Ctrl-D quits)")


def _history(ctx: SlashContext, arg: str) -> None:
    if not arg:
        _boundaries(ctx)
        return
    try:
        index = int(arg)
    except ValueError:
        raise UsageError(f"/history takes a boundary number, not {arg!r}") from None
    _page_view(ctx, index)


def _boundaries(ctx: SlashContext) -> None:
    found = hist.boundaries(ctx.session)
    if not found:
        echo("no compaction yet: the active view is the whole conversation")
        return
    for b in found:
        echo(
            f"  {b.index:>3}  {fmt_time(b.created_at)}  {b.kind:<14} {b.trigger:<8} "
            f"{b.pre_tokens:,} -> {b.post_tokens:,} tokens, {b.messages_summarized} summarized  "
            f"{preview(b.summary or '', 50)}"
        )
    echo("  /history K shows the view before boundary K")


def _page_view(ctx: SlashContext, index: int) -> None:
    b = hist.boundary(ctx.session, index)
    entries = hist.view_at(ctx.session, b.replaced_version)
    summarized = {m.seq for m in hist.summarized_messages(ctx.session, index)}
    echo(f"view before boundary {index} ({b.kind}, {b.trigger}): {len(entries)} entries; ✂ = summarized by it")
    echo(view_tokens_line(entries, b))
    for start in range(0, len(entries), PAGE_ROWS):
        for e in entries[start : start + PAGE_ROWS]:
            mark = "✂" if e.seq in summarized else " "
            echo(f"  {mark} {e.position:>4} {e.role:<9} {e.tokens:>6}  {preview(e.content, 90)}")
        shown = min(start + PAGE_ROWS, len(entries))
        if shown < len(entries):
            answer = ctx.read_line(f"-- {shown} of {len(entries)}: Enter for more, q to stop -- ")
            if answer is None or answer.strip().lower().startswith("q"):
                return


def _search(ctx: SlashContext, arg: str) -> None:
    from .searchcmd import print_hits

    everywhere = arg.startswith("--all")
    query = arg[len("--all") :].strip() if everywhere else arg
    hits = ctx.store.search(query, session=None if everywhere else ctx.session.id, limit=20)
    print_hits(query, hits)


def _compact(ctx: SlashContext, arg: str) -> None:
    from sessionstore.compaction.engine import compact

    outcome = compact(ctx.session, summarizer=ctx.summarizer, custom_instructions=arg or None, config=ctx.config)
    echo(
        f"compacted ({outcome.kind}): {outcome.pre_tokens:,} -> {outcome.post_tokens:,} tokens, "
        f"{outcome.messages_summarized} messages summarized; /history lists the boundaries"
    )


def _export(ctx: SlashContext, arg: str) -> None:
    from sessionstore.interchange.export import export_claude_code, export_html, export_jsonl, export_markdown
    from sessionstore.storage.core.output import open_output

    fmt, _, path_text = arg.partition(" ")
    writers = {"jsonl": export_jsonl, "markdown": export_markdown, "html": export_html}
    if fmt not in (*writers, "claude-code") or not path_text.strip():
        raise UsageError("usage: /export jsonl|markdown|html|claude-code PATH")
    path = Path(path_text.strip()).expanduser()
    if fmt == "claude-code":
        with open_output(path, binary=True) as binary:
            count = export_claude_code(ctx.session, binary)
    else:
        with open_output(path) as text:
            count = writers[fmt](ctx.session, text)
    echo(f"wrote {count} messages to {path}")


def _stats(ctx: SlashContext, arg: str) -> None:
    from sessionstore.storage.upkeep.stats import session_stats, stat_rows

    for label, value in stat_rows(session_stats(ctx.session)):
        echo(f"  {label:<16} {one_line(value)}")


HANDLERS: dict[str, Callable[[SlashContext, str], None]] = {
    "/history": _history,
    "/search": _search,
    "/compact": _compact,
    "/export": _export,
    "/stats": _stats,
    "/help": _help,
}
