"""A migration that fails half-way leaves every table and row as it was, and the backup is there."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import inspect

from sessionstore import MigrationError, SessionStore
from sessionstore.storage.engine import migrate
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import current_revision, head_revision
from tests.support.revisions import use_test_revisions
from tests.test_migration_safety import _assert_backup, _backups, _build, _snapshot

FAILING = "tfail_half_way"


@pytest.fixture
def failing_revision(monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped revisions plus tests/migrations/tfail_half_way.py on top; returns the shipped head."""
    return use_test_revisions(monkeypatch, "migrations", FAILING)


def _schema(url: str) -> dict[str, list[str]]:
    """Every table with its columns, in order."""
    engine = make_engine(url)
    try:
        inspector = inspect(engine)
        return {t: [c["name"] for c in inspector.get_columns(t)] for t in sorted(inspector.get_table_names())}
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    finally:
        engine.dispose()


def test_a_migration_failing_half_way_changes_nothing(
    empty_store_url: str, failing_revision: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = _build(empty_store_url, failing_revision)
    schema = _schema(empty_store_url)
    assert "session_memory" in schema and "t_half" not in schema
    with caplog.at_level(logging.WARNING, logger="sessionstore.migrate"):
        with pytest.raises(MigrationError, match="fails half-way"):
            SessionStore.open(empty_store_url)
    assert _schema(empty_store_url) == schema, "a table or column of the failed revision survived"
    assert _revision(empty_store_url) == failing_revision
    engine = make_engine(empty_store_url)
    try:
        assert _snapshot(engine) == before, "a row changed by the failed revision survived"
    finally:
        engine.dispose()
    logged = " ".join(r.getMessage() for r in caplog.records)
    if empty_store_url.startswith("sqlite"):
        _assert_backup(empty_store_url, failing_revision, before)
        assert str(_backups(empty_store_url)[0]) in logged
    else:
        assert "no automatic backup" in logged and "pg_dump" in logged


def test_the_failing_revision_is_not_shipped() -> None:
    assert not (migrate.MIGRATIONS_DIR / "versions" / "tfail_half_way.py").exists()
    assert head_revision() != FAILING
