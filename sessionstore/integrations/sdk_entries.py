"""The Agent SDK's keys and entries in the database, and how a key's entries become a session.

An append keeps the batch's entries (`agent_sdk_entries`, in append order; an entry whose `uuid`
the key holds already is not added again) and the key's write time and folded summary
(`agent_sdk_keys`), in one short transaction: that is all the SDK waits for. The entries that are
Claude Code transcript lines become a session afterwards, by `catch_up`: the key's entries not
imported yet (`imported_count < entry_count`) are fed, as the next lines of the key's transcript,
through `import claude-code`'s own interpreter and writer, exactly as the growth of a file would
be, in one transaction per key. The adapter runs it when its appends pause, on `flush()` and on
`close()`; every `sessionstore` command that opens a writable store runs it first, so a process
that died between the two loses nothing (its entries are kept; their session is made by the next
reader that may write it).

Nothing here imports the SDK (`claude-agent-sdk` is an optional extra): the command line brings
pending keys up to date without it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from functools import partial
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from sessionstore.integrations.sdk_pending import PENDING
from sessionstore.interchange.copies import PREFIX_BYTES, stream_of
from sessionstore.interchange.importers.claude_code import CONVERSATION_TYPES, ClaudeCodeImport
from sessionstore.interchange.importers.plan import ImportedLine
from sessionstore.interchange.importing import DuplicateImport, EmptyTranscript, ImportConflict, _Writer
from sessionstore.storage.codecs.fastjson import compact_dumps, loads_stored
from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.core.faults import fault_in
from sessionstore.storage.core.gcpause import gc_paused

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessionstore.storage.engine.db import Database
    from sessionstore.storage.store import SessionStore

log = logging.getLogger(__name__)

#: The source an SDK session is recorded as: the same as a Claude Code file's (exported byte for byte).
SOURCE = "claude-code"
#: How a key is named where an import names its file (warnings, `imports.path`): never a real file.
PATH_SCHEME = "agent-sdk:"
#: The fault points of an append are `agent_sdk.append.<group>`, of a key's catch-up `agent_sdk.import.<group>`.
POINT = "agent_sdk.append"
IMPORT_POINT = "agent_sdk.import"
#: Keys whose importer (the graph facts of their lines so far) a process keeps between catch-ups.
KEPT_IMPORTERS = 64
#: Most entries one catch-up transaction imports: a long backlog goes in steps, so appends interleave.
CATCH_UP_CHUNK = 2000
KEY_COLUMNS = "id, mtime_ms, entry_count, summary_json, linked_session, import_note, imported_count"
_SURROGATE = re.compile("[\ud800-\udfff]")
#: The SDK's `fold_session_summary(previous, key, entries)`, passed in by the adapter.
Fold = Callable[[Any, Any, list[Any]], dict[str, Any]]


class AgentSdkStoreError(SessionStoreError):
    """A key the store cannot hold (an empty project key or session id, an empty subpath)."""


def entry_line(entry: Any) -> str:
    """The JSON line of one entry as Claude Code writes it (compact, non-ASCII kept, lone surrogates escaped).

    For every line of a Claude Code transcript this gives back the line's exact text, so the
    session's export reproduces the file byte for byte.
    """
    text = compact_dumps(entry)
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


@dataclass(frozen=True)
class Key:
    """A SessionKey's three parts ('' for the main transcript's subpath)."""

    project_key: str
    session_id: str
    subpath: str

    @classmethod
    def of(cls, key: "Mapping[str, Any]") -> "Key":
        """The parts of an SDK key, checked (the SDK never sends an empty part)."""
        subpath = key.get("subpath")
        if not key.get("project_key") or not key.get("session_id") or subpath == "":
            raise AgentSdkStoreError(f"not a session key: {dict(key)!r}")
        return cls(str(key["project_key"]), str(key["session_id"]), str(subpath or ""))

    @property
    def path(self) -> str:
        """Where an import would have read it: `<project>/<session>.jsonl` or `<project>/<session>/<subpath>.jsonl`."""
        tail = f"{self.session_id}/{self.subpath}" if self.subpath else self.session_id
        return f"{PATH_SCHEME}{PurePosixPath(self.project_key, tail)}.jsonl"

    @property
    def params(self) -> dict[str, str]:
        return {"p": self.project_key, "s": self.session_id, "sub": self.subpath}


@dataclass
class KeyRow:
    """A key's stored row: its id, write time, entries held, folded summary and linked session."""

    id: int
    mtime_ms: int
    entry_count: int
    summary_json: str | None
    linked_session: str | None
    #: Why the key's lines stopped becoming a session (a copy of a session imported otherwise...), else None.
    import_note: str | None
    #: How many of the entries are in the session already (or kept as entries only): the rest are pending.
    imported_count: int


