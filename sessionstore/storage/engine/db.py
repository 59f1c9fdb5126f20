"""Engines, connections and write transactions for SQLite and PostgreSQL.

SQLAlchemy owns the engine (URL parsing, pooling, Alembic); the hot paths run
plain SQL on the DBAPI connection. SQL is written once with `:name`
parameters and translated to each driver's style, so both engines share one
code path.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar, cast

import sqlalchemy.dialects.sqlite  # noqa: F401  (imported here, not inside the first open)
from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url

from sessionstore.credentials import hide_url_credentials

from ..core.errors import (
    DatabaseUnavailable,
    ReadOnlySession,
    ReadOnlyStore,
    SessionNotFound,
    SessionStoreError,
    StoreBusy,
)
from ..core import faults
from ..codecs import textpack
from ..core.faults import fault_in

#: What a write body returns, handed back by `run_write`.
T = TypeVar("T")

_PARAM = re.compile(r"(?<![:\w]):([a-zA-Z_][a-zA-Z0-9_]*)")
#: `unpacked(m.content_json)`: a message text as JSON whether it is stored packed or not (sessionstore.storage.codecs.textpack).
_UNPACKED = re.compile(r"\bunpacked\(([\w.]+)\)")


def prepare_sqlite_file(url: str) -> None:
    """Create the SQLite file (and its folder) with owner-only permissions."""
    parsed = make_url(url)
    database = parsed.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(fd)


def _expand_home(parsed: URL) -> URL:
    """A SQLite path starting with `~` names the home folder for the driver too (it would look for a folder `~`)."""
    database = parsed.database
    if database and database.startswith("~"):
        return parsed.set(database=str(Path(database).expanduser()))
    return parsed


def make_engine(url: str, *, busy_timeout_ms: int = 10_000, read_only: bool = False) -> Engine:
    """An engine with the pragmas and transaction behaviour the design asks for (`read_only`: no write can pass)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        parsed = _expand_home(parsed)
        prepare_sqlite_file(parsed.render_as_string(hide_password=False))
        engine = create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": busy_timeout_ms / 1000},
        )
        _configure_sqlite(engine, busy_timeout_ms, read_only=read_only)
        if parsed.database and parsed.database != ":memory:":
            textpack.watch_file(str(parsed.database))
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True)
    raise SessionStoreError(
        f"unsupported database URL {shown_url(parsed.render_as_string(hide_password=False))!r}: "
        "use sqlite:///PATH or postgresql+psycopg://..."
    )


#: What to do about a database that cannot be opened, by a phrase of the driver's error.
_ADVICE = (
    (
        "file is not a database",
        "point --db (or SESSIONSTORE_DB_URL) at a sessionstore database or at a path where a new one may be created",
    ),
    ("file is encrypted", "point --db at a sessionstore database"),
    ("unable to open database file", "check that the folder exists and is writable"),
    ("is a directory", "the path is a folder: give a file path, e.g. sqlite:///FOLDER/sessions.db"),
    (
        "malformed",
        "the file is damaged: restore it from its backup (a .bak- file next to it) or recover it "
        "with `sqlite3 FILE .recover`",
    ),
    ('role "', "create that role (createuser NAME) or put an existing user in the URL"),
    ("password authentication failed", "check the user and password in the URL"),
    ('database "', "create that database (createdb NAME) or fix the database name in the URL"),
    ("refused", "is the PostgreSQL server running and reachable there? start it, or fix the host and port in the URL"),
    ("timeout", "is the PostgreSQL server running and reachable there? start it, or fix the host and port in the URL"),
    ("translate host name", "fix the host name in the URL"),
)


def shown_url(url: str) -> str:
    """The URL as messages show it: the password hidden, in the user part and in query parameters alike.

    A password with an unencoded `@` parses as part of the host, so the rendered URL goes through
    the shared URL hiding as well.
    """
    parsed = make_url(url)
    secret = {k: "***" for k in parsed.query if "password" in k.lower()}
    if secret:
        parsed = parsed.update_query_dict(secret)
    return hide_url_credentials(parsed.render_as_string(hide_password=True).replace("%2A%2A%2A", "***"))


def cannot_open(url: str, exc: BaseException) -> DatabaseUnavailable:
    """The typed error for a database that cannot be opened: the URL (password hidden), the cause, what to do."""
    try:
        shown = shown_url(url)
    except Exception:  # an unparsable URL is shown as nothing rather than risk a password
        shown = "(unparsable URL)"
    cause = " ".join(str(getattr(exc, "orig", None) or exc).split())
    if cause.startswith("connection failed: "):
        cause = cause[len("connection failed: ") :]
    lowered = cause.lower()
    advice = next(
        (text for phrase, text in _ADVICE if phrase in lowered), "check the URL given with --db or SESSIONSTORE_DB_URL"
    )
    return DatabaseUnavailable(f"cannot open database {shown}: {cause}; {advice}")


