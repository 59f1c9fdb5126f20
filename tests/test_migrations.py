"""Alembic owns the schema: upgrades, downgrades, and models that match the revisions."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from sessionstore import MigrationError, SessionStore
from sessionstore.storage.db import make_engine
from sessionstore.storage.migrate import current_revision, downgrade, ensure_current, head_revision, upgrade
from sessionstore.storage.models import Base, include_name
from tests.support.cli import run_cli

TABLES = {
    "sessions",
    "messages",
    "view_entries",
    "compactions",
    "replacements",
    "blobs",
    "session_memory",
    "source_lines",
    "imports",
}


def _tables(engine) -> set[str]:
    with engine.connect() as conn:
        return set(inspect(conn).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine)
        assert TABLES <= _tables(engine)
        downgrade(engine, "base")
        assert _tables(engine) == set()
        upgrade(engine)
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        assert TABLES <= _tables(engine)
    finally:
        engine.dispose()


def test_autogenerate_finds_no_difference(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": include_name})
            diff = compare_metadata(ctx, Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


def test_open_upgrades_an_empty_database_once(store_url: str) -> None:
    with SessionStore.open(store_url) as st:
        st.create_session(title="kept")
    engine = make_engine(store_url)
    try:
        assert ensure_current(engine) is False
    finally:
        engine.dispose()
    with SessionStore.open(store_url) as st:
        assert [s["title"] for s in st.list()] == ["kept"]


def test_a_newer_unknown_revision_is_refused(store_url: str) -> None:
    with SessionStore.open(store_url):
        pass
    engine = make_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'fffffffff999'"))
        with pytest.raises(MigrationError, match="newer version"):
            ensure_current(engine)
    finally:
        engine.dispose()


def test_db_commands(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    assert run_cli(capsys, "db", "upgrade", "--db", sqlite_url).code == 0
    result = run_cli(capsys, "db", "current", "--json", "--db", sqlite_url)
    assert result.code == 0 and '"up_to_date": true' in result.out
    result = run_cli(capsys, "db", "history")
    assert result.code == 0 and "0001" in result.out


def test_schema_head_constant_matches_alembic() -> None:
    from sessionstore.storage.migrate import SCHEMA_HEAD

    assert SCHEMA_HEAD == head_revision(), (
        "update SCHEMA_HEAD in sessionstore/storage/migrate.py with each new revision"
    )
