"""Alembic, driven from Python: upgrade on open, and the `db` CLI commands.

Alembic is imported only when a schema must be read or changed: opening a current database
compares one SELECT against SCHEMA_HEAD and never loads it (it costs about a third of startup).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import sqlite3
import time
from pathlib import Path
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from sqlalchemy.engine import Connection, Engine

from .db import restore_transactions
from ..core.errors import AccessDenied, MigrationError, SchemaOutdated
from ..core.faults import fault

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

MIGRATION_LOCK = 735501
FOREIGN_TABLES = (
    "the database has a sessions table but no sessionstore schema: it belongs to another program; "
    "point --db at a sessionstore database or at a new file"
)


def _migrations_dir() -> Path:
    """Where the Alembic scripts are: the checkout's `migrations/` or the wheel's `sessionstore/migrations`."""
    spec = importlib.util.find_spec("sessionstore.migrations")
    if spec is None or not spec.submodule_search_locations:
        raise MigrationError("the migration scripts (sessionstore.migrations) are not installed")
    return Path(next(iter(spec.submodule_search_locations)))


MIGRATIONS_DIR = _migrations_dir()

#: The newest revision shipped; opening a store compares the database against it without
#: loading the migration scripts (a test checks it equals Alembic's head).
SCHEMA_HEAD = "0025"

log = logging.getLogger("sessionstore.migrate")


def alembic_config(url: str | None = None) -> AlembicConfig:
    """An Alembic config pointing at the bundled migrations (no alembic.ini needed)."""
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest revision shipped with this version of sessionstore."""
    head = _scripts().get_current_head()
    if head is None:
        raise MigrationError("no migrations found")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None when empty)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def has_user_tables(connection: Connection) -> bool:
    """True when the database holds sessionstore data (not just an empty file)."""
    from sqlalchemy import inspect

    return "sessions" in inspect(connection).get_table_names()


def upgrade(engine: Engine, revision: str = "head", *, backup: bool = True) -> None:
    """Bring the database to `revision` in one transaction.

    A database that already holds a schema is backed up first when `backup`
    is set (SQLite: a copy next to it; PostgreSQL: a warning to use pg_dump).
    """
    if backup:
        backup_before_upgrade(engine, revision)
    _run_upgrade(engine, revision, recheck=False)


def _run_upgrade(engine: Engine, revision: str, *, recheck: bool) -> bool:
    """The upgrade transaction; with `recheck`, the revision is read again under the write lock.

    Two processes that open one new database at once both find it empty; the second must then
    see the first one's committed schema as ours (and do nothing), not as another program's.
    """
    from alembic import command

    cfg = alembic_config()
    wait = 0.0
    try:
        with one_transaction(engine) as conn:
            fault("migration.begin")
            if recheck and not _still_needs_upgrade(conn):
                return False
            cfg.attributes["connection"] = conn
            wait = _limit_lock_wait(conn)
            command.upgrade(cfg, revision)
            fault("migration.before_commit")
        fault("migration.after_commit")
        return True
    except MigrationError:
        raise
    except Exception as exc:
        if _sqlstate(exc) == LOCK_NOT_AVAILABLE:
            raise MigrationError(_lock_wait_message(engine, revision, wait)) from exc
        raise MigrationError(f"could not upgrade the database to {revision}: {exc}") from exc


#: PostgreSQL's "lock_not_available": a statement waited `lock_timeout` for a lock and gave up.
LOCK_NOT_AVAILABLE = "55P03"


