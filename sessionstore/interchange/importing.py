"""Writing an imported transcript into the store: one transaction per file.

Lines stream from the importer straight into the database (constant memory
apart from a uuid -> seq map). Every raw line is kept in `source_lines` so a
Claude Code file can be exported byte-for-byte. The view history is then laid
out from the plan: one version per boundary (the exact view before it), then
the active chain the source tool would resume with. Re-importing a file adds
nothing; importing a file that has grown adds only its new lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid as uuid_mod
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from sessionstore.compaction.microcompact import CLEARED_TEXT
from sessionstore.interchange.confine import escape_note, inside_root
from sessionstore.storage.core.errors import InvalidMessage, SessionStoreError
from sessionstore.storage.codecs.fastjson import loads_stored
from sessionstore.storage.core.faults import fault_in
from sessionstore.storage.core.gcpause import gc_paused
from sessionstore.storage.codecs.linepack import (
    BLOCK,
    BLOCK_COLUMNS,
    BLOCK_LINES,
    COLUMNS,
    BlockLine,
    LinePacker,
    block_lines,
    dictionary_row,
    session_packer,
    train,
)
from sessionstore.interchange.copies import (
    Match,
    Stream,
    compare,
    file_offsets,
    file_session,
    prefix_sha,
    record_file,
    stream_of,
)
from sessionstore.interchange.importers import open_import, sniff_source
from sessionstore.interchange.tree import transcripts_under
from sessionstore.interchange.importers.plan import ImportedBoundary, ImportedLine, ImportPlan, whole_lines_end
from sessionstore.storage.write.rewrite import KEY_GAP, tail_state_for
from sessionstore.storage.records.state import load_state
from sessionstore.storage.records.rows import MESSAGE_INSERT_COLUMNS, dumps, message_row
from sessionstore.storage.codecs.tokens import estimate_content
from sessionstore.storage.write.replacements import save_cleared
from sessionstore.storage.records.validate import (
    check_depth,
    check_timestamp,
    check_usage,
    normalize,
    storable_text,
    tool_result_ids,
)

if TYPE_CHECKING:
    from sessionstore.interchange.importers import SourceImport
    from sessionstore.storage.engine.db import Database
    from sessionstore.storage.store import SessionStore

BATCH = 1000
Progress = Callable[[int], None]

#: Columns of the raw-line rows, in the order `_take` builds them.
_SOURCE_LINE_COLUMNS = ("session_id", "line_no", "kind", "entry_type", "message_seq", "raw")
#: Where a message row (MESSAGE_INSERT_COLUMNS) holds the columns a source line is stored without (linepack.COLUMNS).
_SPLICED = [MESSAGE_INSERT_COLUMNS.index(column) for column in COLUMNS]
#: Columns of the view rows `_layout` writes (content_json is NULL unless a result shows cleared).
_VIEW_ENTRY_COLUMNS = ("session_id", "valid_from", "key", "seq", "valid_to", "tokens", "content_json")


class ImportConflict(SessionStoreError):
    """The file cannot be imported consistently (changed in place, or the session moved on).

    `session_id` names the session the file was imported into, when there is one.
    """

    def __init__(self, message: str, session_id: str | None = None):
        super().__init__(message)
        self.session_id = session_id


class ImportWarnings(SessionStoreError):
    """Under --strict, a file with warnings is not imported at all; `warnings` lists every one."""

    def __init__(self, message: str, warnings: list[str] | None = None):
        super().__init__(message)
        self.warnings = list(warnings or [])


class WrongFormat(SessionStoreError):
    """The file is a transcript of another kind than the importer asked for."""


class EmptyTranscript(SessionStoreError):
    """The file yielded no message: no session is created for it."""


#: The command that imports each format, for the messages that point to it.
IMPORT_COMMANDS = {
    "claude-code": "sessionstore import claude-code",
    "codex": "sessionstore import codex",
    "jsonl": "sessionstore import jsonl",
}


@dataclass
class ImportResult:
    """What importing one file did."""

    path: str
    source: str
    session_id: str | None
    status: (
        str  # imported | grown | unchanged | duplicate | skipped (no message in it) | waiting (live: no whole line yet)
        # | refused (strict: it has warnings, nothing of it was written)
    )
    lines_added: int = 0
    messages_added: int = 0
    boundaries: int = 0
    warnings: list[str] = field(default_factory=list)
    #: Lines a live import left for the next one (a Codex response waiting for its usage line).
    held_back: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "source": self.source,
            "session": self.session_id,
            "status": self.status,
            "lines_added": self.lines_added,
            "messages_added": self.messages_added,
            "held_back": self.held_back,
            "boundaries": self.boundaries,
            "warnings": self.warnings,
        }


def transcript_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    follow_symlinks: bool = False,
    outside: list[tuple[Path, str]] | None = None,
) -> list[Path]:
    """Files to import: each file given, and every *.jsonl under each directory (main files first).

    A file or a linked folder under a directory that resolves outside it (a planted symlink)
    is left out unless `follow_symlinks`; what was left out is said in `outside` (the file or
    folder and a note) when given.
    """
    found: list[Path] = []
    for p in paths:
        if not os.fspath(p):
            raise SessionStoreError("an empty path names no file: give a file or a folder ('.' for this one)")
        path = Path(p)
        if path.is_dir():
            folders: list[Path] = []
            for file in transcripts_under(path, leave_root=follow_symlinks, skipped=folders):
                if follow_symlinks or inside_root(file, path):
                    found.append(file)
                elif outside is not None:
                    outside.append((file, escape_note(file, path)))
            if outside is not None:
                outside.extend((folder, escape_note(folder, path)) for folder in folders)
        elif path.exists():
            found.append(path)
        else:
            raise SessionStoreError(f"no such file or directory: {path}")
    unique = list(dict.fromkeys(f.resolve() for f in found))
    return sorted(unique, key=lambda f: ("subagents" in f.parts, str(f)))


@dataclass
class LiveState:
    """What a caller following one file keeps between its imports: the importer that read it so far.

    The next live import then reads only the new lines (the graph facts of
    the earlier ones are in the importer) instead of the whole file again.
    """

    importer: "SourceImport | None" = None

    def clear(self) -> None:
        self.importer = None


def import_file(
    store: "SessionStore",
    path: str | os.PathLike[str],
    *,
    source: str | None = None,
    strict: bool = False,
    progress: Progress | None = None,
    live: bool = False,
    hold_tail: bool = False,
    state: LiveState | None = None,
) -> ImportResult:
    """Import one transcript file in one transaction (nothing is written on failure).

    `live` is for a file still being written (`watch`): only whole lines are
    read (a half-written last line waits for the next call, unwarned); a file
    with no whole line yet gives status "waiting" and creates nothing. With
    `hold_tail` too, an importer may leave a tail that is not settled yet (a
    Codex response whose usage is written just after it) to the next call.
    `state` (live imports only) keeps the importer between calls. Two
    processes importing the same file take turns: the second one imports
    what the first left, or finds it unchanged.
    """
    resolved = str(Path(path).resolve())
    if source is not None:
        check_format(resolved, source)
    for _ in range(STALE_RETRIES):
        try:
            return _import_once(store, resolved, source, strict, progress, live, hold_tail, state)
        except EmptyTranscript as exc:
            if not live:
                raise
            # Whole lines but no message: say why, so that a watcher can report a file that is no transcript.
            return ImportResult(resolved, source or "", None, "waiting", warnings=[str(exc)])
        except _Stale:
            if state is not None:
                state.clear()
    raise ImportConflict(f"{path}: another process kept importing it at the same time; try again")


#: How often an import starts over when another process imported the same file meanwhile.
STALE_RETRIES = 5


class _Stale(SessionStoreError):
    """Another process imported the file between reading its offsets and the write transaction."""


def _import_once(
    store: "SessionStore",
    resolved: str,
    source: str | None,
    strict: bool,
    progress: Progress | None,
    live: bool,
    hold_tail: bool,
    state: LiveState | None,
) -> ImportResult:
    """One attempt of `import_file`: read the offsets, then write in one transaction if they still hold.

    A file seen before continues from where its session's source stands; a
    file never seen whose source session is already stored is compared with it
    (see `copies`): a copy behind or level adds nothing, a longer copy extends
    that session, a different file becomes a session of its own.
    """
    limit = whole_lines_end(resolved) if live else None
    size = limit if limit is not None else os.path.getsize(resolved)
    if live and size == 0:
        # No whole line to tell the format by: a file imported before keeps its source (and is
        # then reported as truncated below); any other file waits for its first line.
        source = source or _imported_source(store.db, resolved)
        if source is None:
            return ImportResult(resolved, "", None, "waiting")
    importer_source = source or open_import(resolved).source
    known = file_offsets(store.db, importer_source, resolved)
    if known is None and live and size == 0:
        return ImportResult(resolved, importer_source, None, "waiting")
    write = _Write(store, resolved, importer_source, strict, progress, live, hold_tail, state, limit)
    if known is None:
        try:
            return write.run(None)
        except DuplicateImport as dup:
            return _same_source(write, dup.session_id, size)
    if size == int(known[1]) and prefix_sha(resolved, int(known[1])) == known[3]:
        return ImportResult(resolved, importer_source, known[0], "unchanged")
    if size < int(known[1]):
        raise _truncated(resolved, known, size)
    if prefix_sha(resolved, int(known[1])) != known[3]:
        raise ImportConflict(
            f"{resolved} changed in place since it was imported into session {known[0]}; "
            "only growth (appended lines) can be imported again; the imported lines are kept",
            known[0],
        )
    stream = stream_of(store.db, str(known[0]))
    if stream is not None and int(known[1]) < stream.bytes_done:
        return _behind(write, known, stream, size)
    return write.run(known)


def _behind(write: "_Write", known: tuple[Any, ...], stream: Stream, size: int) -> ImportResult:
    """A file whose session's source went further through another copy: compare its new lines, then go on."""
    match = compare(write.store.db, stream, write.path, (int(known[1]), int(known[2])), min(size, stream.bytes_done))
    if match.diverges:
        raise ImportConflict(
            f"{write.path} differs after line {match.lines:,} from session {stream.session_id}'s source, which "
            f"{stream.path} has fed since; the imported lines are kept",
            stream.session_id,
        )
    if match.bytes < stream.bytes_done or size == stream.bytes_done:
        return write.note_copy(stream, match, "unchanged")
    return write.run(stream.offsets)


