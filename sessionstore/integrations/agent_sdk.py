"""The Claude Agent SDK's `SessionStore`, kept in a sessionstore database.

    from claude_agent_sdk import ClaudeAgentOptions
    from sessionstore.integrations.agent_sdk import AgentSdkStore
    options = ClaudeAgentOptions(session_store=AgentSdkStore.open("sqlite:///sessions.db"))

Every entry the SDK appends is kept exactly (`agent_sdk_entries`, in append order; an entry whose
`uuid` the key holds already is not added again, as the SDK retries failed batches), so `load`
gives back what was appended. The entries that are Claude Code transcript lines also become a
session, exactly as `sessionstore import claude-code` makes one of the same file: each batch is
fed, as the next lines of the key's transcript, through that importer's own interpreter and writer
(`ClaudeCodeImport`, `_Writer`), in the append's transaction. So `history`, `search`, `recall`,
`fork`, `export` and ownership work on SDK sessions; a subagent subpath becomes a subagent session
linked to its parent. `list_session_summaries` returns the SDK's `fold_session_summary` output,
persisted verbatim by the append that folded it, its `mtime` the key's write time (the clock
`list_sessions` shows). `delete` of a main key removes its subkeys, their entries and sessions.

The database work runs off the event loop (`asyncio.to_thread`); calls on one adapter take turns
on its one connection. Two processes appending to one key take turns on the key's row.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, cast

from claude_agent_sdk import SessionStore as SdkSessionStore
from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from sessionstore.interchange.copies import PREFIX_BYTES, stream_of
from sessionstore.interchange.importers.claude_code import CONVERSATION_TYPES, ClaudeCodeImport
from sessionstore.interchange.importers.plan import ImportedLine
from sessionstore.interchange.importing import DuplicateImport, EmptyTranscript, ImportConflict, _Writer
from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.codecs.fastjson import compact_dumps, loads_stored
from sessionstore.storage.core.faults import fault_in
from sessionstore.storage.core.gcpause import gc_paused
from sessionstore.storage.store import SessionStore, delete_session_rows

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessionstore.storage.engine.db import Database

__all__ = ["AgentSdkStore", "entry_line"]

#: The source an SDK session is recorded as: the same as a Claude Code file's (exported byte for byte).
SOURCE = "claude-code"
#: How a key is named where an import names its file (warnings, `imports.path`): never a real file.
PATH_SCHEME = "agent-sdk:"
#: The fault points of an append are `agent_sdk.append.<group>` (see sessionstore.storage.core.faults).
POINT = "agent_sdk.append"
#: Keys whose importer (the graph facts of their lines so far) an adapter keeps between appends.
KEPT_IMPORTERS = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


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
class _Key:
    """A SessionKey's three parts ('' for the main transcript's subpath)."""

    project_key: str
    session_id: str
    subpath: str

    @classmethod
    def of(cls, key: SessionKey | SessionListSubkeysKey) -> "_Key":
        """The parts of an SDK key, checked (the SDK never sends an empty part)."""
        subpath = cast("dict[str, Any]", key).get("subpath")
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
class _KeyRow:
    """A key's stored row: its id, write time, entries held, folded summary and linked session."""

    id: int
    mtime_ms: int
    entry_count: int
    summary_json: str | None
    linked_session: str | None
    #: Why the key's lines stopped becoming a session (a copy of a session imported otherwise...), else None.
    import_note: str | None


class _EntryImport(ClaudeCodeImport):
    """The Claude Code importer fed with a key's lines instead of reading a file."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.feed: list[bytes] = []

    def lines(self) -> "Iterator[ImportedLine]":
        """The fed lines, numbered on from where this importer stopped."""
        feed, self.feed = self.feed, []
        return self.stream(enumerate(feed, start=self.position[1] + 1))


class _EntryWriter(_Writer):
    """The import writer for a key: the prefix digest comes from the key's stored lines, not a file."""

    key_id: int

    def prefix_digest(self) -> str:
        """sha256 of the key's first min(bytes imported, 64 KiB) bytes, read from its entries."""
        if self.existing and int(self.existing[1]) >= PREFIX_BYTES:
            return str(self.existing[3])
        wanted = min(self.complete_bytes, PREFIX_BYTES)
        digest, taken = hashlib.sha256(), 0
        for raw in _stored_lines(self.db, self.key_id):
            part = raw[: wanted - taken]
            digest.update(part)
            taken += len(part)
            if taken >= wanted:
                break
        return digest.hexdigest()