class EntryImport(ClaudeCodeImport):
    """The Claude Code importer fed with a key's lines instead of reading a file."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.feed: list[bytes] = []

    def lines(self) -> "Iterator[ImportedLine]":
        """The fed lines, numbered on from where this importer stopped."""
        feed, self.feed = self.feed, []
        return self.stream(enumerate(feed, start=self.position[1] + 1))


class EntryWriter(_Writer):
    """The import writer for a key: the prefix digest comes from the key's stored lines, not a file."""

    key_id: int

    def prefix_digest(self) -> str:
        """sha256 of the key's first min(bytes imported, 64 KiB) bytes, read from its entries."""
        if self.existing and int(self.existing[1]) >= PREFIX_BYTES:
            return str(self.existing[3])
        wanted = min(self.complete_bytes, PREFIX_BYTES)
        digest, taken = hashlib.sha256(), 0
        for raw in stored_lines(self.db, self.key_id):
            part = raw[: wanted - taken]
            digest.update(part)
            taken += len(part)
            if taken >= wanted:
                break
        return digest.hexdigest()


def stored_lines(db: "Database", key_id: int, upto: int | None = None) -> "Iterator[bytes]":
    """The stored entries of a key (through entry `upto`, default all) as the bytes of their transcript lines."""
    bound = "" if upto is None else f" AND n <= {int(upto)}"
    cur = db.execute(f"SELECT entry FROM agent_sdk_entries WHERE key_id = :k{bound} ORDER BY n", {"k": key_id})
    try:
        for (text,) in cur:
            yield text.encode("utf-8") + b"\n"
    finally:
        cur.close()


class Importers:
    """The importers a process keeps per key id: each has read its key's lines so far (graph facts included),
    so the next catch-up feeds it only the new lines instead of re-reading the key."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[str | None, EntryImport]] = {}

    def take(self, key_id: int) -> tuple[str | None, EntryImport] | None:
        """The key's importer and the session it fed, removed (put back by `keep` after a commit)."""
        return self._kept.pop(key_id, None)

    def keep(self, key_id: int, session_id: str | None, importer: EntryImport) -> None:
        """Keep a key's importer; the least recently fed key's goes past KEPT_IMPORTERS (re-read if needed)."""
        self._kept[key_id] = (session_id, importer)
        if len(self._kept) > KEPT_IMPORTERS:
            del self._kept[next(iter(self._kept))]

    def forget(self, key_id: int) -> None:
        """Drop a key's importer (the key was deleted)."""
        self._kept.pop(key_id, None)

    def clear(self) -> None:
        """Drop every importer (a rolled-back transaction may have left one ahead of the store)."""
        self._kept.clear()


def append_entries(
    db: "Database", parts: Key, key: Any, batch: list[tuple[str | None, str, Any]], fold: Fold
) -> int | None:
    """Keep a batch (retried uuids skipped) with the key's write time and folded summary: the append's transaction.

    Returns the key's id when it now has entries to import, else None. The key's count of imported entries moves with it when its lines no longer become a session
    (`import_note`): nothing is pending then.
    """
    row = locked_key(db, parts)
    fresh = fresh_entries(db, row, batch)
    if not fresh:
        return None
    now = max(int(time.time() * 1000), row.mtime_ms + 1)
    db.insert_rows(
        "agent_sdk_entries",
        ("key_id", "n", "uuid", "entry"),
        [(row.id, row.entry_count + i + 1, uuid, text) for i, (uuid, text, _) in enumerate(fresh)],
    )
    summary = row.summary_json
    if not parts.subpath:
        prev = json.loads(summary) if summary else None
        folded = fold(prev, key, [entry for _, _, entry in fresh])
        folded["mtime"] = now
        summary = json.dumps(folded, ensure_ascii=False, separators=(",", ":"))
    count = row.entry_count + len(fresh)
    imported = count if row.import_note is not None else row.imported_count
    db.execute(
        "UPDATE agent_sdk_keys SET mtime_ms = :t, entry_count = :n, summary_json = :summary, imported_count = :i "
        "WHERE id = :id",
        {"t": now, "n": count, "summary": summary, "i": imported, "id": row.id},
    ).close()
    fault_in(db, "after_entries")
    return row.id if imported < count else None