def open_database(
    url: str, *, busy_timeout_ms: int = 10_000, write_retries: int = 8, read_only: bool = False
) -> "Database":
    """An engine and its first connection, or DatabaseUnavailable saying why and what to do.

    `read_only`: the connection refuses every write by construction (SQLite `query_only`, a
    PostgreSQL session whose transactions are all READ ONLY), whatever the code above it does.
    """
    engine = None
    try:
        engine = make_engine(url, busy_timeout_ms=busy_timeout_ms, read_only=read_only)
        return Database(engine, write_retries=write_retries, read_only=read_only)
    except SessionStoreError:
        raise
    except Exception as exc:
        if engine is not None:
            engine.dispose()
        raise cannot_open(url, exc) from exc


def open_engine(url: str) -> Engine:
    """An engine whose database answered one connection (for the `db` commands), else DatabaseUnavailable."""
    db = open_database(url)
    db.close()
    return db.engine


#: Free pages a SQLite file may keep before `give_back_free_pages` returns them (a write soon reuses a few).
FREE_PAGES_KEPT = 256


def enable_wal(cur: Any, busy_timeout_ms: int) -> None:
    """Switch the database to WAL, retrying "database is locked" until the busy timeout.

    Turning a new file into WAL takes an exclusive lock, and when two processes both hold a
    shared lock and want it, SQLite answers one of them "locked" at once, without the busy
    handler (to break the deadlock); that one must simply try again once the other is done.
    """
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.1)


def _configure_sqlite(engine: Engine, busy_timeout_ms: int, *, read_only: bool = False) -> None:
    """WAL, busy timeout, foreign keys; SQLAlchemy transactions start IMMEDIATE; `query_only` when read-only."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if not read_only:
            # Takes effect in a new file (before its first table) and at the next VACUUM of an older one.
            cur.execute("PRAGMA auto_vacuum = INCREMENTAL")
        enable_wal(cur, busy_timeout_ms)
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        textpack.register(dbapi_conn)
        if read_only:
            cur.execute("PRAGMA query_only = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # A read-only connection takes no write lock (SQLite refuses IMMEDIATE under query_only).
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def restore_transactions(dbapi_conn: Any) -> None:
    """Turn a psycopg connection's autocommit off (rolling back anything open), so BEGIN means one transaction."""
    if getattr(dbapi_conn, "closed", False) or not dbapi_conn.autocommit:
        return
    try:
        dbapi_conn.rollback()
        dbapi_conn.autocommit = False
    except Exception:  # a broken connection: the pool's pre-ping replaces it
        pass


