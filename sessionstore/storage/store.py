"""`SessionStore`: open a database (upgrading its schema), create and find sessions."""

from __future__ import annotations

import builtins
import time
import uuid as uuid_mod
from typing import TYPE_CHECKING, Any

from .engine.config import Config, default_db_url
from .engine.db import Database, open_database, shown_url
from .core.errors import ReadOnlySession, SessionNotFound, SessionStoreError
from .engine.migrate import SCHEMA_HEAD, ensure_current, require_current, stored_revision
from .engine.resolve import resolve_session_id
from .write.session import Session
from .derived.usage_counts import release as release_usage

if TYPE_CHECKING:
    from .derived.search import Hit

#: Largest context window the sessions table holds (a 32-bit INTEGER on PostgreSQL).
MAX_CONTEXT_WINDOW = 2**31 - 1
SESSION_COLUMNS = "id, title, cwd, model, context_window, created_at, updated_at, parent_id, metadata_json, owner, host"


class SessionStore:
    """A database of sessions. Open with `SessionStore.open(url)`; close when done."""

    def __init__(self, url: str, db: Database, config: Config):
        self.url = url
        self.db = db
        self.config = config
        self._index_db: Database | None = None
        self._closed = False

    @classmethod
    def open(
        cls, url: str | None = None, *, config: Config | None = None, upgrade: bool = True, read_only: bool = False
    ) -> "SessionStore":
        """Open (creating if needed) the store at `url`, default `SESSIONSTORE_DB_URL` or XDG.

        `read_only` (every reader: the MCP server, view, search, export...): the store's connection
        refuses every write (see `open_database`); a database at an older schema revision is not
        upgraded, SchemaOutdated names `sessionstore db upgrade` instead (an empty database still
        gets its schema, through a short-lived writable connection); and only the derived search
        index is written, through a second connection that may write nothing else (`index_db`).
        """
        config = config or Config.from_env()
        url = url or default_db_url()
        db = open_database(
            url, busy_timeout_ms=config.busy_timeout_ms, write_retries=config.write_retries, read_only=read_only
        )
        if read_only or upgrade:
            current = stored_revision(db.conn)
            if current != SCHEMA_HEAD:
                try:
                    if read_only and current is not None:
                        require_current(current, shown_url(url))
                    elif read_only:
                        _create_schema(url, config)
                    elif ensure_current(db.engine, current, known=True):
                        from .derived.search import forget_cut_index

                        forget_cut_index(db, current)
                except BaseException:
                    db.close()
                    db.engine.dispose()
                    raise
        return cls(url, db, config)

    @property
    def read_only(self) -> bool:
        """True when this store's connection refuses writes."""
        return self.db.read_only

    @property
    def index_db(self) -> Database:
        """The connection that writes derived tables (search index, usage counts): the store's own, or for a
        read-only store a second one that may write only those (DERIVED_PREFIXES; enforced on SQLite)."""
        if not self.db.read_only:
            return self.db
        if self._index_db is None:
            self._index_db = open_database(
                self.url, busy_timeout_ms=self.config.busy_timeout_ms, write_retries=self.config.write_retries
            )
            if self._index_db.is_sqlite:
                self._index_db.conn.set_authorizer(_index_only)
        return self._index_db

    @property
    def closed(self) -> bool:
        """True once `close()` ran (a helper thread that outlived its store stops instead of reopening it)."""
        return self._closed

    def close(self) -> None:
        """Release the connection(s) and the engine(s)."""
        self._closed = True
        for db in (self.db, self._index_db):
            if db is not None:
                db.close()
                db.engine.dispose()
        self._index_db = None

    def __enter__(self) -> "SessionStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def display_url(self) -> str:
        """The URL with any password hidden."""
        return shown_url(self.url)

    # --------------------------------------------------------------- sessions

    def create_session(
        self,
        *,
        title: str | None = None,
        model: str | None = None,
        context_window: int | None = None,
        cwd: str | None = None,
        parent_id: str | None = None,
        session_id: str | None = None,
        host: str | None = None,
    ) -> Session:
        """Create an empty session and return its handle; it records `host` (default: this machine's)."""
        for name, value in (("title", title), ("model", model), ("cwd", cwd)):
            if value is not None and "\x00" in value:
                raise SessionStoreError(f"{name} contains a NUL character")
        for name, value, most in (("model", model, 200), ("session_id", session_id, 36), ("parent_id", parent_id, 36)):
            if value is not None and len(value) > most:
                raise SessionStoreError(f"{name} is {len(value):,} characters long; the most it may be is {most}")
        window = context_window or self.config.default_context_window
        if window <= 0:
            raise SessionStoreError("context_window must be a positive number of tokens")
        if window > MAX_CONTEXT_WINDOW:
            raise SessionStoreError(f"context_window must be at most {MAX_CONTEXT_WINDOW:,} tokens, got {window:,}")
        now = time.time()
        row = {
            "id": session_id or str(uuid_mod.uuid4()),
            "title": title,
            "cwd": cwd,
            "model": model,
            "context_window": window,
            "created_at": now,
            "updated_at": now,
            "parent_id": parent_id,
            "metadata_json": "{}",
            "host": host or self.config.host_name(),
        }

        def insert(db: Database) -> str:
            return str(
                db.one(
                    "INSERT INTO sessions (id, title, cwd, model, context_window, created_at, updated_at, "
                    "parent_id, metadata_json, host) VALUES (:id, :title, :cwd, :model, :context_window, "
                    ":created_at, :updated_at, :parent_id, :metadata_json, :host) RETURNING owner",
                    row,
                )[0]
            )

        owner = self.db.run_write(insert)
        return Session(self, {**row, "owner": owner})

    def get(self, session_id: str) -> Session:
        """The session named by its id, its source tool's id, or a unique prefix of either."""
        resolved = resolve_session_id(self.db, session_id)
        row = self.db.one(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = :id", {"id": resolved})
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return Session(self, {**_session_dict(row), "owner": row[9], "host": row[10]})

    def list(self, *, limit: int = 50, offset: int = 0, host: str | None = None) -> list[dict[str, Any]]:
        """Sessions newest first (by last update), with their counters, source ids, owner and host, one page.

        `host` keeps the sessions captured on that host. Only sessions this role may see are
        listed: the database decides (row-level security on PostgreSQL).

        Appends do not write the session row, so each session's last appended message
        (one index lookup per session) supplies its current counters and update time.
        """
        rows = self.db.all(
            "SELECT * FROM (SELECT s.id, s.title, s.cwd, s.model, s.context_window, s.created_at, "
            "COALESCE(m.written_at, s.updated_at) AS updated, s.parent_id, s.metadata_json, "
            "COALESCE(m.seq, s.last_seq), COALESCE(m.view_tokens, s.view_tokens), s.view_version, "
            "i.source, i.source_key, s.owner, s.host "
            f"FROM sessions s {_last_message_join(self.db.is_sqlite)} "
            "LEFT JOIN imports i ON i.session_id = s.id"
            f"{' WHERE s.host = :host' if host is not None else ''}"
            ") t ORDER BY updated DESC, id LIMIT :limit OFFSET :offset",
            {"limit": int(limit), "offset": int(offset), "host": host},
        )
        out = []
        for row in rows:
            info = _session_dict(row)
            info["messages"] = int(row[9])
            info["view_tokens"] = int(row[10])
            info["view_version"] = int(row[11])
            info["source"] = row[12]
            info["source_id"] = row[13]
            info["owner"] = row[14]
            info["host"] = row[15]
            out.append(info)
        return _with_lineage(self.db, out)

    def hosts(self) -> dict[str, int]:
        """Each host sessions were captured on, with how many of them this role may see (by host name)."""
        rows = self.db.all("SELECT host, COUNT(*) FROM sessions WHERE host IS NOT NULL GROUP BY host ORDER BY host")
        return {str(r[0]): int(r[1]) for r in rows}

    def search(self, query: str, **filters: Any) -> builtins.list[Hit]:
        """Messages of every session matching `query`, best first; filters: session, role, since, cwd, in_, limit."""
        from .derived.search import Filters, search

        return search(self, query, Filters(**filters))

    def delete(self, session_id: str) -> None:
        """Delete a session and everything recorded in it (explicit and whole)."""
        session = self.get(session_id)
        self.db.run_write(lambda db: delete_session_rows(db, session.id), session_id=session.id)
        self.db.give_back_free_pages()


def delete_session_rows(db: Database, session_id: str) -> None:
    """Delete one session's rows inside the caller's write transaction (`SessionStore.delete`, the SDK adapter);
    the responses its usage counted pass to the oldest remaining copy of them."""
    release_usage(db, session_id)
    for table in (
        "view_entries",
        "compactions",
        "replacements",
        "session_memory",
        "pipeline_states",
        "source_lines",
        "import_files",
        "imports",
        "messages",
    ):
        db.execute(f"DELETE FROM {table} WHERE session_id = :id", {"id": session_id}).close()
    db.execute("UPDATE sessions SET parent_id = NULL WHERE parent_id = :id", {"id": session_id}).close()
    cur = db.execute("DELETE FROM sessions WHERE id = :id", {"id": session_id})
    deleted = cur.rowcount
    cur.close()
    if deleted != 1:  # row-level security: a session shared with this role is not its to delete
        raise ReadOnlySession(f"session {session_id} is not yours to delete (it is shared with you)")


def _with_lineage(db: Database, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each listed session with `fork`: its lineage (parent, kind, point) when it is a fork, else None."""
    from .write.fork import lineages

    found = lineages(db, [r["id"] for r in rows])
    for row in rows:
        info = found.get(row["id"])
        row["fork"] = info.to_dict() if info is not None else None
    return rows


def _session_dict(row: Any) -> dict[str, Any]:
    import json

    return {
        "id": row[0],
        "title": row[1],
        "cwd": row[2],
        "model": row[3],
        "context_window": int(row[4]),
        "created_at": float(row[5]),
        "updated_at": float(row[6]),
        "parent_id": row[7],
        "metadata": json.loads(row[8] or "{}"),
    }


def _create_schema(url: str, config: Config) -> None:
    """Give an empty database its schema through a writable connection of its own (for a read-only open)."""
    writer = open_database(url, busy_timeout_ms=config.busy_timeout_ms, write_retries=config.write_retries)
    try:
        ensure_current(writer.engine, stored_revision(writer.conn), known=True)
    finally:
        writer.close()
        writer.engine.dispose()


#: The derived tables a reader may bring up to date: the search index and the usage counts.
DERIVED_PREFIXES = ("search_", "usage_")
#: SQLite authorizer actions that change a table's rows.
_ROW_WRITES = {9, 18, 23}  # SQLITE_DELETE, SQLITE_INSERT, SQLITE_UPDATE
#: Reads, transactions and functions an index catch-up needs; anything else (DDL, ATTACH...) is refused.
_INDEX_ALLOWED = {20, 21, 22, 31, 32, 33}  # READ, SELECT, TRANSACTION, FUNCTION, SAVEPOINT, RECURSIVE
_PRAGMA = 19


def _index_only(action: int, table: str | None, arg2: str | None, _db: str | None, _source: str | None) -> int:
    """SQLite authorizer of a read-only store's index connection: rows of derived tables only.

    FTS5 prepares an UPDATE of `sqlite_master` when it opens its table; that statement cannot
    change the schema while `writable_schema` is off, and pragmas that set a value are refused.
    """
    import sqlite3

    if action in _ROW_WRITES:
        allowed = (table or "").startswith(DERIVED_PREFIXES) or (table == "sqlite_master" and action == 23)
        return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY
    if action == _PRAGMA:
        return sqlite3.SQLITE_OK if arg2 is None else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _INDEX_ALLOWED else sqlite3.SQLITE_DENY


def _last_message_join(sqlite: bool) -> str:
    """`LEFT JOIN` of each session's last message as `m`, when it is past the session row's checkpoint.

    PostgreSQL takes it by a backward index scan (LATERAL ... LIMIT 1): with row-level security on,
    `m.seq = (SELECT MAX ...)` is not leakproof, so it was no index condition and every message of the
    session was read. SQLite has no LATERAL and no such rule; its plan is one index probe.
    """
    if sqlite:
        return (
            "LEFT JOIN messages m ON m.session_id = s.id AND m.seq > s.last_seq "
            "AND m.seq = (SELECT MAX(x.seq) FROM messages x WHERE x.session_id = s.id)"
        )
    return (
        "LEFT JOIN LATERAL (SELECT x.seq, x.written_at, x.view_tokens FROM messages x WHERE x.session_id = s.id "
        "ORDER BY x.seq DESC LIMIT 1) m ON m.seq > s.last_seq"
    )
