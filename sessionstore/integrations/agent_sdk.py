"""The Claude Agent SDK's `SessionStore`, kept in a sessionstore database.

    from claude_agent_sdk import ClaudeAgentOptions
    from sessionstore.integrations.agent_sdk import AgentSdkStore
    options = ClaudeAgentOptions(session_store=AgentSdkStore.open("sqlite:///sessions.db"))

Every entry the SDK appends is kept exactly (`agent_sdk_entries`, in append order; an entry whose
`uuid` the key holds already is not added again, as the SDK retries failed batches), so `load`
gives back what was appended. An append is one short transaction: the entries, the key's write
time and the SDK's `fold_session_summary` output, persisted verbatim (`list_session_summaries`
returns it; its `mtime` is the key's write time, the clock `list_sessions` shows).

The entries that are Claude Code transcript lines also become a session, exactly as `sessionstore
import claude-code` makes one of the same file (`sdk_entries.catch_up`): once this adapter's
appends pause for `QUIET` seconds, a background thread feeds each appended key's new entries, as
the next lines of its transcript, through that importer's interpreter and writer. `flush()` does
it now, `close()` before closing; any `sessionstore` command that opens the store writable does it
first. So `history`, `search`, `recall`, `fork`, `export` and ownership work on SDK sessions; a
subagent subpath becomes a subagent session linked to its parent. `delete` of a main key removes
its subkeys, their entries and sessions.

The database work runs off the event loop (`asyncio.to_thread`); calls on one adapter take turns
on its one connection. Two processes appending to one key take turns on the key's row.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
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

from sessionstore.integrations.sdk_entries import (
    POINT,
    AgentSdkStoreError,
    Importers,
    Key,
    append_entries,
    catch_up,
    entry_line,
    uuid_of,
)
from sessionstore.storage.codecs.fastjson import loads_stored
from sessionstore.storage.core.gcpause import gc_paused
from sessionstore.storage.store import SessionStore, delete_session_rows

if TYPE_CHECKING:
    from sessionstore.storage.engine.db import Database

__all__ = ["AgentSdkStore", "AgentSdkStoreError", "entry_line"]

log = logging.getLogger(__name__)

#: Seconds without an append after which the adapter imports what was appended into the sessions.
QUIET = 0.25


class _CatchUp(threading.Thread):
    """Imports the adapter's appended keys into their sessions once its appends pause (`import_after` seconds).

    Between the agent's turns, so an append never waits for an import it did not need; a failure
    leaves the entries kept and their keys pending (the next flush, close or command retries) and
    is logged once per kind of error.
    """

    def __init__(self, store: SessionStore, importers: Importers, quiet: float) -> None:
        super().__init__(name="sessionstore-agent-sdk-catch-up", daemon=True)
        self.store = store
        self.importers = importers
        self.quiet = quiet
        self._cond = threading.Condition()
        self._keys: set[int] = set()
        self._due = 0.0
        self._busy = False
        self._stopped = False
        self._warned: set[str] = set()

    def poke(self, key_ids: list[int]) -> None:
        """Keys just appended to: import them after the next pause."""
        with self._cond:
            self._keys.update(key_ids)
            self._due = time.monotonic() + self.quiet
            self._cond.notify_all()

    def run(self) -> None:
        """Wait for a pause with keys pending, import them, repeat until stopped."""
        while True:
            with self._cond:
                while not self._stopped and (not self._keys or time.monotonic() < self._due):
                    self._cond.wait(None if not self._keys else max(self._due - time.monotonic(), 0.001))
                if self._stopped:
                    return
                keys, self._busy = sorted(self._keys), True
                self._keys.clear()
            try:
                if not self.store.closed:
                    catch_up(self.store, self.importers, keys)
            except Exception as exc:  # the entries are kept and stay pending: flush, close or a command retries
                if not self.store.closed:  # the caller closed its store under us: the next reader imports them
                    self._warn(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def settle(self) -> None:
        """Forget the keys waiting for a pause (the caller imports them now) and wait out an import under way."""
        with self._cond:
            self._keys.clear()
            while self._busy:
                self._cond.wait()

    def stop(self) -> None:
        """End the thread after any import under way."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self.is_alive():
            self.join()

    def _warn(self, exc: Exception) -> None:
        kind = type(exc).__name__
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("Agent SDK entries kept but not yet imported into their sessions (%s: %s)", kind, exc)