def _limit_lock_wait(conn: Connection) -> float:
    """PostgreSQL: bound how long the upgrade's DDL waits for a table held by another connection.

    A member's open transaction (a `psql` session, a long export) holds its tables; without a bound
    the owner's upgrade would wait in silence behind it, and every new query would queue behind the upgrade.
    """
    from .config import Config

    seconds = Config.from_env().upgrade_lock_timeout_seconds
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = {int(seconds * 1000)}")
    return seconds


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error (wrapped by SQLAlchemy or not), else None."""
    for candidate in (exc, getattr(exc, "orig", None), exc.__cause__):
        state = getattr(getattr(candidate, "diag", None), "sqlstate", None) or getattr(candidate, "sqlstate", None)
        if state:
            return str(state)
    return None


def _lock_wait_message(engine: Engine, revision: str, seconds: float) -> str:
    """One line: the upgrade gave up waiting, nothing changed, and which roles hold the store's tables.

    pg_locks and pg_stat_activity's role and pid are visible to every role (an owner is rarely a superuser,
    so a holder's query and state are not).
    """
    holders = ""
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT a.usename, l.pid, string_agg(DISTINCT l.relation::regclass::text, ', ') FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_class c ON c.oid = l.relation "
                "WHERE l.granted AND l.locktype = 'relation' AND l.pid <> pg_backend_pid() "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND c.relnamespace = current_schema()::regnamespace "
                "GROUP BY a.usename, l.pid ORDER BY l.pid LIMIT 5"
            ).fetchall()
        holders = "; ".join(f"role {r[0]} (pid {r[1]}) holds {r[2]}" for r in rows)
    except Exception:  # noqa: BLE001 - naming the holders is a courtesy; the refusal stands without it
        holders = ""
    target = head_revision() if revision == "head" else revision
    held = f" ({holders})" if holders else ""
    return (
        f"the upgrade to {target} waited {seconds:g} s for a table another connection holds{held}; "
        "nothing was changed: try again when that transaction ends "
        "(SESSIONSTORE_UPGRADE_LOCK_TIMEOUT_SECONDS sets the wait)"
    )


def _still_needs_upgrade(conn: Connection) -> bool:
    """Under the write lock: False when another process already upgraded; refuses foreign tables."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
    current = current_revision(conn)
    if current == head_revision():
        return False
    if current is None and has_user_tables(conn):
        raise MigrationError(FOREIGN_TABLES)
    return True


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Take the database back to `revision` in one transaction."""
    from alembic import command

    cfg = alembic_config()
    with one_transaction(engine) as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


@contextmanager
def one_transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in one real transaction, committed at the end, rolled back on any error.

    A pooled PostgreSQL connection may come back in autocommit (the hot paths use it that
    way); `engine.begin()` on it would commit statement by statement, and a revision failing
    half-way would leave the database half-migrated. So autocommit is switched off first, and
    checked: an upgrade never runs outside a transaction.
    """
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            dbapi = conn.connection.driver_connection
            if dbapi is None:
                raise MigrationError("the database connection was closed before the upgrade began")
            restore_transactions(dbapi)
            if dbapi.autocommit:
                raise MigrationError("the database connection is in autocommit; the upgrade needs one transaction")
        with conn.begin():
            yield conn


def stored_revision(dbapi_conn: Any) -> str | None:
    """The database's revision read with one plain SELECT (None when the schema is absent).

    The connection must be in autocommit mode, so a failed SELECT leaves no aborted transaction.
    AccessDenied when the schema is there but this role may not read it (never granted, or revoked).
    """
    cur = dbapi_conn.cursor()
    try:
        cur.execute("SELECT version_num FROM alembic_version")
        row = cur.fetchone()
    except Exception as exc:  # no alembic_version table yet: an empty database
        if getattr(getattr(exc, "diag", None), "sqlstate", None) == "42501":
            raise _access_denied(dbapi_conn) from None
        return None
    finally:
        cur.close()
    return row[0] if row else None


def _access_denied(dbapi_conn: Any) -> AccessDenied:
    """The one line a role that may not use the store gets (PostgreSQL), naming the command that lets it in."""
    role, schema = dbapi_conn.execute("SELECT current_user, current_schema()").fetchone()
    return AccessDenied(
        f"role {role} may not use the sessionstore store in schema {schema} (never granted, or revoked): "
        f"its owner runs `sessionstore db grant {role}`"
    )


def ensure_current(engine: Engine, current: str | None = None, *, known: bool = False) -> bool:
    """Upgrade an empty or older database to head; True when an upgrade ran.

    `known` says `current` was already read by the caller (None meaning an empty database).
    """
    if not known:
        with engine.connect() as conn:
            current = current_revision(conn)
            conn.rollback()
    if current == SCHEMA_HEAD:
        return False
    head = head_revision()
    if current == head:
        return False
    if current is not None and current not in _known_revisions():
        raise MigrationError(
            f"the database is at revision {current}, which this sessionstore does not know "
            "(was it written by a newer version?)"
        )
    backup_before_upgrade(engine)
    upgraded = _run_upgrade(engine, "head", recheck=True)
    note = repack_note(current, head, engine.url.render_as_string(hide_password=True)) if upgraded else None
    if note and engine.dialect.name == "sqlite":
        log.warning("sessionstore: %s", note)
    return upgraded


