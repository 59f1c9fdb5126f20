"""`sessionstore import claude-code|codex|jsonl PATH...`: bring existing transcripts in."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from .common import DbOption, JsonOption, UsageError, cell, console, echo, err_console, one_line, open_store, print_json

if TYPE_CHECKING:
    from sessionstore.interchange.importing import ImportResult

app = typer.Typer(
    help="Import transcripts you already have (Claude Code JSONL, Codex rollouts, our jsonl export).",
    no_args_is_help=True,
)

PathsArg = Annotated[
    list[str],
    typer.Argument(
        help="Files, or directories searched for *.jsonl (sub-agents included); '-' reads one file from stdin."
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Take each file whole or not at all: a file with warnings is refused (nothing of it written, "
        "every warning listed, status 'refused' in --json); the other files are imported; exit 2 when any "
        "was refused.",
    ),
]
ProgressOption = Annotated[
    Optional[bool], typer.Option("--progress/--no-progress", help="Progress bar (default: on a terminal).")
]
FollowOption = Annotated[
    bool,
    typer.Option(
        "--follow-symlinks",
        help="Also import the files and linked folders under a given folder whose link leads out of it "
        "(skipped by default, said once).",
    ),
]


def register(root: typer.Typer) -> None:
    """Add `import` to the app."""
    root.add_typer(app, name="import")


def _add_import_command(source: str, help_text: str) -> None:
    """Add `import SOURCE`: every format takes the same paths and options, so one signature serves them all."""

    def command(
        paths: PathsArg,
        db: DbOption = None,
        strict: StrictOption = False,
        json_out: JsonOption = False,
        progress: ProgressOption = None,
        follow_symlinks: FollowOption = False,
    ) -> None:
        _run(source, paths, db, strict, json_out, progress, follow_symlinks)

    command.__doc__ = help_text
    app.command(source)(command)


_add_import_command(
    "claude-code",
    """Import Claude Code transcripts (~/.claude/projects/<project>/*.jsonl).

    Re-importing adds nothing; a file that has grown adds only its new lines.

    Example: sessionstore import claude-code ~/.claude/projects/my-project
    """,
)
_add_import_command(
    "codex",
    """Import Codex CLI rollout files (~/.codex/sessions/**/rollout-*.jsonl).

    Example: sessionstore import codex ~/.codex/sessions
    """,
)
_add_import_command(
    "jsonl",
    """Import sessions written by `sessionstore export --format jsonl` (into another store, say).

    The transcript comes back exactly (exporting it again gives the same
    bytes); the views are rebuilt from its compaction boundaries.

    Example: sessionstore export SESSION -f jsonl -o s.jsonl && sessionstore import jsonl s.jsonl --db sqlite:///other.db
    """,
)


def _run(
    source: str,
    paths: list[str],
    db: str | None,
    strict: bool,
    json_out: bool,
    show: bool | None,
    follow_symlinks: bool = False,
) -> None:
    from sessionstore.storage.core.errors import SessionStoreError
    from sessionstore.storage.core.output import STDIO

    if paths.count(STDIO) > 1:
        raise UsageError("'-' (stdin) can be given only once")
    with tempfile.TemporaryDirectory(prefix="sessionstore-stdin-") as spool:
        stdin_file = _spool_stdin(Path(spool)) if STDIO in paths else None
        named = [str(stdin_file) if p == STDIO else p for p in paths]
        try:
            results = _import(source, named, db, strict, show, follow_symlinks)
        except SessionStoreError as exc:
            if stdin_file is None:
                raise
            raise UsageError(str(exc).replace(str(stdin_file.resolve()), "stdin")) from exc
    if stdin_file is not None:
        _relabel(results, str(stdin_file.resolve()))
    _report(results, json_out)


def _spool_stdin(folder: Path) -> Path:
    """stdin copied to a file (importers read files: formats are sniffed, lines re-read)."""
    target = folder / "stdin.jsonl"
    with open(target, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out)
    return target


def _relabel(results: list[ImportResult], spooled: str) -> None:
    """Name stdin '-' in what is reported, not the temporary file it went through."""
    from sessionstore.storage.core.output import STDIO

    for r in results:
        if r.path == spooled:
            r.path = STDIO
            r.warnings = [w.replace(spooled, STDIO) for w in r.warnings]


def _import(
    source: str, paths: list[str], db: str | None, strict: bool, show: bool | None, follow_symlinks: bool = False
) -> list[ImportResult]:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    from sessionstore.interchange.importing import import_paths, transcript_files

    outside: list[tuple[Path, str]] = []
    files = transcript_files(paths, follow_symlinks=follow_symlinks, outside=outside)
    for path, note in outside:
        sys.stderr.write(f"warning: {one_line(f'{path} {note}')}\n")
    if not files:
        raise UsageError(f"nothing to import: no *.jsonl file in {', '.join(paths)}")
    total = sum(os.path.getsize(f) for f in files)
    show = sys.stderr.isatty() if show is None else show
    with open_store(db, create=True) as store:
        if show:
            with Progress(
                TextColumn("importing"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=err_console,
            ) as bar:
                task = bar.add_task("import", total=total)
                results = import_paths(
                    store, files, source=source, strict=strict, progress=lambda n: bar.advance(task, n)
                )
        else:
            results = import_paths(store, files, source=source, strict=strict)
    return results


def _report(results: list[ImportResult], json_out: bool) -> None:
    """The table (or JSON), warnings on stderr; exit 2 when a file was refused (--strict) or none held a message."""
    warnings = sum(len(r.warnings) for r in results)
    nothing = bool(results) and all(r.status == "skipped" for r in results)
    refused = [r for r in results if r.status == "refused"]
    if json_out:
        print_json({"files": [r.to_dict() for r in results], "warnings": warnings})
    elif nothing and len(results) == 1:
        pass  # the error below says it all in one line
    else:
        _table(results)
        for r in results:
            for w in r.warnings:
                echo(f"warning: {one_line(w)}", err=True)
        if warnings and not nothing and not refused:
            sys.stderr.write(f"{warnings} warning(s); everything else was imported\n")
    if refused:
        raise UsageError(
            f"{len(refused)} of {len(results)} file(s) refused under --strict (nothing of them imported, "
            f"their warnings above); the others were imported"
            if len(results) > 1
            else f"{refused[0].path}: {len(refused[0].warnings)} warning(s) under --strict, nothing imported"
        )
    if nothing:
        raise UsageError(
            f"nothing imported: {results[0].warnings[0]}"
            if len(results) == 1
            else f"nothing imported: none of the {len(results)} files holds a message"
        )


def _table(results: list[ImportResult]) -> None:
    table = Table(title=f"imported {sum(r.status in ('imported', 'grown') for r in results)} of {len(results)} file(s)")
    columns = (("status", 9), ("session", 8), ("lines", 6), ("msgs", 6), ("✂", 3), ("warnings", 8))
    for col, width in columns:
        table.add_column(col, no_wrap=True, width=width, justify="left" if col in ("status", "session") else "right")
    rest = console.width - sum(w for _, w in columns) - 3 * (len(columns) + 1) - 1
    table.add_column("file", no_wrap=True, overflow="ellipsis", width=max(12, rest))
    for r in results:
        table.add_row(
            r.status,
            (r.session_id or "")[:8],
            str(r.lines_added),
            str(r.messages_added),
            str(r.boundaries),
            str(len(r.warnings)),
            cell(os.path.basename(r.path)),
        )
    console.print(table)
