"""Alembic, driven from Python: upgrade on open, and the `db` CLI commands."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine

from .errors import MigrationError

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str | None = None) -> AlembicConfig:
    """An Alembic config pointing at the bundled migrations (no alembic.ini needed)."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest revision shipped with this version of sessionstore."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise MigrationError("no migrations found")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at (None when empty)."""
    return MigrationContext.configure(connection).get_current_revision()


def has_user_tables(connection: Connection) -> bool:
    """True when the database holds sessionstore data (not just an empty file)."""
    return "sessions" in inspect(connection).get_table_names()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to `revision` in one transaction."""
    cfg = alembic_config()
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    except Exception as exc:
        raise MigrationError(f"could not upgrade the database to {revision}: {exc}") from exc


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Take the database back to `revision` in one transaction."""
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def ensure_current(engine: Engine) -> bool:
    """Upgrade an empty or older database to head; True when an upgrade ran."""
    with engine.connect() as conn:
        current = current_revision(conn)
        conn.rollback()
    head = head_revision()
    if current == head:
        return False
    if current is not None and current not in _known_revisions():
        raise MigrationError(
            f"the database is at revision {current}, which this sessionstore does not know "
            "(was it written by a newer version?)"
        )
    upgrade(engine)
    return True


def _known_revisions() -> set[str]:
    """Every revision id shipped with this version."""
    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}
