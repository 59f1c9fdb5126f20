"""`compact`, `history` and `export`: compaction and the way back across it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional, Sequence

import sys

import typer

from sessionstore.sanitize import visible

from .forkcmd import install as install_view, lineage_of
from .redaction import say_secrets
from .tables import ellipsize, short_time
from .common import (
    INT64_MAX,
    MAX_LIMIT,
    DbOption,
    JsonOption,
    UsageError,
    bounded,
    console,
    echo,
    note_local_continuation,
    one_line,
    open_store,
    preview,
    print_json,
    short_ids,
)

if TYPE_CHECKING:
    from sessionstore.storage.read import history as hist
    from sessionstore.storage.write.session import Session
    from sessionstore.storage.core.types import ViewEntry


#: `history --json` shows this much of each summary unless --full.
SUMMARY_PREVIEW_CHARS = 200


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("compact")(compact_cmd)
    app.command("history")(history_cmd)
    app.command("export")(export_cmd)


def compact_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    instructions: Annotated[
        Optional[str], typer.Option("--instructions", help="Extra instructions for the summary.")
    ] = None,
    from_uuid: Annotated[
        Optional[str],
        typer.Option("--from", help="Keep up to this message (seq, uuid or a unique start), summarize after it."),
    ] = None,
    up_to: Annotated[
        Optional[str],
        typer.Option("--up-to", help="Summarize before this message (seq, uuid or a unique start), keep from it."),
    ] = None,
    summarizer: Annotated[str, typer.Option(help="extractive (offline) or anthropic (real API).")] = "extractive",
    memory: Annotated[bool, typer.Option("--memory", help="Try session-memory compaction first.")] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Compact the active view now (manual trigger). Nothing recorded is lost.

    Examples:

      sessionstore compact SESSION

      sessionstore compact SESSION --up-to 3f2a... --instructions 'keep the API design'
    """
    from sessionstore.compaction.engine import compact, make_summarizer

    if from_uuid is not None and up_to is not None:
        raise UsageError("give --from or --up-to, not both")
    for flag, value in (("--from", from_uuid), ("--up-to", up_to)):
        if value is not None and not value.strip():
            raise UsageError(
                f"{flag} needs a message: its seq, uuid or a unique start of it (see `sessionstore view SESSION`), "
                "got an empty value"
            )
    if summarizer not in ("extractive", "anthropic"):
        raise UsageError(f"unknown summarizer {summarizer!r}: use extractive or anthropic")
    with open_store(db) as store:
        s = store.get(session)
        given = s.id
        from_uuid, up_to = _message_uuid(s, "--from", from_uuid), _message_uuid(s, "--up-to", up_to)
        outcome = compact(
            s,
            summarizer=make_summarizer(summarizer),
            custom_instructions=instructions,
            from_uuid=from_uuid,
            up_to_uuid=up_to,
            use_memory=memory,
        )
    note_local_continuation(given, s.id)
    if json_out:
        print_json(outcome.to_dict())
    else:
        echo(
            f"compacted ({outcome.kind}): {outcome.pre_tokens:,} -> {outcome.post_tokens:,} tokens, "
            f"{outcome.messages_summarized} messages summarized, {outcome.kept} kept verbatim"
        )
        if outcome.pivot_note:
            echo(f"note: {outcome.pivot_note}")


#: Boundaries `history` lists per page unless --limit says otherwise.
HISTORY_PAGE = 50


def _message_uuid(s: Session, option: str, given: Optional[str]) -> Optional[str]:
    """The uuid of the message `given` names (a seq, a uuid or a unique start of one, as `show` takes it)."""
    from sessionstore.storage.core.errors import MessageNotFound
    from sessionstore.storage.engine.resolve import resolve_message

    if given is None:
        return None
    try:
        return resolve_message(s, given)[1]
    except MessageNotFound as exc:
        raise type(exc)(f"{option}: {exc}") from exc