def _same_source(write: "_Write", session_id: str, size: int) -> ImportResult:
    """A new file whose source session is already stored: a copy (behind, level or longer) or another conversation."""
    stream = stream_of(write.store.db, session_id)
    if stream is None:
        raise ImportConflict(f"{write.path}: session {session_id} has its source but no stream row", session_id)
    match = compare(write.store.db, stream, write.path, (0, 0), min(size, stream.bytes_done))
    if match.diverges:
        return write.run(
            None,
            own_key=_own_key(stream.source_key, write.path),
            note=f"{write.path}: shares its first {match.lines:,} line(s) with session {session_id} "
            f"({stream.path}), then differs: imported as a session of its own",
        )
    if match.bytes < stream.bytes_done or size == stream.bytes_done:
        return write.note_copy(stream, match, "copy")
    return write.run(stream.offsets)


def _own_key(source_key: str, path: str) -> str:
    """The source key of a file that shares its source session's id but not its content."""
    return f"{source_key}@{hashlib.sha256(path.encode()).hexdigest()[:12]}"


@dataclass
class _Write:
    """The write transaction of one import attempt, with what every retry of it shares."""

    store: "SessionStore"
    path: str
    source: str
    strict: bool
    progress: Progress | None
    live: bool
    hold_tail: bool
    state: LiveState | None
    limit: int | None

    def run(
        self, existing: tuple[Any, ...] | None, *, own_key: str | None = None, note: str | None = None
    ) -> ImportResult:
        """Import the file's lines past `existing` (a stream's offsets; None: into a new session)."""
        cached = _resumable(self.state, existing, self.source) if self.live else None
        attempts: list["SourceImport"] = []

        def body(db: "Database") -> ImportResult:
            _lock_file(db, self.source, self.path)
            if existing is not None:
                _lock_file(db, self.source, str(existing[0]))
                current = stream_of(db, str(existing[0]))
                if current is None or current.offsets != tuple(existing):
                    raise _Stale(self.path)
            elif file_offsets(db, self.source, self.path) is not None:
                raise _Stale(self.path)
            # A retried transaction starts over with a fresh importer (the cached one has moved on).
            importer = cached if cached is not None and not attempts else open_import(self.path, self.source)
            importer.limit, importer.hold_tail = self.limit, self.live and self.hold_tail
            attempts.append(importer)
            writer = _Writer(db, self.path, self.source, existing, self.strict, self.progress, importer)
            writer.own_key = own_key
            writer.host = self.store.config.host_name()
            if note:
                writer.warnings.append(note)
            return writer.run()

        # Nothing an import builds is cyclic; collections would only walk its ever-growing graph facts.
        try:
            with gc_paused():
                result = self.store.db.run_write(body, point="import")
        except BaseException:
            if self.state is not None:
                self.state.clear()
            raise
        if self.state is not None:
            self.state.importer = attempts[-1] if self.live and attempts[-1].resumable else None
        return result

    def note_copy(self, stream: Stream, match: Match, status: str) -> ImportResult:
        """Record how much of this copy the stored source already holds; nothing else is written."""

        def body(db: "Database") -> None:
            record_file(db, self.source, self.path, stream.session_id, match.bytes, match.lines)

        self.store.db.run_write(body, point="import")
        if self.state is not None:
            self.state.clear()
        return ImportResult(self.path, self.source, stream.session_id, status)


