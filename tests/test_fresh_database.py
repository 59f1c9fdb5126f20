"""`db upgrade` on a brand-new PostgreSQL database is one transaction: it reaches head (creating
pg_trgm inside it, or warning how to add it), and a revision failing half-way leaves a fresh or a
filled database exactly as it was (catalogue and rows).

A schema of the shared test database cannot show this (pg_trgm is already installed there, and
the CLI's pooled connection is what went wrong), so each test creates its own database.
"""

from __future__ import annotations

import logging
from typing import Iterator

import pytest

from sessionstore import SessionStore
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import current_revision, head_revision
from tests.conftest import PG_URL
from tests.support.cli import run_cli
from tests.support.pgadmin import admin_execute, catalogue, create_role, drop_role, fresh_database, url_for
from tests.support.revisions import use_test_revisions

pytestmark = pytest.mark.skipif(not PG_URL, reason="needs SESSIONSTORE_TEST_PG_URL (a PostgreSQL superuser)")


@pytest.fixture
def fresh_db() -> Iterator[str]:
    """The name of a new database without pg_trgm."""
    with fresh_database(PG_URL or "") as name:
        yield name


def _url(database: str, user: str | None = None) -> str:
    return url_for(PG_URL or "", database=database, user=user)


def _revision(url: str) -> str | None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return current_revision(conn)
    finally:
        engine.dispose()


def _works(url: str) -> None:
    """A store on the upgraded database records and finds a message."""
    with SessionStore.open(url) as store:
        session = store.create_session(title="fresh")
        session.append({"role": "user", "content": "a needle in the fresh database"})
        assert [h.session for h in store.search("needle")] == [session.id]


def test_db_upgrade_on_a_fresh_database_creates_pg_trgm_in_its_transaction(
    capsys: pytest.CaptureFixture[str], fresh_db: str
) -> None:
    url = _url(fresh_db)
    assert ("pg_trgm",) not in catalogue(PG_URL or "", fresh_db)["extensions"]
    result = run_cli(capsys, "db", "upgrade", "--db", url)
    assert result.code == 0, result.err
    assert _revision(url) == head_revision()
    cat = catalogue(PG_URL or "", fresh_db)
    assert ("pg_trgm",) in cat["extensions"]
    assert "ix_search_docs_body_trgm" in {name for name, _ in cat["indexes"]}
    _works(url)


def test_db_upgrade_on_a_fresh_database_that_has_pg_trgm(capsys: pytest.CaptureFixture[str]) -> None:
    with fresh_database(PG_URL or "", with_trgm=True) as name:
        url = _url(name)
        result = run_cli(capsys, "db", "upgrade", "--db", url)
        assert result.code == 0, result.err
        assert _revision(url) == head_revision()
        assert "ix_search_docs_body_trgm" in {n for n, _ in catalogue(PG_URL or "", name)["indexes"]}
        _works(url)


def test_a_role_that_may_not_create_pg_trgm_upgrades_and_is_told_the_command(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    role = create_role(PG_URL or "")
    try:
        with fresh_database(PG_URL or "") as name:
            admin_execute(PG_URL or "", name, f'GRANT USAGE, CREATE ON SCHEMA public TO "{role}"')
            url = _url(name, role)
            with caplog.at_level(logging.WARNING, logger="sessionstore.migrate"):
                result = run_cli(capsys, "db", "upgrade", "--db", url)
            assert result.code == 0, result.err
            assert _revision(url) == head_revision()
            assert "CREATE EXTENSION pg_trgm" in caplog.text
            cat = catalogue(PG_URL or "", name)
            assert ("pg_trgm",) not in cat["extensions"]
            assert "ix_search_docs_body_trgm" not in {n for n, _ in cat["indexes"]}
            _works(url)
    finally:
        drop_role(PG_URL or "", role)


def test_a_revision_failing_half_way_leaves_a_fresh_database_empty(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fresh_db: str
) -> None:
    use_test_revisions(monkeypatch, "migrations", "tfail_half_way")
    before = catalogue(PG_URL or "", fresh_db)
    result = run_cli(capsys, "db", "upgrade", "--db", _url(fresh_db))
    assert result.code == 1 and "fails half-way" in result.err and "Traceback" not in result.err
    assert catalogue(PG_URL or "", fresh_db) == before


def test_a_revision_failing_half_way_leaves_a_filled_database_as_it_was(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fresh_db: str
) -> None:
    url = _url(fresh_db)
    assert run_cli(capsys, "db", "upgrade", "--db", url).code == 0
    with SessionStore.open(url) as store:
        session = store.create_session(title="kept", cwd="/w")
        session.append({"role": "user", "content": "remember the blue door"})
        session.append({"role": "assistant", "content": [{"type": "text", "text": "noted"}]})
        assert store.search("blue door")
    before = catalogue(PG_URL or "", fresh_db)
    assert before["rows"]["public.messages"] and before["rows"]["public.search_docs"]
    use_test_revisions(monkeypatch, "migrations", "tfail_half_way")
    result = run_cli(capsys, "db", "upgrade", "--db", url)
    assert result.code == 1 and "fails half-way" in result.err
    assert catalogue(PG_URL or "", fresh_db) == before