def require_current(current: str | None, shown_url: str) -> None:
    """For a read-only open: nothing when the database is empty or at head, else a typed refusal.

    A reader never upgrades (that writes, and takes a backup): it names the command that does.
    """
    if current is None or current == SCHEMA_HEAD:
        return
    head = head_revision()
    if current == head:
        return
    if current not in _known_revisions():
        raise MigrationError(
            f"the database is at revision {current}, which this sessionstore does not know "
            "(was it written by a newer version?)"
        )
    raise SchemaOutdated(
        f"the database {shown_url} is at schema revision {current}, older than this sessionstore's {head}; "
        f"read-only commands do not upgrade it: run `sessionstore db upgrade --db {shown_url}` "
        "(it backs the database up first), then try again"
    )


def _known_revisions() -> set[str]:
    """Every revision id shipped with this version."""
    return {rev.revision for rev in _scripts().walk_revisions()}


def _scripts() -> ScriptDirectory:
    """Alembic's view of the bundled migration scripts."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def backup_before_upgrade(engine: Engine, revision: str = "head") -> Path | None:
    """Back up a non-empty SQLite database before it is upgraded; returns the copy's path.

    Nothing happens for an empty database or one already at `revision`. On
    PostgreSQL no copy is taken; a warning says so and suggests pg_dump.
    """
    with engine.connect() as conn:
        current = current_revision(conn)
        conn.rollback()
    if current is None:
        return None
    try:
        target = _scripts().get_revision(revision)
    except Exception:  # an unknown target: the upgrade itself reports it
        return None
    if target is None or current == target.revision:
        return None
    if engine.dialect.name != "sqlite":
        log.warning(
            "sessionstore: upgrading the PostgreSQL schema from %s to %s in one transaction; no automatic "
            "backup is taken on PostgreSQL. Keep one with pg_dump (pg_dump -Fc -f before-upgrade.dump DBNAME), "
            "run before `sessionstore db upgrade` or before opening with a newer sessionstore.",
            current,
            target.revision,
        )
        return None
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    path = sqlite_backup(Path(database).expanduser(), current)
    log.warning(
        "sessionstore: upgrading the database schema from %s to %s; backup of the old database written to %s",
        current,
        target.revision,
        path,
    )
    return path


def sqlite_backup(source: Path, from_revision: str) -> Path:
    """Copy `source` with SQLite's online backup API to `<db>.bak-<rev>-<UTC time>` (mode 0600).

    An earlier backup of the same revision (an upgrade that was interrupted, then run again) is a copy of
    the same schema holding no more than this one: it is removed once this copy is whole, so one backup
    per revision stays, not one per attempt.
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, fd = _exclusive_file(Path(f"{source}.bak-{from_revision}-{stamp}"))
    os.close(fd)
    try:
        src = sqlite3.connect(source)
        try:
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except (sqlite3.Error, OSError) as exc:
        target.unlink(missing_ok=True)
        raise MigrationError(f"could not back up {source} before upgrading it (nothing was changed): {exc}") from exc
    for earlier in source.parent.glob(f"{glob_escape(source.name)}.bak-{glob_escape(from_revision)}-*"):
        if earlier != target:
            earlier.unlink(missing_ok=True)
    return target


def glob_escape(text: str) -> str:
    """`text` matched literally by Path.glob."""
    return re.sub(r"([*?\[])", r"[\1]", text)


#: Revisions that repack rows in place on SQLite, leaving the space they took free in the file.
REPACKING = ("0010", "0012", "0013", "0014", "0015", "0016", "0017")


def repack_note(before: str | None, after: str | None, shown_url: str) -> str | None:
    """What to run after an SQLite upgrade that repacked rows (None when none did): the file keeps its size
    until `db vacuum` gives the freed pages back."""
    repacked = [r for r in REPACKING if before and before < r <= (after or "")]
    if not repacked:
        return None
    return (
        f"{'revisions' if len(repacked) > 1 else 'revision'} {', '.join(repacked)} repacked rows smaller "
        f"and left the space they took free in the file: `sessionstore db vacuum --db {shown_url}` gives it back"
    )


def _exclusive_file(path: Path) -> tuple[Path, int]:
    """Create `path` (or `path-N` if taken) owner-only; returns it with an open descriptor."""
    candidate = path
    for n in range(1, 1000):
        try:
            return candidate, os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            candidate = path.with_name(f"{path.name}-{n}")
    raise MigrationError(f"could not find a free backup file name next to {path}")