def _truncated(path: str, existing: Any, size: int) -> ImportConflict:
    """The conflict of a file that is now shorter than what was imported from it."""
    return ImportConflict(
        f"{path} was truncated to {size:,} bytes of whole lines after {int(existing[1]):,} bytes "
        f"({int(existing[2]):,} lines) were imported into session {existing[0]}; "
        "the imported lines are kept",
        existing[0],
    )


def _imported_source(db: "Database", path: str) -> str | None:
    """The source a file was imported from before (the one with the most imported), else None."""
    found = file_session(db, path)
    return None if found is None else found[1]


#: Tries at taking a file's lock row: it is inserted, then locked; only a row deleted in between takes another.
_LOCK_TRIES = 3


def _lock_file(db: "Database", source: str, path: str) -> None:
    """Serialize one person's importers of one file, on every machine (PostgreSQL; SQLite's write transactions are
    serialized already): a row of theirs in import_locks, named by the file's name (which a synced copy keeps),
    locked FOR UPDATE. Row-level security keeps it theirs: no other role can take it or make them wait."""
    if db.is_sqlite:
        return
    key = {"source": source, "name": Path(path).name}
    for _ in range(_LOCK_TRIES):
        db.execute(
            "INSERT INTO import_locks (source, name) VALUES (:source, :name) ON CONFLICT DO NOTHING", key
        ).close()
        locked = db.one(
            "SELECT 1 FROM import_locks WHERE owner = current_user AND source = :source AND name = :name FOR UPDATE",
            key,
        )
        if locked is not None:
            return
    raise SessionStoreError(f"could not lock the imports of {key['name']} ({source}): its lock row keeps vanishing")