def pending_keys(db: "Database") -> list[int]:
    """The ids of the keys (this role's, under row-level security) whose entries are not all imported, oldest first."""
    return [int(r[0]) for r in db.all(f"SELECT id FROM agent_sdk_keys WHERE {PENDING} ORDER BY id")]


def catch_up(store: "SessionStore", importers: Importers | None = None, keys: list[int] | None = None) -> int:
    """Import the pending entries of `keys` (default: every pending key), one transaction per key; how many
    keys were brought up to date. A key that fails keeps its entries, pending, and the error propagates."""
    importers = importers if importers is not None else Importers()
    host = store.config.host_name()
    done = 0
    for key_id in keys if keys is not None else pending_keys(store.db):
        moved = False
        try:
            with gc_paused():
                while store.db.run_write(
                    partial(_catch_up_key, key_id=key_id, importers=importers, host=host), point=IMPORT_POINT
                ):
                    moved = True
        except BaseException:
            importers.clear()  # an importer that read lines of a rolled-back import is ahead of the store
            raise
        done += moved
    return done


def _catch_up_key(db: "Database", key_id: int, importers: Importers, host: str) -> bool:
    """One key's pending entries into its session, in the caller's transaction; False when nothing was pending."""
    lock = "" if db.is_sqlite else " FOR UPDATE"
    found = db.one(
        f"SELECT {KEY_COLUMNS}, project_key, sdk_session_id, subpath FROM agent_sdk_keys WHERE id = :k{lock}",
        {"k": key_id},
    )
    if found is None:
        return False
    row = _key_row(found)
    if row.imported_count >= row.entry_count:
        return False
    parts = Key(str(found[7]), str(found[8]), str(found[9]))
    rows = db.all(
        "SELECT entry FROM agent_sdk_entries WHERE key_id = :k AND n > :done AND n <= :upto ORDER BY n",
        {"k": key_id, "done": row.imported_count, "upto": row.imported_count + CATCH_UP_CHUNK},
    )
    texts = [str(r[0]) for r in rows]
    linked, note = _interpret(db, parts, row, texts, [loads_stored(t) for t in texts], importers, host)
    fault_in(db, "after_import")
    done = row.entry_count if note is not None else row.imported_count + len(texts)
    db.execute(
        "UPDATE agent_sdk_keys SET linked_session = :s, import_note = :note, imported_count = :n WHERE id = :id",
        {"s": linked, "note": note, "n": done, "id": row.id},
    ).close()
    return True


def _interpret(
    db: "Database", parts: Key, row: KeyRow, texts: list[str], entries: list[Any], importers: Importers, host: str
) -> tuple[str | None, str | None]:
    """Import a key's pending lines into its session (created by its first message): (the session, a note).

    The lines go through the Claude Code importer exactly as the growth of a file would: the
    importer that read the key so far goes on when it stopped where the session's stream stands,
    else a new one reads every stored line (the writer skips those imported already). A key whose
    lines make no session keeps its entries: with no message yet, a later catch-up tries again; as a
    copy of a session imported otherwise, or a session written to by other means since, the key
    keeps a note saying so (`import_note`) and its later entries are kept as entries only.
    """
    if row.import_note is not None:
        return row.linked_session, row.import_note
    session = row.linked_session
    existing = stream_of(db, session) if session else None
    if existing is None:
        session = None
        if not any(isinstance(e, dict) and e.get("type") in CONVERSATION_TYPES for e in entries):
            return None, None  # no line that could be a message: no session to make yet, nothing to re-read
    cached = importers.take(row.id)
    importer: EntryImport
    if (
        existing is not None
        and cached is not None
        and cached[0] == session
        and cached[1].position == (existing.bytes_done, existing.lines_done)
        and existing.lines_done == row.imported_count
    ):
        importer = cached[1]
        importer.feed = [t.encode("utf-8") + b"\n" for t in texts]
    else:
        importer = EntryImport(parts.path)
        importer.feed = list(stored_lines(db, row.id, row.imported_count + len(texts)))
    writer = EntryWriter(db, parts.path, SOURCE, existing.offsets if existing else None, False, None, importer)
    writer.key_id = row.id
    writer.host = host
    db.execute("SAVEPOINT agent_sdk_import").close()
    try:
        writer.run()
    except (EmptyTranscript, DuplicateImport, ImportConflict) as exc:
        db.execute("ROLLBACK TO SAVEPOINT agent_sdk_import").close()
        db.execute("RELEASE SAVEPOINT agent_sdk_import").close()
        db.reset_text_packer()  # a dictionary trained in the rolled-back import is gone with it
        if isinstance(exc, EmptyTranscript):
            return None, None
        return session, import_note(exc)
    db.execute("RELEASE SAVEPOINT agent_sdk_import").close()
    importers.keep(row.id, writer.session_id, importer)
    return writer.session_id, None


