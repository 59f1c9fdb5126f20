"""`SessionStore`: open a database (upgrading its schema), create and find sessions."""

from __future__ import annotations

import time
import uuid as uuid_mod
from typing import TYPE_CHECKING, Any

from .config import Config, default_db_url
from .db import Database, open_database, shown_url
from .errors import ReadOnlySession, SessionNotFound, SessionStoreError
from .migrate import SCHEMA_HEAD, ensure_current, stored_revision
from .resolve import resolve_session_id
from .session import Session

if TYPE_CHECKING:
    from .search import Hit

#: Largest context window the sessions table holds (a 32-bit INTEGER on PostgreSQL).
MAX_CONTEXT_WINDOW = 2**31 - 1
SESSION_COLUMNS = "id, title, cwd, model, context_window, created_at, updated_at, parent_id, metadata_json, owner, host"


class SessionStore:
    """A database of sessions. Open with `SessionStore.open(url)`; close when done."""

    def __init__(self, url: str, db: Database, config: Config):
        self.url = url
        self.db = db
        self.config = config

    @classmethod
    def open(cls, url: str | None = None, *, config: Config | None = None, upgrade: bool = True) -> "SessionStore":
        """Open (creating if needed) the store at `url`, default `SESSIONSTORE_DB_URL` or XDG."""
        config = config or Config.from_env()
        url = url or default_db_url()
        db = open_database(url, busy_timeout_ms=config.busy_timeout_ms, write_retries=config.write_retries)
        if upgrade:
            current = stored_revision(db.conn)
            if current != SCHEMA_HEAD:
                try:
                    ensure_current(db.engine, current, known=True)
                except BaseException:
                    db.close()
                    db.engine.dispose()
                    raise
        return cls(url, db, config)

    def close(self) -> None:
        """Release the connection and the engine."""
        self.db.close()
        self.db.engine.dispose()

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
            return str(db.one(
                "INSERT INTO sessions (id, title, cwd, model, context_window, created_at, updated_at, "
                "parent_id, metadata_json, host) VALUES (:id, :title, :cwd, :model, :context_window, "
                ":created_at, :updated_at, :parent_id, :metadata_json, :host) RETURNING owner",
                row,
            )[0])

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
        last = "(SELECT MAX(x.seq) FROM messages x WHERE x.session_id = s.id)"
        rows = self.db.all(
            "SELECT * FROM (SELECT s.id, s.title, s.cwd, s.model, s.context_window, s.created_at, "
            "COALESCE(m.written_at, s.updated_at) AS updated, s.parent_id, s.metadata_json, "
            "COALESCE(m.seq, s.last_seq), COALESCE(m.view_tokens, s.view_tokens), s.view_version, "
            "i.source, i.source_key, s.owner, s.host "
            f"FROM sessions s LEFT JOIN messages m ON m.session_id = s.id AND m.seq > s.last_seq AND m.seq = {last} "
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
        return out

    def search(self, query: str, **filters: Any) -> "list[Hit]":
        """Messages of every session matching `query`, best first; filters: session, role, since, cwd, in_, limit."""
        from .search import Filters, search

        return search(self, query, Filters(**filters))

    def delete(self, session_id: str) -> None:
        """Delete a session and everything recorded in it (explicit and whole)."""
        session = self.get(session_id)

        def remove(db: Database) -> None:
            for table in ("view_entries", "compactions", "replacements", "session_memory", "pipeline_states",
                          "source_lines", "imports", "messages"):
                db.execute(f"DELETE FROM {table} WHERE session_id = :id", {"id": session.id}).close()
            db.execute("UPDATE sessions SET parent_id = NULL WHERE parent_id = :id", {"id": session.id}).close()
            cur = db.execute("DELETE FROM sessions WHERE id = :id", {"id": session.id})
            deleted = cur.rowcount
            cur.close()
            if deleted != 1:  # row-level security: a session shared with this role is not its to delete
                raise ReadOnlySession(f"session {session.id} is not yours to delete (it is shared with you)")

        self.db.run_write(remove, session_id=session.id)


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