def _resumable(state: LiveState | None, existing: Any, source: str) -> "SourceImport | None":
    """The kept importer when it stopped exactly where the store's offsets say the file is imported to."""
    importer = state.importer if state is not None else None
    if importer is None or existing is None or importer.source != source:
        return None
    if importer.position != (int(existing[1]), int(existing[2])):
        return None
    return importer


class _Writer:
    """One import transaction: stream lines, then lay out the view history."""

    def __init__(
        self,
        db: "Database",
        path: str,
        source: str,
        existing: Any,
        strict: bool,
        progress: Progress | None,
        importer: "SourceImport",
    ):
        self.db, self.path, self.source, self.strict, self.progress = db, path, source, strict, progress
        self.importer = importer
        self.existing = existing
        self.session_id = existing[0] if existing else str(uuid_mod.uuid4())
        self.lines_done = int(existing[2]) if existing else 0
        self.seq_of: dict[str, int] = {}
        self.tokens_of: dict[int, int] = {}
        self.result_seq: dict[str, int] = {}
        self.last_seq = 0
        self.messages: list[tuple[Any, ...]] = []
        self.source_rows: list[tuple[Any, ...]] = []
        self.warnings: list[str] = []
        self.result = ImportResult(path, source, self.session_id, "grown" if existing else "imported")
        self.complete_lines = self.lines_done
        #: Only a Claude Code file is ever exported byte-for-byte; other sources keep the raw
        #: lines of side and bad entries (nothing is lost) but not of messages (stored as messages).
        self.keep_message_lines = source == "claude-code"
        self.complete_bytes = int(existing[1]) if existing else 0
        #: Earliest and latest source timestamps of the messages this import adds (epoch seconds).
        self.first_time: float | None = None
        self.last_time: float | None = None
        #: The source key of a file that shares a stored session's source id but not its content.
        self.own_key: str | None = None
        #: The machine a new session is recorded as captured on.
        self.host: str | None = None
        #: Packs raw lines for storage; None until the first flush decides the session's dictionary.
        self.packer: LinePacker | None = None
        #: Lines not yet stored in a block: the tail of a block being filled (the stored last block of a grown
        #: session, reopened, comes first), and the COLUMNS of the messages they carry, by seq.
        self.pending: list[BlockLine] = []
        self.pending_columns: dict[int, Any] = {}

    def run(self) -> ImportResult:
        if self.existing:
            self._load_existing()
        else:
            self._create_session()
        fault_in(self.db, "after_session_row")
        importer = self.importer
        for line in importer.lines():
            self._take(line)
        self._flush(final=True)
        if not self.existing and not self.result.messages_added:
            raise EmptyTranscript(
                f"{self.path}: no message in it (binary, empty or not a {self.source} transcript); no session created"
            )
        fault_in(self.db, "after_lines")
        plan = importer.plan()
        self.warnings.extend(w for w in plan.warnings if w not in self.warnings and not self._said_before(w))
        if self.strict and self.warnings:
            raise ImportWarnings(
                f"{self.path}: {len(self.warnings)} warning(s) under --strict, nothing imported; "
                f"first: {self.warnings[0]}",
                self.warnings,
            )
        if self.existing and self.complete_lines == int(self.existing[2]):
            self._unchanged()
        duplicate = self._duplicate_of(plan)
        if duplicate:
            raise DuplicateImport(duplicate)
        self._layout(plan)
        fault_in(self.db, "after_layout")
        self._finish(plan)
        fault_in(self.db, "after_finish")
        self.result.warnings = self.warnings
        self.result.held_back = int(getattr(importer, "held_back", 0) or 0)
        return self.result

    def _said_before(self, warning: str) -> bool:
        """True for a warning about a line an earlier import of this file took in (it was reported then)."""
        prefix = self.path + ":"
        if not self.existing or not warning.startswith(prefix):
            return False
        line = warning[len(prefix) :].split(":", 1)[0]
        return line.isdigit() and int(line) <= self.lines_done

    def _unchanged(self) -> None:
        """No new complete line: an incomplete last line read again is not growth."""
        self.result.status = "unchanged"
        self.result.lines_added = 0

    def _create_session(self) -> None:
        now = time.time()
        self.db.execute(
            "INSERT INTO sessions (id, title, context_window, created_at, updated_at, metadata_json, host) "
            "VALUES (:id, :title, :cw, :now, :now, :meta, :host)",
            {
                "id": self.session_id,
                "title": Path(self.path).stem,
                "cw": 200_000,
                "now": now,
                "meta": dumps({"imported_from": self.source}),
                "host": self.host,
            },
        ).close()

    def _load_existing(self) -> None:
        """The uuid map and counters of a session imported before (growth import)."""
        row = self.db.one("SELECT metadata_json FROM sessions WHERE id = :id", {"id": self.session_id})
        meta = json.loads(row[0] or "{}")
        last_seq = load_state(self.db, self.session_id).last_seq  # appends since the import count too
        if last_seq != int(meta.get("imported_last_seq", -1)):
            raise ImportConflict(
                f"session {self.session_id} has messages of its own since {self.path} was imported; "
                "import the grown file into a new store or session instead",
                self.session_id,
            )
        for uuid, seq, tokens in self.db.all(
            "SELECT uuid, seq, tokens FROM messages WHERE session_id = :id", {"id": self.session_id}
        ):
            self.seq_of[uuid] = int(seq)
            self.tokens_of[int(seq)] = int(tokens)
        self.last_seq = last_seq
        self._reopen_last_block()
        self.db.execute(
            "DELETE FROM source_lines WHERE session_id = :id AND line_no > :n",
            {"id": self.session_id, "n": self.lines_done},
        ).close()

    def _reopen_last_block(self) -> None:
        """Take the session's last stored block back into `pending` when it is not full or holds lines past
        `lines_done` (a half line a live import kept): its lines up to `lines_done` are stored again with the
        new ones, so appends cost one block, not the session, and a truncation never splits a line's block."""
        row = self.db.one(
            "SELECT line_no, raw, line_count FROM source_lines WHERE session_id = :id AND line_no > 0 "
            "AND line_no <= :n ORDER BY line_no DESC LIMIT 1",
            {"id": self.session_id, "n": self.lines_done},
        )
        if row is None or bytes(row[1][:1]) != bytes((BLOCK,)):
            return
        first, stored = int(row[0]), bytes(row[1])
        lines = block_lines(self.db, self.session_id, session_packer(self.db, self.session_id), first, stored)
        if int(row[2]) >= BLOCK_LINES and lines[-1].line_no <= self.lines_done:
            return
        self.db.execute(
            "DELETE FROM source_lines WHERE session_id = :id AND line_no = :n", {"id": self.session_id, "n": first}
        ).close()
        fault_in(self.db, "after_tail_block")
        kept = [line for line in lines if line.line_no <= self.lines_done]
        self.pending = [line._replace(columns=None) for line in kept]
        self.pending_columns.update({line.seq: line.columns for line in kept if line.seq is not None})

    def _take(self, line: ImportedLine) -> None:
        """One streamed line: a message, a side entry or a bad line, all kept raw."""
        if self.progress is not None and line.raw:
            self.progress(len(line.raw))
        if line.line_no <= self.lines_done:
            return
        if line.warning:
            self.warnings.append(line.warning)
        seq = None
        if line.kind == "message" and line.message is not None:
            seq = self._message(line)
        if line.raw:
            if seq is None or self.keep_message_lines:
                kind = line.kind if seq is not None or line.kind != "message" else "side"
                self.source_rows.append((self.session_id, line.line_no, kind, line.entry_type[:64], seq, line.raw))
            self.result.lines_added += 1
            if line.raw.endswith(b"\n") or line.kind != "bad":
                self.complete_lines = line.line_no
                self.complete_bytes += len(line.raw)
        if len(self.messages) >= BATCH or len(self.source_rows) >= BATCH:
            self._flush()
            fault_in(self.db, "mid_file")

    def _message(self, line: ImportedLine) -> int | None:
        """Record one message; a message the store cannot hold becomes a warning, not a failure."""
        self._drop_bad_timestamp(line)
        self._drop_bad_usage(line)
        try:
            msg = normalize(line.message, sendable=False, allow_unknown_blocks=True)
        except InvalidMessage as exc:
            self.warnings.append(f"{self.path}:{line.line_no}: kept as a side entry: {exc}")
            return None
        if msg.uuid in self.seq_of:
            self.warnings.append(f"{self.path}:{line.line_no}: duplicate uuid {msg.uuid}, kept as a side entry")
            return None
        self.last_seq += 1
        tokens = estimate_content(msg.content)
        self.messages.append(message_row(self.session_id, self.last_seq, msg, dumps(msg.content), tokens))
        self.seq_of[msg.uuid] = self.last_seq
        self.tokens_of[self.last_seq] = tokens
        for tool_id in tool_result_ids(msg.content) if msg.role == "user" else ():
            self.result_seq[tool_id] = self.last_seq
        self._saw_time(msg.timestamp)
        self.result.messages_added += 1
        return self.last_seq

    def _drop_bad_timestamp(self, line: ImportedLine) -> None:
        """A timestamp that is no time is dropped with a warning (the message is kept, stamped now)."""
        if not isinstance(line.message, dict):
            return
        stamp = line.message.get("timestamp")
        if isinstance(stamp, str):
            try:
                check_timestamp(stamp)
            except InvalidMessage:
                self.warnings.append(
                    f"{self.path}:{line.line_no}: timestamp {stamp[:40]!r} is not a time; "
                    "the import time is recorded instead"
                )
                line.message = {**line.message, "timestamp": None}

    def _drop_bad_usage(self, line: ImportedLine) -> None:
        """Token counts no API reports are dropped with a warning; the message itself is kept."""
        if not isinstance(line.message, dict):
            return
        usage = line.message.get("usage")
        if usage is None:
            return
        try:
            if not isinstance(usage, Mapping):
                raise InvalidMessage("usage is not an object")
            check_depth(usage, "usage")
            check_usage(usage)
        except InvalidMessage as exc:
            self.warnings.append(f"{self.path}:{line.line_no}: {exc}; the message is kept without its usage")
            line.message = {key: value for key, value in line.message.items() if key != "usage"}

    def _saw_time(self, timestamp: str | None) -> None:
        """Widen the span of source times the new messages cover."""
        moment = source_time(timestamp)
        if moment is not None:
            self.first_time = moment if self.first_time is None else min(self.first_time, moment)
            self.last_time = moment if self.last_time is None else max(self.last_time, moment)

    def _flush(self, final: bool = False) -> None:
        """Store the batch's messages, and its lines in full blocks (every block when `final`; else the last,
        partial one waits for the next batch)."""
        self.db.insert_rows(
            "messages", MESSAGE_INSERT_COLUMNS, self.db.text_packer.pack_rows(self.messages, train=True)
        )
        packer = self.packer or (self._first_packer() if self.source_rows or self.pending else None)
        # A line carrying a message is stored without what its messages row holds already (the message is in
        # the line's batch; only the columns of lines kept are held, so a source keeping no message line holds none).
        batch = {row[1]: row for row in self.messages}
        for row in self.source_rows:
            if row[4] in batch:
                self.pending_columns[row[4]] = [batch[row[4]][i] for i in _SPLICED]
        self.pending += [BlockLine(row[1], row[4], bytes(row[5]), None, row[2], row[3]) for row in self.source_rows]
        self.messages, self.source_rows = [], []
        if packer is None or not self.pending:
            return
        # Mid-file, the lines that do not fill a block wait for the next batch (or the last flush).
        stored = self.pending if final else self.pending[: len(self.pending) - len(self.pending) % BLOCK_LINES]
        if not stored:
            return
        columns = self.pending_columns
        self.db.insert_rows(
            "source_lines",
            BLOCK_COLUMNS,
            packer.pack_blocks(
                self.session_id,
                [line._replace(columns=columns.get(line.seq)) if line.seq is not None else line for line in stored],
            ),
        )
        fault_in(self.db, "after_blocks")
        for line in stored:
            if line.seq is not None:
                self.pending_columns.pop(line.seq, None)
        self.pending = self.pending[len(stored) :]

    def _first_packer(self) -> LinePacker:
        """The session's packer: its stored dictionary, else one trained on this first batch (stored as row 0)."""
        packer = session_packer(self.db, self.session_id) if self.existing else LinePacker()
        if packer.dictionary is None:
            dictionary = train([row[-1] for row in self.source_rows])
            if dictionary is not None:
                self.db.insert_rows("source_lines", _SOURCE_LINE_COLUMNS, [dictionary_row(self.session_id, dictionary)])
                packer = LinePacker(dictionary)
                fault_in(self.db, "after_dictionary")
        self.packer = packer
        return packer

    def _duplicate_of(self, plan: ImportPlan) -> str | None:
        """A session already imported from the same source session (a copy of the file elsewhere)."""
        if self.existing or self.own_key or not plan.source_session_id:
            return None
        row = self.db.one(
            "SELECT session_id FROM imports WHERE source = :s AND source_key = :k",
            {"s": self.source, "k": plan.source_session_id},
        )
        return row[0] if row else None

    def _layout(self, plan: ImportPlan) -> None:
        """Past views at versions 0..n-1 (one per boundary), the active chain at version n."""
        self.db.execute("DELETE FROM view_entries WHERE session_id = :id", {"id": self.session_id}).close()
        self.db.execute("DELETE FROM compactions WHERE session_id = :id", {"id": self.session_id}).close()
        versions = [b.view_before for b in plan.boundaries] + [plan.active_chain]
        totals = []
        for version, uuids in enumerate(versions):
            seqs = self._seqs(uuids)
            current = version == len(versions) - 1
            valid_to = None if current else version + 1
            cleared = self._cleared(plan.cleared, version, seqs)
            tokens = [cleared[seq][1] if seq in cleared else self.tokens_of[seq] for seq in seqs]
            self.db.insert_rows(
                "view_entries",
                _VIEW_ENTRY_COLUMNS,
                [
                    (
                        self.session_id,
                        version,
                        (i + 1) * KEY_GAP,
                        seq,
                        valid_to,
                        tokens[i],
                        cleared[seq][0] if seq in cleared else None,
                    )
                    for i, seq in enumerate(seqs)
                ],
            )
            totals.append((seqs, sum(tokens)))
        order = sorted(range(len(plan.boundaries)), key=lambda i: self.seq_of[plan.boundaries[i].boundary_uuid])
        self.ordinals = {i: rank + 1 for rank, i in enumerate(order)}
        known = [tool_id for tool_id in plan.cleared if tool_id in self.result_seq]
        if known:
            save_cleared(self.db, self.session_id, known, CLEARED_TEXT)
        for index, b in enumerate(plan.boundaries):
            self._compaction(index, b, totals[index][1], self._post_tokens(b, totals[index + 1][0]))
        self.final_seqs, self.final_tokens = totals[-1]
        self.result.boundaries = len(plan.boundaries)

    def _cleared(self, cleared: dict[str, int], version: int, seqs: list[int]) -> dict[int, tuple[str, int]]:
        """{seq: (content JSON, tokens)} of the view's results a microcompact had cleared by `version`."""
        ids = {tool_id for tool_id, after in cleared.items() if after <= version}
        targets = sorted({self.result_seq[t] for t in ids if t in self.result_seq} & set(seqs))
        out = {}
        for seq in targets:
            content = self._content(seq)
            if not isinstance(content, list):
                continue
            shown = [
                dict(b, content=CLEARED_TEXT) if b.get("type") == "tool_result" and b.get("tool_use_id") in ids else b
                for b in content
            ]
            out[seq] = (dumps(shown), estimate_content(shown))
        return out

    def _content(self, seq: int) -> Any:
        """One stored message's content (read back from this transaction)."""
        row = self.db.one(
            "SELECT content_json FROM messages WHERE session_id = :id AND seq = :seq",
            {"id": self.session_id, "seq": seq},
        )
        return loads_stored(row[0])

    def _post_tokens(self, b: ImportedBoundary, next_view: list[int]) -> int:
        """Tokens of the view right after the compaction: boundary, summary and preserved messages.

        The next version also holds everything appended later; only what existed at the
        summary (seq up to it) counts.
        """
        cutoff = self.seq_of.get(b.summary_uuid or "") or self.seq_of[b.boundary_uuid]
        return sum(self.tokens_of[seq] for seq in next_view if seq <= cutoff)

    def _seqs(self, uuids: list[str]) -> list[int]:
        out = []
        for u in uuids:
            seq = self.seq_of.get(u)
            if seq is None:
                self.warnings.append(f"{self.path}: view message {u} was not stored; left out of the view")
            else:
                out.append(seq)
        return out

    def _compaction(self, version: int, b: ImportedBoundary, pre_total: int, post_total: int) -> None:
        seg = b.preserved_segment or {}
        self.db.execute(
            "INSERT INTO compactions (session_id, boundary_seq, summary_seq, replaced_version, kind, trigger, "
            "pre_tokens, post_tokens, messages_summarized, summarized_seqs_json, head_uuid, anchor_uuid, "
            "tail_uuid, custom_instructions, summarizer, created_at, metadata_json, ordinal, view_floor) VALUES "
            "(:s, :b, :sum, :v, :kind, :trigger, :pre, :post, :n, :seqs, :head, :anchor, :tail, NULL, :summarizer, "
            ":now, :meta, :ordinal, :v)",
            {
                "s": self.session_id,
                "b": self.seq_of[b.boundary_uuid],
                "sum": self.seq_of.get(b.summary_uuid) if b.summary_uuid else None,
                "v": version,
                "kind": b.kind,
                "trigger": b.trigger,
                "pre": b.pre_tokens if b.pre_tokens is not None else pre_total,
                "post": post_total,
                "n": len(b.summarized),
                "seqs": dumps(self._seqs(b.summarized)),
                "head": seg.get("head_uuid"),
                "anchor": seg.get("anchor_uuid"),
                "tail": seg.get("tail_uuid"),
                "summarizer": f"imported:{self.source}",
                "now": self._time_of(self.seq_of[b.boundary_uuid]),
                "meta": dumps({"imported": True}),
                "ordinal": self.ordinals[version],
            },
        ).close()

    def _time_of(self, seq: int) -> float:
        """A stored message's source time (epoch seconds); now when it has none."""
        row = self.db.one(
            "SELECT timestamp FROM messages WHERE session_id = :id AND seq = :seq", {"id": self.session_id, "seq": seq}
        )
        moment = source_time(row[0]) if row else None
        return time.time() if moment is None else moment

    def _finish(self, plan: ImportPlan) -> None:
        """Session counters, header fields, the imports row and sub-agent links."""
        tail = tail_state_for(self.db, self.session_id, [(s, None) for s in self.final_seqs])
        meta = {
            "imported_from": self.source,
            "imported_last_seq": self.last_seq,
            "source_session_id": plan.source_session_id,
        }
        self.db.execute(
            "UPDATE sessions SET last_seq = :last, base_seq = :last, view_version = :v, view_tokens = :t, "
            "explicit_count = :n, tail_state = :tail, updated_at = COALESCE(:updated, updated_at), "
            "created_at = COALESCE(:created, created_at), title = COALESCE(:title, title), "
            "cwd = COALESCE(:cwd, cwd), model = COALESCE(:model, model), "
            "context_window = COALESCE(:window, context_window), metadata_json = :meta WHERE id = :id",
            {
                "last": self.last_seq,
                "v": len(plan.boundaries),
                "t": self.final_tokens,
                "n": len(self.final_seqs),
                "tail": tail.dumps(),
                "updated": self.last_time,
                "created": None if self.existing else self.first_time,
                # Header fields derived from the file's lines (whose bytes are kept exactly): storable on both engines.
                "title": _storable(plan.title),
                "cwd": _storable(plan.cwd),
                "model": _storable(plan.model),
                "window": plan.context_window,
                "meta": dumps(meta),
                "id": self.session_id,
            },
        ).close()
        sha = self.prefix_digest()
        params = {
            "id": self.session_id,
            "s": self.source,
            "k": self.own_key or plan.source_session_id or self.path,
            "p": self.path,
            "b": self.complete_bytes,
            "n": self.complete_lines,
            "sha": sha,
            "now": time.time(),
        }
        self.db.execute(
            "INSERT INTO imports (session_id, source, source_key, path, bytes_done, lines_done, prefix_sha256, "
            "updated_at) VALUES (:id, :s, :k, :p, :b, :n, :sha, :now) ON CONFLICT (session_id) DO UPDATE SET "
            "path = excluded.path, bytes_done = excluded.bytes_done, lines_done = excluded.lines_done, "
            "prefix_sha256 = excluded.prefix_sha256, updated_at = excluded.updated_at",
            params,
        ).close()
        record_file(self.db, self.source, self.path, self.session_id, self.complete_bytes, self.complete_lines, sha)
        self._link_parents(plan)

    def prefix_digest(self) -> str:
        """The digest of the source's first bytes (see `prefix_sha`); a writer fed from elsewhere overrides it."""
        return prefix_sha(self.path, self.complete_bytes)

    def _link_parents(self, plan: ImportPlan) -> None:
        if plan.parent_source_session_id:
            parent = self.db.one(
                "SELECT session_id FROM imports WHERE source = :s AND source_key = :k",
                {"s": self.source, "k": plan.parent_source_session_id},
            )
            if parent:
                self.db.execute(
                    "UPDATE sessions SET parent_id = :p WHERE id = :id", {"p": parent[0], "id": self.session_id}
                ).close()
        if plan.source_session_id:
            self.db.execute(
                "UPDATE sessions SET parent_id = :p WHERE id IN (SELECT session_id FROM imports "
                "WHERE source = :s AND source_key LIKE :k)",
                {"p": self.session_id, "s": self.source, "k": plan.source_session_id.replace("%", "") + "/agent-%"},
            ).close()