def _stored_lines(db: "Database", key_id: int) -> "Iterator[bytes]":
    """Every stored entry of a key as the bytes of its transcript line, in order."""
    cur = db.execute("SELECT entry FROM agent_sdk_entries WHERE key_id = :k ORDER BY n", {"k": key_id})
    try:
        for (text,) in cur:
            yield text.encode("utf-8") + b"\n"
    finally:
        cur.close()


class AgentSdkStore(SdkSessionStore):
    """A `claude_agent_sdk.SessionStore` on a sessionstore database (all six methods).

    Build it from an open `sessionstore.SessionStore` (which stays the caller's to close), or from a
    URL, `AgentSdkStore(url)` or `AgentSdkStore.open(url)` (the store it opens is closed by `close()`).
    """

    def __init__(self, store: SessionStore | str, *, owns_store: bool = False) -> None:
        if isinstance(store, str):
            store, owns_store = SessionStore.open(store), True
        self.store = store
        self._owns_store = owns_store
        #: Per key id: the session its importer fed, and the importer (its graph facts so far).
        self._importers: dict[int, tuple[str | None, _EntryImport]] = {}

    @classmethod
    def open(cls, url: str | None = None) -> "AgentSdkStore":
        """An adapter on the store at `url` (default: SESSIONSTORE_DB_URL, else SQLite under the XDG data dir)."""
        return cls(SessionStore.open(url), owns_store=True)

    def close(self) -> None:
        """Close the store when this adapter opened it."""
        self._importers.clear()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "AgentSdkStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ the six methods

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Keep a batch of entries (retried uuids skipped) and import its Claude Code lines into the key's session."""
        parts = _Key.of(key)
        if entries:
            await asyncio.to_thread(self.append_sync, parts, key, list(entries))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry of the key in append order, deep-equal to what was appended; None for a key never written."""
        return await asyncio.to_thread(self.load_sync, _Key.of(key))

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main keys with their write times (epoch ms)."""
        return await asyncio.to_thread(self._list_sessions, project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The project's folded summaries, as the appends persisted them."""
        return await asyncio.to_thread(self._list_summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Delete a key (a main key: with its subkeys), its entries and the sessions they became."""
        await asyncio.to_thread(self._delete, _Key.of(key))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a session."""
        return await asyncio.to_thread(self._list_subkeys, _Key.of(key))

    # ------------------------------------------------------------------ append

    def append_sync(self, parts: _Key, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """`append` in the calling thread: one write transaction (named `agent_sdk.append` for fault points)."""
        batch = [(_uuid_of(e), entry_line(e), e) for e in entries]
        try:
            with gc_paused():
                self.store.db.run_write(lambda db: self._append_body(db, parts, key, batch), point=POINT)
        except BaseException:
            self._importers.clear()  # an importer that read lines of a rolled-back batch is ahead of the store
            raise

    def _append_body(
        self, db: "Database", parts: _Key, key: SessionKey, batch: list[tuple[str | None, str, Any]]
    ) -> None:
        row = _locked_key(db, parts)
        fresh = _fresh(db, row, batch)
        if not fresh:
            return
        now = max(int(time.time() * 1000), row.mtime_ms + 1)
        db.insert_rows(
            "agent_sdk_entries",
            ("key_id", "n", "uuid", "entry"),
            [(row.id, row.entry_count + i + 1, uuid, text) for i, (uuid, text, _) in enumerate(fresh)],
        )
        summary = row.summary_json
        if not parts.subpath:
            prev = cast("SessionSummaryEntry", json.loads(summary)) if summary else None
            folded = fold_session_summary(prev, key, [entry for _, _, entry in fresh])
            folded["mtime"] = now
            summary = json.dumps(folded, ensure_ascii=False, separators=(",", ":"))
        db.execute(
            "UPDATE agent_sdk_keys SET mtime_ms = :t, entry_count = :n, summary_json = :summary WHERE id = :id",
            {"t": now, "n": row.entry_count + len(fresh), "summary": summary, "id": row.id},
        ).close()
        fault_in(db, "after_entries")
        linked, note = self._interpret(db, parts, row, [t for _, t, _ in fresh], [e for _, _, e in fresh])
        if (linked, note) != (row.linked_session, row.import_note):
            db.execute(
                "UPDATE agent_sdk_keys SET linked_session = :s, import_note = :note WHERE id = :id",
                {"s": linked, "note": note, "id": row.id},
            ).close()

    def _interpret(
        self, db: "Database", parts: _Key, row: _KeyRow, texts: list[str], entries: list[Any]
    ) -> tuple[str | None, str | None]:
        """Import the batch's lines into the key's session (created by its first message): (the session, a note).

        The lines go through the Claude Code importer exactly as the growth of a file would: the
        importer that read the key so far goes on when it stopped where the session's stream stands,
        else a new one reads every stored line (the writer skips those imported already). A key whose
        lines make no session keeps its entries: with no message yet, the next batch tries again; as a
        copy of a session imported otherwise, or a session written to by other means since, the key
        keeps a note saying so (`import_note`) and its later batches are kept as entries only.
        """
        if row.import_note is not None:
            return row.linked_session, row.import_note
        session = row.linked_session
        existing = stream_of(db, session) if session else None
        if existing is None:
            session = None
            if not any(isinstance(e, dict) and e.get("type") in CONVERSATION_TYPES for e in entries):
                return None, None  # no line that could be a message: no session to make yet, nothing to re-read
        cached = self._importers.pop(row.id, None)
        importer: _EntryImport
        if (
            existing is not None
            and cached is not None
            and cached[0] == session
            and cached[1].position == (existing.bytes_done, existing.lines_done)
            and existing.lines_done == row.entry_count
        ):
            importer = cached[1]
            importer.feed = [t.encode("utf-8") + b"\n" for t in texts]
        else:
            importer = _EntryImport(parts.path)
            importer.feed = list(_stored_lines(db, row.id))
        writer = _EntryWriter(db, parts.path, SOURCE, existing.offsets if existing else None, False, None, importer)
        writer.key_id = row.id
        writer.host = self.store.config.host_name()
        db.execute("SAVEPOINT agent_sdk_import").close()
        try:
            writer.run()
        except (EmptyTranscript, DuplicateImport, ImportConflict) as exc:
            db.execute("ROLLBACK TO SAVEPOINT agent_sdk_import").close()
            db.execute("RELEASE SAVEPOINT agent_sdk_import").close()
            db.reset_text_packer()  # a dictionary trained in the rolled-back import is gone with it
            if isinstance(exc, EmptyTranscript):
                return None, None
            return session, _note(exc)
        db.execute("RELEASE SAVEPOINT agent_sdk_import").close()
        self._importers[row.id] = (writer.session_id, importer)
        if len(self._importers) > KEPT_IMPORTERS:  # the least recently fed key's importer goes (re-read if needed)
            del self._importers[next(iter(self._importers))]
        return writer.session_id, None

    # ------------------------------------------------------------------ reads

    def load_sync(self, parts: _Key) -> list[SessionStoreEntry] | None:
        """`load` in the calling thread: one snapshot read."""
        db = self.store.db
        with db.read():
            row = db.one(
                "SELECT id FROM agent_sdk_keys WHERE project_key = :p AND sdk_session_id = :s AND subpath = :sub",
                parts.params,
            )
            if row is None:
                return None
            texts = db.all("SELECT entry FROM agent_sdk_entries WHERE key_id = :k ORDER BY n", {"k": row[0]})
        return [loads_stored(text) for (text,) in texts]

    def _list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        rows = self.store.db.all(
            "SELECT sdk_session_id, mtime_ms FROM agent_sdk_keys WHERE project_key = :p AND subpath = ''",
            {"p": project_key},
        )
        return [{"session_id": str(r[0]), "mtime": int(r[1])} for r in rows]

    def _list_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        rows = self.store.db.all(
            "SELECT summary_json FROM agent_sdk_keys WHERE project_key = :p AND subpath = '' "
            "AND summary_json IS NOT NULL",
            {"p": project_key},
        )
        return [cast("SessionSummaryEntry", json.loads(r[0])) for r in rows]

    def _list_subkeys(self, parts: _Key) -> list[str]:
        rows = self.store.db.all(
            "SELECT subpath FROM agent_sdk_keys WHERE project_key = :p AND sdk_session_id = :s AND subpath <> '' "
            "ORDER BY subpath",
            parts.params,
        )
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------------ delete

    def _delete(self, parts: _Key) -> None:
        """One transaction: the key (a main key with its subkeys), its entries, and every session they became."""

        def body(db: "Database") -> None:
            where = "project_key = :p AND sdk_session_id = :s" + ("" if not parts.subpath else " AND subpath = :sub")
            rows = db.all(f"SELECT id, linked_session FROM agent_sdk_keys WHERE {where}", parts.params)
            for key_id, linked in rows:
                self._importers.pop(int(key_id), None)
                if linked and db.one("SELECT 1 FROM sessions WHERE id = :id", {"id": linked}):
                    delete_session_rows(db, str(linked))
                db.execute("DELETE FROM agent_sdk_entries WHERE key_id = :k", {"k": key_id}).close()
                db.execute("DELETE FROM agent_sdk_keys WHERE id = :k", {"k": key_id}).close()

        self.store.db.run_write(body, point="agent_sdk.delete")
        self.store.db.give_back_free_pages()


def _note(exc: SessionStoreError) -> str:
    """Why a key's lines no longer become a session, kept with the key."""
    if isinstance(exc, DuplicateImport):
        return f"its lines are a copy of session {exc.session_id}, imported otherwise; kept as entries only"
    return f"{exc}; kept as entries only"[:500]


def _uuid_of(entry: Any) -> str | None:
    """The entry's idempotency key: its `uuid` when it is a non-empty string."""
    value = entry.get("uuid") if isinstance(entry, dict) else None
    return value if isinstance(value, str) and value else None


def _locked_key(db: "Database", parts: _Key) -> _KeyRow:
    """The key's row, created if new, locked for this write (PostgreSQL: FOR UPDATE; SQLite writes take turns)."""
    db.execute(
        "INSERT INTO agent_sdk_keys (project_key, sdk_session_id, subpath, mtime_ms, entry_count) "
        "VALUES (:p, :s, :sub, 0, 0) ON CONFLICT (owner, project_key, sdk_session_id, subpath) DO NOTHING",
        parts.params,
    ).close()
    lock = "" if db.is_sqlite else " FOR UPDATE"
    row = db.one(
        "SELECT id, mtime_ms, entry_count, summary_json, linked_session, import_note FROM agent_sdk_keys "
        f"WHERE project_key = :p AND sdk_session_id = :s AND subpath = :sub{lock}",
        parts.params,
    )
    return _KeyRow(int(row[0]), int(row[1]), int(row[2]), row[3], row[4], row[5])


def _fresh(db: "Database", row: _KeyRow, batch: list[tuple[str | None, str, Any]]) -> list[tuple[str | None, str, Any]]:
    """The batch without the entries whose uuid the key holds already (or that came earlier in the batch).

    A batch the key holds whole already, in order (the SDK retrying a batch whose append did land,
    or a replay of one) adds nothing at all, its entries without a uuid included.
    """
    if _stored_whole(db, row, batch):
        return []
    uuids = list(dict.fromkeys(u for u, _, _ in batch if u is not None))
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
    fresh = []
    for item in batch:
        uuid = item[0]
        if uuid is not None:
            if uuid in stored:
                continue
            stored.add(uuid)
        fresh.append(item)
    return fresh


def _stored_whole(db: "Database", row: _KeyRow, batch: list[tuple[str | None, str, Any]]) -> bool:
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