def history_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    boundary: Annotated[
        Optional[int],
        typer.Option(
            "--boundary",
            "-b",
            help="Show what the model saw just before boundary K (from 1).",
            callback=bounded("--boundary", 1, INT64_MAX),
        ),
    ] = None,
    summary: Annotated[bool, typer.Option("--summary", help="With --boundary: print K's summary text.")] = False,
    recompact: Annotated[
        Optional[str],
        typer.Option(
            "--recompact",
            help="With --boundary: summarize K's span again "
            "with extractive, anthropic, mask or user-only; show it, its gate report and a diff "
            "against the recorded summary. Nothing is written.",
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            "-n",
            help="List at most this many boundaries (one page).",
            callback=bounded("--limit", 1, MAX_LIMIT),
        ),
    ] = HISTORY_PAGE,
    offset: Annotated[
        int,
        typer.Option(
            "--offset", help="Skip this many boundaries before the page.", callback=bounded("--offset", 0, INT64_MAX)
        ),
    ] = 0,
    full: Annotated[
        bool, typer.Option("--full", help="With --json: each boundary's whole summary, not a preview.")
    ] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Walk the session's history by compaction boundary, a page at a time.

    The listing's --json cuts each summary to 200 characters (`summary_truncated`
    says so; `summary_chars` is the full length); --full gives it whole.

    Examples:

      sessionstore history SESSION

      sessionstore history SESSION --offset 50 --limit 50

      sessionstore history SESSION --json --full

      sessionstore history SESSION --boundary 2 --json

      sessionstore history SESSION --boundary 2 --summary

      sessionstore history SESSION --boundary 2 --recompact anthropic --json
    """
    if summary and boundary is None:
        raise UsageError("--summary needs --boundary K")
    if full and not json_out:
        raise UsageError(
            "--full needs --json (the table shows each summary's first line; --boundary K --summary prints one whole)"
        )
    if boundary is not None and (limit != HISTORY_PAGE or offset):
        raise UsageError(
            "--limit and --offset page the list of boundaries; with --boundary K the view before K is shown whole"
        )
    if recompact is not None:
        from .recompactcmd import show_recompaction

        if boundary is None:
            raise UsageError("--recompact needs --boundary K")
        show_recompaction(db, session, boundary, recompact, json_out)
        return
    from sessionstore.storage.read import history as hist

    with open_store(db, read_only=True) as store:
        s = store.get(session)
        if boundary is None:
            _list_boundaries(s, json_out, limit, offset, full)
        elif summary:
            b = hist.boundary(s, boundary)
            if json_out:
                print_json({"index": b.index, "summary": b.summary})
            else:
                echo(b.summary or "")
        else:
            _show_boundary(s, boundary, json_out)


def _list_boundaries(s: Session, json_out: bool, limit: int, offset: int, full: bool = False) -> None:
    """One page of boundaries; the table previews summaries from their first characters only."""
    from sessionstore.storage.read import history as hist

    if json_out:
        found = hist.boundaries(s, limit=limit, offset=offset, summaries=True)
        print_json([b.to_dict(preview_chars=None if full else SUMMARY_PREVIEW_CHARS) for b in found])
        return
    found = hist.boundaries(s, limit=limit, offset=offset, summaries=False)
    total = hist.boundary_count(s)
    title = f"history of {s.id}: {total} boundar{'y' if total == 1 else 'ies'}"
    if found and (offset or len(found) < total):
        title += f" (showing {found[0].index}-{found[-1].index}; --offset/--limit page on)"
    rows = [
        (
            str(b.index),
            short_time(b.created_at),
            b.kind,
            b.trigger,
            f"{b.pre_tokens:,} → {b.post_tokens:,}",
            str(b.messages_summarized),
            preview(b.summary_line, 60),
        )
        for b in found
    ]
    echo(one_line(title))
    lineage = lineage_of(s.store, s.id)
    if lineage:
        echo(one_line(lineage))
    echo(_plain_table(("#", "time", "kind", "trigger", "tokens", "summarized", "summary"), rows, console.width))


#: The narrowest the last (text) column of a history table gets, whatever the terminal's width.
LAST_COLUMN_MIN = 10


def _plain_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]], width: int) -> str:
    """Aligned columns as plain text: a page of history prints in a millisecond (a Rich table takes ~3 ms a row).

    The last column (the text) is cut with an ellipsis so that each line fits in `width` characters.
    """
    rows = [tuple(map(one_line, r)) for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    room = max(LAST_COLUMN_MIN, width - sum(widths[:-1]) - 2 * (len(widths) - 1))
    widths[-1] = min(widths[-1], room)
    widths = _narrowed(widths, width - 2 * (len(widths) - 1))
    rows = [tuple(ellipsize(c, w) for c, w in zip(r, widths, strict=True)) for r in rows]
    headers = tuple(ellipsize(h, w) for h, w in zip(headers, widths, strict=True))
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


#: The narrowest any column of a history table is cut to when the columns together are too wide.
COLUMN_MIN = 4


def _narrowed(widths: list[int], room: int) -> list[int]:
    """`widths` with the widest columns cut, one character at a time, until they sum to `room` or less.

    The last column already gave up all but LAST_COLUMN_MIN; what still overflows (a long token
    count, a long kind) comes off the widest column, none below COLUMN_MIN.
    """
    widths = list(widths)
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= COLUMN_MIN:
            break
        widths[widest] -= 1
    return widths


def _show_boundary(s: Session, index: int, json_out: bool) -> None:
    from sessionstore.storage.read import history as hist
    from sessionstore.storage.records.view import to_api_messages

    b = hist.boundary(s, index)
    entries = hist.view_before(s, index)
    summarized = hist.summarized_messages(s, index)
    if json_out:
        print_json(
            {
                "session": s.id,
                "view_version": b.replaced_version,
                "tokens": hist.view_tokens(entries),
                "messages": to_api_messages(entries),
                "entries": [e.to_dict() for e in entries],
                "boundary": b.to_dict(),
                "summarized": [m.to_dict() for m in summarized],
            }
        )
        return
    echo(f"view before boundary {index} ({b.kind}, {b.trigger}): {len(entries)} entries, {len(summarized)} summarized")
    echo(view_tokens_line(entries, b))
    summarized_seqs = {m.seq for m in summarized}
    shown = short_ids([e.uuid for e in entries])
    rows = [
        (
            str(e.position),
            e.role,
            e.subtype or e.type,
            str(e.tokens),
            shown[e.uuid],
            ("✂ " if e.seq in summarized_seqs else "") + preview(e.content),
        )
        for e in entries
    ]
    echo(_plain_table(("#", "role", "type", "tokens", "uuid", "content"), rows, console.width))


def view_tokens_line(entries: Sequence["ViewEntry"], b: hist.Boundary) -> str:
    """The view's tokens (the sum of its rows, as `--json` gives them) beside what the agent counted.

    The agent's figure (`pre_tokens`) counts its system prompt and tools too, with the model's own
    tokenizer: it is said as such, never as the size of the entries listed.
    """
    from sessionstore.storage.read import history as hist

    return f"tokens: {hist.view_tokens(entries):,} in these entries; the agent counted {b.pre_tokens:,} with its prompt"


def export_cmd(
    session: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="jsonl, markdown, html, claude-code (or codex, with --install).")
    ] = "jsonl",
    output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write here instead of stdout ('-').")] = None,
    redact_secrets: Annotated[
        bool,
        typer.Option(
            "--redact", help="Replace each credential found (keys, tokens, URL passwords) by [REDACTED:<kind>]."
        ),
    ] = False,
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="With -f claude-code or codex: write the active view "
            "where that tool resumes from (a new session id) and print the resume command.",
        ),
    ] = False,
    as_recorded: Annotated[
        bool,
        typer.Option(
            "--as-recorded",
            help="With -f claude-code: write every recorded message even when the file would import back as "
            "another view (snips, some partial compactions), for Claude Code to resume as recorded.",
        ),
    ] = False,
    claude_dir: Annotated[
        Optional[str],
        typer.Option(
            "--claude-dir",
            help="With --install: Claude Code's config folder (default $CLAUDE_CONFIG_DIR or ~/.claude).",
        ),
    ] = None,
    codex_home: Annotated[
        Optional[str],
        typer.Option("--codex-home", help="With --install: Codex's home (default $CODEX_HOME or ~/.codex)."),
    ] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Export every message ever recorded, whatever was compacted; or install the view back into its tool.

    With --redact, each credential `sessionstore secrets` would list is replaced by a
    typed placeholder wherever it occurs (--install included) and stderr says how many;
    a markdown or HTML export without it says so when it holds any. jsonl, HTML and
    claude-code exports are data, not text for a terminal: with stdout a terminal they
    are refused (give -o FILE or a pipe); markdown is shown with controls made visible.

    Examples:

      sessionstore export SESSION -f markdown -o session.md

      sessionstore export SESSION -f html --redact -o share.html

      sessionstore export SESSION -f jsonl > session.jsonl

      sessionstore export SESSION -f claude-code --install

      sessionstore export SESSION -f codex --install --codex-home ~/.codex
    """
    if install or claude_dir is not None or codex_home is not None or format == "codex":
        if not install:
            raise UsageError("--claude-dir, --codex-home and -f codex go with --install")
        if output is not None:
            raise UsageError("--install writes where the tool looks; it takes no --output")
        with open_store(db) as store:
            install_view(store, session, format, claude_dir, codex_home, json_out, redact=redact_secrets)
        return
    from sessionstore.interchange.export import export_claude_code, export_html, export_jsonl, export_markdown
    from sessionstore.secrets import Redactor
    from sessionstore.storage.core.output import STDIO, open_output

    text_formats = {"jsonl": export_jsonl, "markdown": export_markdown, "html": export_html}
    if format not in (*text_formats, "claude-code"):
        raise UsageError(f"unknown format {format!r}: use jsonl, markdown, html or claude-code")
    if as_recorded and format != "claude-code":
        raise UsageError("--as-recorded goes with -f claude-code")
    to_terminal = output in (None, STDIO) and sys.stdout.isatty()
    if to_terminal and format != "markdown":
        raise UsageError(f"{format} export not written to a terminal: use -o FILE or a pipe")
    binary = format == "claude-code"
    with open_store(db, read_only=True) as store:
        s = store.get(session)
        redactor = (
            Redactor.for_session(s, redact=True)
            if redact_secrets
            else Redactor(redact=False)
            if format in SHARED_FORMATS
            else None
        )
        with open_output(output, binary=binary) as out:
            if binary:
                count = export_claude_code(s, out, redactor, as_recorded=as_recorded)
            else:
                count = text_formats[format](s, _Visible(out) if to_terminal else out, redactor)
    if output not in (None, STDIO):
        echo(f"wrote {count} messages to {output}", err=True)
    if redactor is not None:
        say_secrets(redactor, s.id)


#: Formats people read and share: exporting one without --redact says when it holds credentials.
SHARED_FORMATS = ("markdown", "html")


class _Visible:
    """A text sink onto a terminal: every control but newline and tab shown as text (the shared sanitizer)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def write(self, text: str) -> int:
        """Write `text` with its controls made visible."""
        return int(self.out.write(visible(text)))