class DuplicateImport(SessionStoreError):
    """The file holds a session already imported from another path; raised inside the transaction."""

    def __init__(self, session_id: str):
        super().__init__(session_id)
        self.session_id = session_id


def import_paths(
    store: "SessionStore",
    paths: Iterable[str | os.PathLike[str]],
    *,
    source: str | None = None,
    strict: bool = False,
    progress: Progress | None = None,
    follow_symlinks: bool = False,
) -> list[ImportResult]:
    """Import every transcript under `paths`; a copy of an imported session is reported, not re-added.

    With `source` given, a file of another format is refused before anything is
    written; a file that yields no message is reported as skipped, and so is a file
    under a folder that leads out of it (unless `follow_symlinks`). Under `strict`, each
    file is taken whole or not at all: a file with warnings is reported as `refused`
    with every warning, nothing of it written, and the next files are still imported.
    """
    outside: list[tuple[Path, str]] = []
    files = transcript_files(paths, follow_symlinks=follow_symlinks, outside=outside)
    if source is not None:
        for path in files:
            check_format(path, source)
    results = [
        ImportResult(str(path), source or "", None, "skipped", warnings=[f"{path} {note}"]) for path, note in outside
    ]
    for path in files:
        try:
            results.append(import_file(store, path, source=source, strict=strict, progress=progress))
        except DuplicateImport as dup:
            results.append(ImportResult(str(path), source or "", dup.session_id, "duplicate"))
        except EmptyTranscript as empty:
            results.append(ImportResult(str(path), source or "", None, "skipped", warnings=[str(empty)]))
        except ImportWarnings as refused:
            results.append(ImportResult(str(path), source or "", None, "refused", warnings=refused.warnings))
    return results


def source_time(timestamp: str | None) -> float | None:
    """An ISO-8601 timestamp of a source file as epoch seconds (UTC unless it says otherwise); None if unreadable."""
    if not timestamp:
        return None
    try:
        moment = datetime.fromisoformat(timestamp.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def check_format(path: str | os.PathLike[str], source: str) -> None:
    """Refuse a file whose lines show another transcript format than `source`, naming the right command."""
    found = sniff_source(path)
    if found is not None and found != source:
        raise WrongFormat(
            f"{path} is a {found} transcript, not {source}; import it with `{IMPORT_COMMANDS[found]} {path}`"
        )


def _storable(text: str | None) -> str | None:
    """A session header field taken from a file, as a TEXT column of either engine holds it (NUL shown as U+FFFD)."""
    return None if text is None else storable_text(text)
