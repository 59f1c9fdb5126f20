"""The `store_url` fixture's copies of a migrated template are the store a first open would make.

Most tests get their store as a copy of one migrated per test process (tests/conftest.py
`Templates`); a copy that differed from a store migrated in place (a policy, a forced row-level
security flag, a function's search path or a row lost in the dump and replay) would have every
one of those tests run against another schema than users get.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sessionstore import SessionStore
from sessionstore.storage.engine.db import make_engine
from tests.conftest import ENGINES, PG_URL, Templates, _pg_schema_url

#: What a PostgreSQL schema holds, each row with the schema's name replaced by `S`.
PG_CATALOGUE = {
    "columns": "SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity "
    "FROM information_schema.columns WHERE table_schema = current_schema()",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()",
    "constraints": "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE connamespace = current_schema()::regnamespace",
    "policies": "SELECT tablename, policyname, cmd, qual, with_check FROM pg_policies WHERE schemaname = current_schema()",
    "row_security": "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
    "WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'",
    "triggers": "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace",
    "functions": "SELECT proname, pg_get_functiondef(oid) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace",
    "sequences": "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = current_schema()",
    "revision": "SELECT version_num FROM alembic_version",
}


def _pg_catalogue(url: str) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            schema = conn.execute(sa.text("SELECT current_schema()")).scalar_one()
            return {
                name: sorted(
                    tuple(str(v).replace(schema, "S") if v is not None else None for v in row)
                    for row in conn.execute(sa.text(sql))
                )
                for name, sql in PG_CATALOGUE.items()
            }
    finally:
        engine.dispose()


def _sqlite_catalogue(url: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        return sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_template_copy_holds_the_schema_a_first_open_makes(engine: str, templates: Templates, tmp_path: Path) -> None:
    if engine == "sqlite":
        copy_url, fresh_url = templates.sqlite(tmp_path / "copy.db"), f"sqlite:///{tmp_path / 'fresh.db'}"
        SessionStore.open(fresh_url).close()
        assert _sqlite_catalogue(copy_url) == _sqlite_catalogue(fresh_url)
        _assert_usable(copy_url)
        return
    if not PG_URL:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    for copy_url in templates.postgresql(PG_URL):
        for fresh_url in _pg_schema_url(PG_URL):
            SessionStore.open(fresh_url).close()
            copy, fresh = _pg_catalogue(copy_url), _pg_catalogue(fresh_url)
            assert copy["policies"] and copy["row_security"] and copy["functions"]
            assert copy == fresh
        _assert_usable(copy_url)


def _assert_usable(url: str) -> None:
    with SessionStore.open(url) as store:
        session = store.create_session(title="from a template")
        session.append({"role": "user", "content": "hello"})
        assert store.get(session.id).active_view() == [{"role": "user", "content": "hello"}]