class Database:
    """One DBAPI connection with dialect-neutral SQL and retried write transactions."""

    def __init__(self, engine: Engine, *, write_retries: int = 8, read_only: bool = False):
        self.engine = engine
        self.read_only = read_only
        self.dialect = engine.dialect.name
        self.is_sqlite = self.dialect == "sqlite"
        self.write_retries = write_retries
        self._proxy = engine.raw_connection()
        self.conn: Any = cast(Any, self._proxy.driver_connection)
        if not self.is_sqlite:
            self.conn.autocommit = True
            if read_only:
                self.conn.execute("SET default_transaction_read_only = on")
        #: Held for a whole write or snapshot read, and for each `one`/`all`: threads sharing this connection (an
        #: Agent SDK adapter's catch-up thread and its `asyncio.to_thread` calls) take turns on it.
        self._lock = threading.RLock()
        self._sql_cache: dict[str, str] = {}
        self._text_packer: textpack.TextPacker | None = None
        #: The thread whose write transaction is open, else None: only that thread's nested writes join it.
        self._writer: int | None = None
        #: PostgreSQL, inside a write: the session written belongs to another role (a writable share).
        self.writing_shared = False
        #: The named write in flight (fault points are `<fault_scope>.<group>`); "" outside writes.
        self.fault_scope = ""

    def close(self) -> None:
        """Return the connection to the pool, in the transactional mode SQLAlchemy expects of it.

        A PostgreSQL connection left in autocommit would make the next `engine.begin()` on it (an
        upgrade, say) run each statement as its own transaction: not one transaction at all.
        """
        if not self.is_sqlite:
            restore_transactions(self.conn)
        self._proxy.close()

    def sql(self, statement: str) -> str:
        """The statement in this driver's parameter style, `unpacked(column)` in its SQL (cached)."""
        cached = self._sql_cache.get(statement)
        if cached is None:
            cached = statement
            if "unpacked(" in cached:
                cached = _UNPACKED.sub(lambda m: textpack.sql_expression(m.group(1), self.is_sqlite), cached)
            if not self.is_sqlite:
                cached = _PARAM.sub(r"%(\1)s", cached.replace("%", "%%"))
            self._sql_cache[statement] = cached
        return cached

    @property
    def text_packer(self) -> "textpack.TextPacker":
        """Packs message texts as this store keeps them (compressed on SQLite)."""
        if self._text_packer is None:
            self._text_packer = textpack.TextPacker(self)
        return self._text_packer

    def reset_text_packer(self) -> None:
        """Forget the text packer: a dictionary it trained was rolled back (a transaction or a savepoint)."""
        self._text_packer = None

    def cached_sql(self, name: str, build: Any) -> str:
        """A statement built once per connection by `build(self)` (hot paths with driver-specific SQL)."""
        key = "\0" + name
        cached = self._sql_cache.get(key)
        if cached is None:
            cached = self._sql_cache[key] = build(self)
        return cached

    def execute(self, statement: str, params: dict[str, Any] | None = None) -> Any:
        """Run one statement and return its cursor."""
        return self.conn.execute(self.sql(statement), params or {})

    def executemany(self, statement: str, rows: Sequence[dict[str, Any]]) -> None:
        """Run one statement for many parameter sets."""
        if len(rows) == 1:
            self.conn.execute(self.sql(statement), rows[0]).close()
        elif rows:
            cur = self.conn.cursor()
            cur.executemany(self.sql(statement), rows)
            cur.close()

    def insert_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """INSERT many rows, each a tuple of values in `columns` order.

        Positional parameters spare the driver a name lookup per value, which
        counts in bulk writes (an import binds millions of values).
        """
        if not rows:
            return
        mark = "?" if self.is_sqlite else "%s"
        statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
        cur = self.conn.cursor()
        cur.executemany(statement, rows)
        cur.close()

    def one(self, statement: str, params: dict[str, Any] | None = None) -> Any:
        """The first row, or None (never inside another thread's transaction: it waits for it to end)."""
        with self._lock:
            cur = self.execute(statement, params)
            row = cur.fetchone()
            cur.close()
        return row

    def all(self, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
        """Every row (never inside another thread's transaction: it waits for it to end)."""
        with self._lock:
            cur = self.execute(statement, params)
            rows: list[Any] = cur.fetchall()
            cur.close()
        return rows

    @contextmanager
    def read(self) -> Iterator["Database"]:
        """A consistent read: a snapshot transaction over several statements."""
        with self._lock:
            if self._writing_here():
                yield self
                return
            # PostgreSQL's default READ COMMITTED gives each statement a new snapshot; a view read
            # spans several statements, so it needs one snapshot for all of them.
            self.conn.execute("BEGIN" if self.is_sqlite else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield self
            finally:
                self.conn.execute("ROLLBACK")

    def run_write(
        self,
        body: Callable[[Database], T],
        session_id: str | None = None,
        point: str = "",
        *,
        single_statement: bool = False,
    ) -> T:
        """Run `body(db)` in a write transaction, retrying transient lock errors a bounded number of times.

        `point` names the write for fault injection (see faults.py); a nested call keeps the outer name.
        `single_statement`: the body runs one statement, which is its own transaction (autocommit),
        so no BEGIN/COMMIT round trips are spent on it (unless a fault point is armed, which needs them).
        """
        if self.read_only:
            raise ReadOnlyStore("this store was opened read-only: nothing can be written through it")
        delay = 0.005
        for attempt in range(self.write_retries + 1):
            try:
                if self._writing_here():
                    return body(self)
                if single_statement and faults.TARGET is None:
                    with self._lock:
                        return body(self)
                return self._write_once(body, session_id, point)
            except Exception as exc:  # narrowed below
                if self.is_denied(exc):
                    raise ReadOnlySession(f"this role may not write there: {' '.join(str(exc).split())[:200]}") from exc
                if not self.is_transient(exc) or attempt == self.write_retries:
                    if self.is_transient(exc):
                        raise StoreBusy(f"database stayed busy after {self.write_retries} retries: {exc}") from exc
                    raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")

    def _writing_here(self) -> bool:
        """True inside a write transaction this thread opened: a nested write or read joins it.

        Another thread's open write is not this thread's: its `run_write` waits on the lock for that
        write to end and runs its own transaction, instead of running its statements inside the other's
        (which would commit or roll back with it, or run on after its COMMIT one statement at a time).
        """
        return self._writer is not None and self._writer == threading.get_ident()

    def _write_once(self, body: Callable[[Database], T], session_id: str | None, point: str = "") -> T:
        """BEGIN, body, COMMIT (ROLLBACK on any error): the append hot path, without a context manager."""
        conn = self.conn
        with self._lock:
            conn.execute("BEGIN IMMEDIATE" if self.is_sqlite else "BEGIN")
            self._writer = threading.get_ident()
            armed = self.fault_scope = point if faults.TARGET is not None else ""
            try:
                if session_id is not None and not self.is_sqlite:
                    self._lock_session(session_id)
                if armed:
                    fault_in(self, "begin")
                result = body(self)
                if armed:
                    fault_in(self, "before_commit")
                conn.execute("COMMIT")
                if armed:
                    fault_in(self, "after_commit")
                return result
            except BaseException:
                conn.execute("ROLLBACK")
                # A dictionary trained in this write is gone with it: the packer must not compress with it.
                self._text_packer = None
                raise
            finally:
                self._writer = None
                self.writing_shared = False
                self.fault_scope = ""

    def _lock_session(self, session_id: str) -> None:
        """Lock the session row for the write, and name its owner for the rows the write adds.

        Rows of a session take its owner (`sessionstore_writer()` reads the setting), so a role
        writing a session shared with it writes them as the owner's. Row-level security returns
        no row to a role that may not write the session: refused before anything is written.
        """
        row = self.one(
            "SELECT set_config('sessionstore.owner', owner, true), owner <> current_user FROM sessions "
            "WHERE id = :id FOR UPDATE",
            {"id": session_id},
        )
        if row is not None:
            self.writing_shared = bool(row[1])
        else:
            if self.one("SELECT 1 FROM sessions WHERE id = :id", {"id": session_id}) is None:
                raise SessionNotFound(f"no session {session_id!r}")
            raise ReadOnlySession(f"session {session_id} is shared with this role read-only")

    def lock_mark(self, table: str, column: str, session_id: str) -> Any:
        """PostgreSQL: lock a session's high-water-mark row in `table` for this write, creating it at 0 first; its
        row (`column`), or None when the session is gone.

        A row lock, not an advisory key: only a role that may write the session can take it, so nobody holds
        another's indexing or counting by naming a session id.
        """
        self.execute(
            f"INSERT INTO {table} (session_id, {column}) SELECT id, 0 FROM sessions WHERE id = :id "
            "ON CONFLICT (session_id) DO NOTHING",
            {"id": session_id},
        ).close()
        return self.one(f"SELECT {column} FROM {table} WHERE session_id = :id FOR UPDATE", {"id": session_id})

    def is_denied(self, exc: BaseException) -> bool:
        """PostgreSQL refused the statement by privilege or row-level security (SQLSTATE 42501)."""
        if self.is_sqlite:
            return False
        return (
            getattr(getattr(exc, "diag", None), "sqlstate", None) == "42501"
            or getattr(exc, "sqlstate", None) == "42501"
        )

    def give_back_free_pages(self) -> None:
        """SQLite: return the file's free pages to the file system once they are worth it (FREE_PAGES_KEPT).

        Rebuilding index segments and deleting sessions leave pages free that the file keeps; a store
        created with auto_vacuum INCREMENTAL (every store since revision 0016's release, and older ones
        after `db vacuum`) can drop them from its end in place, without VACUUM's rewrite. PostgreSQL and
        files without auto_vacuum: nothing.
        """
        if not self.is_sqlite or self.read_only or self._writing_here():
            return
        if int(self.one("PRAGMA freelist_count")[0]) < FREE_PAGES_KEPT:
            return
        # Its own transaction, stepped to the end: the sqlite3 module steps a statement without result
        # columns once, which frees one page; executescript runs it through.
        self.run_write(lambda db: db.conn.executescript("PRAGMA incremental_vacuum;"), single_statement=True)

    def is_transient(self, exc: BaseException) -> bool:
        """Lock contention, serialization failures and deadlocks: safe to retry."""
        text = str(exc).lower()
        if self.is_sqlite:
            return "database is locked" in text or "database is busy" in text or "database table is locked" in text
        sqlstate = getattr(getattr(exc, "diag", None), "sqlstate", None) or getattr(exc, "sqlstate", None)
        return sqlstate in {"40001", "40P01", "55P03"}