def import_note(exc: SessionStoreError) -> str:
    """Why a key's lines no longer become a session, kept with the key."""
    if isinstance(exc, DuplicateImport):
        return f"its lines are a copy of session {exc.session_id}, imported otherwise; kept as entries only"
    return f"{exc}; kept as entries only"[:500]


def uuid_of(entry: Any) -> str | None:
    """The entry's idempotency key: its `uuid` when it is a non-empty string."""
    value = entry.get("uuid") if isinstance(entry, dict) else None
    return value if isinstance(value, str) and value else None


def locked_key(db: "Database", parts: Key) -> KeyRow:
    """The key's row, created if new, locked for this write (PostgreSQL: FOR UPDATE; SQLite writes take turns).

    An existing key (every append but a key's first) costs one statement.
    """
    lock = "" if db.is_sqlite else " FOR UPDATE"
    select = f"SELECT {KEY_COLUMNS} FROM agent_sdk_keys WHERE project_key = :p AND sdk_session_id = :s AND subpath = :sub{lock}"
    row = db.one(select, parts.params)
    if row is None:
        db.execute(
            "INSERT INTO agent_sdk_keys (project_key, sdk_session_id, subpath, mtime_ms, entry_count) "
            "VALUES (:p, :s, :sub, 0, 0) ON CONFLICT (owner, project_key, sdk_session_id, subpath) DO NOTHING",
            parts.params,
        ).close()
        row = db.one(select, parts.params)
    return _key_row(row)


def _key_row(row: Any) -> KeyRow:
    return KeyRow(int(row[0]), int(row[1]), int(row[2]), row[3], row[4], row[5], int(row[6]))


def fresh_entries(
    db: "Database", row: KeyRow, batch: list[tuple[str | None, str, Any]]
) -> list[tuple[str | None, str, Any]]:
    """The batch without the entries whose uuid the key holds already (or that came earlier in the batch).

    A batch the key holds whole already, in order (the SDK retrying a batch whose append did land,
    or a replay of one) adds nothing at all, its entries without a uuid included.
    """
    uuids = list(dict.fromkeys(u for u, _, _ in batch if u is not None)) if row.entry_count else []
    stored: set[str] = set()
    for start in range(0, len(uuids), 500):
        chunk = uuids[start : start + 500]
        marks = ", ".join(f":u{i}" for i in range(len(chunk)))
        stored.update(
            r[0]
            for r in db.all(
                f"SELECT uuid FROM agent_sdk_entries WHERE key_id = :k AND uuid IN ({marks})",
                {"k": row.id, **{f"u{i}": u for i, u in enumerate(chunk)}},
            )
        )
    if stored and stored_whole(db, row, batch):
        return []
    fresh = []
    for item in batch:
        uuid = item[0]
        if uuid is not None:
            if uuid in stored:
                continue
            stored.add(uuid)
        fresh.append(item)
    return fresh


def stored_whole(db: "Database", row: KeyRow, batch: list[tuple[str | None, str, Any]]) -> bool:
    """True when the key's stored entries hold this exact batch as one run (found by its first uuid)."""
    first = next((i for i, (uuid, _, _) in enumerate(batch) if uuid is not None), None)
    if first is None:
        return False
    found = db.one(
        "SELECT n FROM agent_sdk_entries WHERE key_id = :k AND uuid = :u", {"k": row.id, "u": batch[first][0]}
    )
    if found is None or int(found[0]) - first < 1:
        return False
    start = int(found[0]) - first
    stored = db.all(
        "SELECT entry FROM agent_sdk_entries WHERE key_id = :k AND n >= :a AND n < :b ORDER BY n",
        {"k": row.id, "a": start, "b": start + len(batch)},
    )
    return [r[0] for r in stored] == [text for _, text, _ in batch]
