"""Capture: follow Claude Code and Codex transcript files as they grow, importing each new whole line.

Capture is an import that never ends. Every file is imported with
`import_file(live=True)`: only whole lines, one transaction per file and
event, the offsets (bytes and lines done, a digest of the prefix) committed
in the same transaction as the lines in the store's `imports` table. So a
watcher killed at any instant resumes where the store says, without gaps or
duplicates, and a restart first catches up on every file that grew or
appeared while it was down. File-system events come from `watchfiles`
(inotify, FSEvents, ...): an idle watcher sleeps in the kernel.

A file deleted by its tool's cleanup stays in the store; a file truncated or
rewritten in place is reported once and its imported lines are kept. Warnings
that a tool call or result is unpaired wait until the file settles: mid-write,
a call usually comes seconds before its result.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from sessionstore.storage.core.errors import SessionStoreError
from .confine import escape_note, inside_root
from .copies import file_session
from .tree import transcripts_under
from .importing import DuplicateImport, ImportConflict, LiveState, import_file

if TYPE_CHECKING:
    from sessionstore.storage.store import SessionStore

#: A Codex response may wait this long for its usage (written just after it) before it is imported without.
SETTLE_SECONDS = 30.0
#: Longest a burst of writes is gathered before its changes are imported.
DEBOUNCE_MS = 200
#: Quiet time that ends a burst early.
STEP_MS = 20
#: How often an idle watcher wakes to import a settled tail and to honour a stop request.
WAKE_MS = 5_000
#: A warning about a tool call and its result that were not paired yet: while a file is written,
#: the result of a call just written follows seconds later, so such a warning waits for the file
#: to settle and is reported only if the message never entered a view ("path:line: uuid left out ...").
_PROVISIONAL = re.compile(r":\d+: (\S+) left out of the active view: tool_(?:use without a tool_result|result without)")


def default_roots(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Claude Code's projects directory and Codex's sessions directory ($CLAUDE_CONFIG_DIR, $CODEX_HOME)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())
    claude = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "projects"
    codex = Path(env.get("CODEX_HOME") or home / ".codex") / "sessions"
    return [claude, codex]


@dataclass
class WatchEvent:
    """What happened to one file: imported, grown, copy, deleted, conflict, duplicate, error, waiting."""

    event: str
    path: str
    session_id: str | None = None
    source: str | None = None
    lines_added: int = 0
    messages_added: int = 0
    warnings: list[str] = field(default_factory=list)
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """One `watch --json` line."""
        return {
            "event": self.event,
            "path": self.path,
            "session": self.session_id,
            "source": self.source,
            "lines_added": self.lines_added,
            "messages_added": self.messages_added,
            "warnings": self.warnings,
            "message": self.message,
            "time": time.time(),
        }


Report = Callable[[WatchEvent], None]


def transcript_file(path: Path) -> bool:
    """True for the files capture follows: `*.jsonl`."""
    return path.suffix == ".jsonl"


class Watcher:
    """Imports the transcript files under some roots, once or as they change."""

    def __init__(
        self,
        store: "SessionStore",
        roots: Iterable[str | os.PathLike[str]],
        report: Report,
        *,
        settle_seconds: float = SETTLE_SECONDS,
        debounce_ms: int = DEBOUNCE_MS,
        follow_symlinks: bool = False,
    ):
        self.store = store
        self.roots = [Path(r).expanduser().resolve() for r in roots]
        #: Take files whose resolved path leaves their watched folder (a symlink to elsewhere).
        self.follow_symlinks = follow_symlinks
        #: Files already reported as leading out of their folder (said once each).
        self.outside: set[str] = set()
        self.report = report
        self.settle_seconds = settle_seconds
        self.debounce_ms = debounce_ms
        #: Files last imported while still being written, a tail perhaps held back (path -> mtime then).
        self.unsettled: dict[str, float] = {}
        #: Files reported as changed in place (reported once, until they change again).
        self.conflicts: dict[str, tuple[int, int]] = {}
        #: Warnings already reported per file (a growth import finds the older ones again).
        self.warned: dict[str, set[str]] = {}
        #: Per file, warnings about a tool call not paired yet, held until the file settles (uuid -> text).
        self.provisional: dict[str, dict[str, str]] = {}
        #: Per file, the importer that read it so far (the next change reads only the new lines).
        self.states: dict[str, LiveState] = {}
        #: Per file, the lines its last import left for the next one (a response waiting for its usage).
        self.held: dict[str, int] = {}

    # ------------------------------------------------------------ one pass

    def files(self) -> list[Path]:
        """Every transcript file under the roots (a root may be a file), main files before sub-agents."""
        found: list[Path] = []
        for root in self.roots:
            if root.is_dir():
                folders: list[Path] = []
                under = transcripts_under(root, leave_root=self.follow_symlinks, skipped=folders)
                found.extend(p for p in under if p.is_file() and self._confined(p))
                for folder in folders:
                    self._say_outside(folder, root)
            elif root.is_file():
                found.append(root)
        unique = dict.fromkeys(p.resolve() for p in found)
        return sorted(unique, key=lambda p: ("subagents" in p.parts, str(p)))

    def _confined(self, path: Path) -> bool:
        """True unless `path`, under a watched folder, resolves outside it (said once, then skipped)."""
        if self.follow_symlinks:
            return True
        root = next((r for r in self.roots if r.is_dir() and r in path.parents), None)
        if root is None or inside_root(path, root):
            return True
        self._say_outside(path, root)
        return False

    def _say_outside(self, path: Path, root: Path) -> None:
        """Report once that `path` (a file or a linked folder) leads out of `root` and is skipped."""
        if str(path) not in self.outside:
            self.outside.add(str(path))
            self.report(WatchEvent("skipped", str(path), message=escape_note(path, root)))

    def sync_all(self, progress: Callable[[int], None] | None = None) -> list[WatchEvent]:
        """Import what is new in every file (the catch-up after a start or a restart)."""
        events = []
        for path in self.files():
            event = self.sync(path)
            if event is not None:
                events.append(event)
            if progress is not None:
                progress(_size(path))
        return events

    def sync(self, path: str | os.PathLike[str], *, settle: bool = False) -> WatchEvent | None:
        """Import the new whole lines of one file; the event is reported (None when nothing changed)."""
        name = str(Path(path).resolve())
        if not os.path.isfile(name):
            return self._gone(name)
        hold = not settle and self._recent(name)
        event = self._import(name, hold)
        if hold:
            self.unsettled[name] = _mtime(name)
        else:
            self.unsettled.pop(name, None)
        if event is not None:
            self.report(event)
        if not hold:
            self.confirm_provisional(name)
        return event

    def _import(self, name: str, hold: bool) -> WatchEvent | None:
        try:
            result = import_file(
                self.store, name, live=True, hold_tail=hold, state=self.states.setdefault(name, LiveState())
            )
        except DuplicateImport as dup:
            return self._once(
                name, WatchEvent("duplicate", name, dup.session_id, message="a copy of a session already in the store")
            )
        except ImportConflict as exc:
            said = str(exc).removeprefix(f"{name}: ").removeprefix(f"{name} ")
            return self._once(name, WatchEvent("conflict", name, exc.session_id, message=said))
        except (SessionStoreError, OSError) as exc:
            return WatchEvent("error", name, message=str(exc))
        if result.status == "waiting" and result.warnings and not hold:
            why = result.warnings[0].removeprefix(f"{name}: ")
            return self._once(
                name, WatchEvent("skipped", name, message=f"{why}; skipped until transcript lines follow")
            )
        self.conflicts.pop(name, None)
        if result.held_back:
            self.held[name] = result.held_back
        else:
            self.held.pop(name, None)
        warnings = result.warnings
        if hold:
            warnings = self._hold_provisional(name, warnings)
        if result.status in ("unchanged", "waiting"):
            return None
        if result.status == "copy":
            return WatchEvent(
                "copy",
                name,
                result.session_id,
                result.source,
                message="a copy of a session's source already in the store; its further lines go there",
            )
        return WatchEvent(
            result.status,
            name,
            result.session_id,
            result.source,
            result.lines_added,
            result.messages_added,
            self._new_warnings(name, warnings),
        )

    def _hold_provisional(self, name: str, warnings: list[str]) -> list[str]:
        """Keep back the warnings about calls and results a file still being written may yet pair."""
        kept = []
        for warning in warnings:
            match = _PROVISIONAL.search(warning)
            if match:
                self.provisional.setdefault(name, {})[match.group(1)] = warning
            else:
                kept.append(warning)
        return kept

    def confirm_all(self) -> None:
        """At the end of a `--once` pass: report every held warning that still holds."""
        for name in list(self.provisional):
            self.confirm_provisional(name)

    def confirm_provisional(self, name: str) -> WatchEvent | None:
        """Once a file settles: report the held warnings whose message never entered any view."""
        held = self.provisional.pop(name, None)
        if not held:
            return None
        row = file_session(self.store.db, name)
        if row is None:
            return None
        uuids = list(held)
        marks = ", ".join(f":u{i}" for i in range(len(uuids)))
        seen = {
            r[0]
            for r in self.store.db.all(
                f"SELECT m.uuid FROM messages m WHERE m.session_id = :s AND m.uuid IN ({marks}) AND EXISTS "
                "(SELECT 1 FROM view_entries v WHERE v.session_id = m.session_id AND v.seq = m.seq)",
                {"s": row[0], **{f"u{i}": u for i, u in enumerate(uuids)}},
            )
        }
        still = [text for uuid, text in held.items() if uuid not in seen]
        fresh = self._new_warnings(name, still)
        if not fresh:
            return None
        event = WatchEvent(
            "settled",
            name,
            row[0],
            warnings=fresh,
            message=f"{len(fresh)} warning(s) about tool calls and results left unpaired",
        )
        self.report(event)
        return event

    def _new_warnings(self, name: str, warnings: list[str]) -> list[str]:
        """The warnings not reported for this file before."""
        seen = self.warned.setdefault(name, set())
        fresh = [w for w in dict.fromkeys(warnings) if w not in seen]
        seen.update(fresh)
        return fresh

    def _once(self, name: str, event: WatchEvent) -> WatchEvent | None:
        """Report a file that cannot be followed once per change of its size or mtime."""
        stamp = (_size(Path(name)), int(_mtime(name) * 1e9))
        if self.conflicts.get(name) == stamp:
            return None
        self.conflicts[name] = stamp
        return event

    def _gone(self, name: str) -> WatchEvent | None:
        """A deleted file: its session stays; say so when the store has it."""
        self.unsettled.pop(name, None)
        self.conflicts.pop(name, None)
        self.states.pop(name, None)
        self.held.pop(name, None)
        self.provisional.pop(name, None)
        row = file_session(self.store.db, name)
        if row is None:
            return None
        event = WatchEvent("deleted", name, row[0], row[1], message="the file is gone; its session stays in the store")
        self.report(event)
        return event

    def _recent(self, name: str) -> bool:
        """True while a file was written to less than `settle_seconds` ago."""
        return time.time() - _mtime(name) < self.settle_seconds

    def settle(self) -> None:
        """Import the tails left unsettled by live imports once their files have been quiet long enough."""
        for name in list(self.unsettled):
            if not self._recent(name):
                self.sync(name, settle=True)

    # ------------------------------------------------------------ following

    def run(
        self, stop: threading.Event | None = None, *, ready: Callable[[], None] | None = None, caught_up: bool = False
    ) -> None:
        """Catch up on every file (unless the caller just did), then follow changes until `stop` is set."""
        import watchfiles

        missing = [str(r) for r in self.roots if not r.exists()]
        if missing:
            raise SessionStoreError(f"cannot watch {', '.join(missing)}: no such file or directory")
        if not caught_up:
            self.sync_all()
        first = True
        for changes in watchfiles.watch(
            *self.roots,
            watch_filter=_wanted,
            debounce=self.debounce_ms,
            step=STEP_MS,
            stop_event=stop,
            rust_timeout=WAKE_MS,
            yield_on_timeout=True,
            raise_interrupt=True,
        ):
            if first:
                # Anything written between the first pass and the watch starting is taken now.
                self.sync_all()
                first = False
                if ready is not None:
                    ready()
            self._changed(changes)
            self.settle()

    def _changed(self, changes: set[tuple[Any, str]]) -> None:
        """Import each changed file once per batch (a new directory: every file in it)."""
        paths: set[Path] = set()
        for _change, raw in changes:
            path = Path(raw)
            if path.is_dir():
                paths.update(p for p in transcripts_under(path) if p.is_file() and self._confined(p))
            elif transcript_file(path) and self._confined(path):
                paths.add(path)
        for path in sorted(paths, key=lambda p: ("subagents" in p.parts, str(p))):
            self.sync(path)


def _wanted(_change: Any, path: str) -> bool:
    """watchfiles filter: transcript files and directories (a new project folder)."""
    return path.endswith(".jsonl") or os.path.isdir(path)


def _mtime(name: str) -> float:
    try:
        return os.stat(name).st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