class AgentSdkStore(SdkSessionStore):
    """A `claude_agent_sdk.SessionStore` on a sessionstore database (all six methods).

    Build it from an open `sessionstore.SessionStore` (which stays the caller's to close), or from a
    URL, `AgentSdkStore(url)` or `AgentSdkStore.open(url)` (the store it opens is closed by `close()`).
    """

    def __init__(
        self, store: SessionStore | str, *, owns_store: bool = False, import_after: float | None = QUIET
    ) -> None:
        if isinstance(store, str):
            store, owns_store = SessionStore.open(store), True
        self.store = store
        self._owns_store = owns_store
        #: Seconds of no append after which the background thread imports; None: only flush() and close() do.
        self.import_after = import_after
        self._importers = Importers()
        self._catch_up: _CatchUp | None = None
        self._closed = False

    @classmethod
    def open(cls, url: str | None = None, *, import_after: float | None = QUIET) -> "AgentSdkStore":
        """An adapter on the store at `url` (default: SESSIONSTORE_DB_URL, else SQLite under the XDG data dir)."""
        return cls(SessionStore.open(url), owns_store=True, import_after=import_after)

    def close(self) -> None:
        """Import what is pending into the sessions, then close the store when this adapter opened it."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._catch_up is not None:
                self._catch_up.stop()
            self.flush_sync()
        finally:
            self._importers.clear()
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> "AgentSdkStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def flush(self) -> int:
        """Import every pending entry (this role's keys) into its session now; how many keys moved."""
        return await asyncio.to_thread(self.flush_sync)

    def flush_sync(self) -> int:
        """`flush` in the calling thread."""
        if self._catch_up is not None:
            self._catch_up.settle()
        if self.store.closed:
            return 0
        return catch_up(self.store, self._importers)

    # ------------------------------------------------------------------ the six methods

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Keep a batch of entries (retried uuids skipped); its Claude Code lines are imported after the next pause."""
        parts = Key.of(key)
        if entries:
            await asyncio.to_thread(self.append_sync, parts, key, list(entries))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry of the key in append order, deep-equal to what was appended; None for a key never written."""
        return await asyncio.to_thread(self.load_sync, Key.of(key))

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main keys with their write times (epoch ms)."""
        return await asyncio.to_thread(self._list_sessions, project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The project's folded summaries, as the appends persisted them."""
        return await asyncio.to_thread(self._list_summaries, project_key)

    async def delete(self, key: SessionKey) -> None:
        """Delete a key (a main key: with its subkeys), its entries and the sessions they became."""
        await asyncio.to_thread(self._delete, Key.of(key))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a session."""
        return await asyncio.to_thread(self._list_subkeys, Key.of(key))

    # ------------------------------------------------------------------ append

    def append_sync(self, parts: Key, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """`append` in the calling thread: one write transaction (named `agent_sdk.append` for fault points)."""
        batch = [(uuid_of(e), entry_line(e), e) for e in entries]
        with gc_paused():
            key_id = self.store.db.run_write(
                lambda db: append_entries(db, parts, key, batch, cast("Any", fold_session_summary)), point=POINT
            )
        if key_id is not None and self.import_after is not None:
            self._catch_up_thread().poke([key_id])

    def _catch_up_thread(self) -> _CatchUp:
        """The adapter's catch-up thread, started on the first append."""
        if self._catch_up is None:
            self._catch_up = _CatchUp(
                self.store, self._importers, self.import_after if self.import_after is not None else QUIET
            )
            self._catch_up.start()
        return self._catch_up

    # ------------------------------------------------------------------ reads

    def load_sync(self, parts: Key) -> list[SessionStoreEntry] | None:
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

    def _list_subkeys(self, parts: Key) -> list[str]:
        rows = self.store.db.all(
            "SELECT subpath FROM agent_sdk_keys WHERE project_key = :p AND sdk_session_id = :s AND subpath <> '' "
            "ORDER BY subpath",
            parts.params,
        )
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------------ delete

    def _delete(self, parts: Key) -> None:
        """One transaction: the key (a main key with its subkeys), its entries, and every session they became."""

        def body(db: "Database") -> None:
            where = "project_key = :p AND sdk_session_id = :s" + ("" if not parts.subpath else " AND subpath = :sub")
            rows = db.all(f"SELECT id, linked_session FROM agent_sdk_keys WHERE {where}", parts.params)
            for key_id, linked in rows:
                self._importers.forget(int(key_id))
                if linked and db.one("SELECT 1 FROM sessions WHERE id = :id", {"id": linked}):
                    delete_session_rows(db, str(linked))
                db.execute("DELETE FROM agent_sdk_entries WHERE key_id = :k", {"k": key_id}).close()
                db.execute("DELETE FROM agent_sdk_keys WHERE id = :k", {"k": key_id}).close()

        self.store.db.run_write(body, point="agent_sdk.delete")
        self.store.db.give_back_free_pages()
