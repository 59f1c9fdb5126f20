"""`sessionstore watch [PATH...] [--once] [--json]`: capture Claude Code and Codex transcripts as they are written."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from .common import DbOption, UsageError, json_visible, one_line, open_store

if TYPE_CHECKING:
    from sessionstore.interchange.watch import Watcher, WatchEvent

ProgressOption = Annotated[
    Optional[bool],
    typer.Option("--progress/--no-progress", help="Progress bar for the catch-up (default: on a terminal)."),
]


def register(app: typer.Typer) -> None:
    """Add `watch` to the app."""
    app.command("watch")(watch_cmd)


def watch_cmd(
    paths: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="Files or directories to follow. Default: $CLAUDE_CONFIG_DIR/projects (~/.claude/projects) "
            "and $CODEX_HOME/sessions (~/.codex/sessions), those that exist."
        ),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Import everything new, then exit (for cron).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object per line per file event.")] = False,
    progress: ProgressOption = None,
    follow_symlinks: Annotated[
        bool,
        typer.Option(
            "--follow-symlinks", help="Also take files and linked folders whose link leads out of the watched folder."
        ),
    ] = False,
    db: DbOption = None,
) -> None:
    """Import every transcript file's new lines as they are written, and keep following them.

    Offsets live in the store, so a restart (after a crash or a reboot) resumes
    without gaps or duplicates and first catches up on files that grew or
    appeared meanwhile. A half-written last line waits for the next write. A
    deleted file stays in the store; a file rewritten in place is reported. A
    file or a linked folder under a watched folder whose link leads out of it is
    skipped (said once) unless --follow-symlinks is given.

    Examples:

      sessionstore watch

      sessionstore watch --once --json ~/.claude/projects/my-project

      sessionstore watch ~/.codex/sessions
    """
    from sessionstore.interchange.watch import Watcher

    roots = _roots(paths)
    show = sys.stderr.isatty() if progress is None else progress
    out = _Reporter(json_out)
    with open_store(db, create=True) as store:
        watcher = Watcher(
            store,
            roots,
            out.event,
            settle_seconds=store.config.watch_settle_seconds,
            debounce_ms=store.config.watch_debounce_ms,
            follow_symlinks=follow_symlinks,
        )
        try:
            _catch_up(watcher, show)
            if once:
                watcher.confirm_all()
                out.summary(len(watcher.files()), watcher.held, store.config.watch_settle_seconds)
                return
            if not json_out:  # a person is told at once; scripts get the event once the watch is live
                out.watching(watcher.roots)
            watcher.run(ready=(lambda: out.watching(watcher.roots)) if json_out else None, caught_up=True)
        except KeyboardInterrupt:
            sys.stderr.write("stopped; every file is in the store up to its last whole line imported\n")


def _roots(paths: list[str] | None) -> list[Path]:
    """The given paths (each must exist), else the default directories that exist."""
    if paths:
        if not all(paths):
            raise UsageError("an empty path names no file: give a file or a folder ('.' for this one)")
        if "-" in paths and not Path("-").exists():
            raise UsageError(
                "watch follows files and folders, not stdin: for a transcript on stdin use "
                "`sessionstore import claude-code -` (or codex, jsonl)"
            )
        roots = [Path(p).expanduser() for p in paths]
        missing = [str(p) for p in roots if not p.exists()]
        if missing:
            raise UsageError(f"no such file or directory: {', '.join(missing)}")
        return roots
    from sessionstore.interchange.watch import default_roots

    roots = [r for r in default_roots() if r.is_dir()]
    if not roots:
        raise UsageError(
            "nothing to watch: neither "
            + " nor ".join(map(str, default_roots()))
            + " exists; pass the directories to follow"
        )
    return roots


def _catch_up(watcher: Watcher, show: bool) -> None:
    """One pass over every file, with a progress bar on a terminal."""
    if not show:
        watcher.sync_all()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    total = sum(_size(p) for p in watcher.files())
    with Progress(
        TextColumn("importing"), BarColumn(), DownloadColumn(), console=Console(stderr=True), transient=True
    ) as bar:
        task = bar.add_task("import", total=total)
        watcher.sync_all(progress=lambda n: bar.advance(task, n))


class _Reporter:
    """Prints file events (a line each, or JSON lines) and counts them for the summary."""

    def __init__(self, json_out: bool) -> None:
        self.json_out = json_out
        self.changed = self.lines = self.messages = self.warnings = 0

    def event(self, event: WatchEvent) -> None:
        """One file event: stdout gets the line, stderr the warnings (text mode)."""
        if event.event in ("imported", "grown"):
            self.changed += 1
            self.lines += event.lines_added
            self.messages += event.messages_added
        self.warnings += len(event.warnings)
        if self.json_out:
            _json_line(event.to_dict())
            return
        session = (event.session_id or "")[:8]
        if event.event in ("imported", "grown"):
            sys.stdout.write(
                one_line(
                    f"{event.event:<8} {session}  +{event.lines_added} lines  "
                    f"+{event.messages_added} messages  {len(event.warnings)} warning(s)  "
                    f"{event.path}"
                )
                + "\n"
            )
        else:
            sys.stdout.write(one_line(f"{event.event:<8} {session}  {event.path}: {event.message}") + "\n")
        sys.stdout.flush()
        for warning in event.warnings:
            sys.stderr.write(f"warning: {one_line(warning)}\n")

    def watching(self, roots: list[Path]) -> None:
        """Said once the watcher follows changes."""
        if self.json_out:
            _json_line({"event": "watching", "roots": [str(r) for r in roots]})
        else:
            sys.stderr.write(one_line(f"watching {', '.join(map(str, roots))} (Ctrl-C to stop)") + "\n")

    def summary(self, files: int, held: dict[str, int], settle: float) -> None:
        """The last line of `--once`: files checked, what came in, and what waits for the next run."""
        lines = sum(held.values())
        if self.json_out:
            _json_line(
                {
                    "event": "summary",
                    "files": files,
                    "changed": self.changed,
                    "lines_added": self.lines,
                    "messages_added": self.messages,
                    "warnings": self.warnings,
                    "held_back_lines": lines,
                    "held_back_files": len(held),
                }
            )
            return
        if held:
            sys.stderr.write(
                f"{lines} line(s) of {len(held)} file(s) written in the last {settle:g} s wait for "
                "their response's usage line; the next run imports them\n"
            )
        sys.stderr.write(
            f"{files} file(s) checked, {self.changed} changed: +{self.lines} lines, "
            f"+{self.messages} messages, {self.warnings} warning(s)\n"
        )


def _json_line(value: dict[str, object]) -> None:
    sys.stdout.write(json_visible(json.dumps(value, ensure_ascii=False)) + "\n")
    sys.stdout.flush()


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
