"""Under row-level security, the per-call reads stay index probes: nothing reads a whole session.

PostgreSQL will not use a qual that holds a correlated subquery as an index condition on a table
with policies (the subquery is not leakproof), so `m.seq = (SELECT MAX(x.seq) ... WHERE x.session_id
= s.id)` read every message of the session on each resume, model call and listing, only for an
ordinary role (a superuser bypasses the policies; the rest of the suite connects as one). Each
statement the API runs for the session state, the session list and the browse list is explained
with ANALYZE, as an ordinary role that owns the store, and the rows it read from `messages` counted.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import psycopg
import pytest

from sessionstore import SessionStore
from sessionstore.storage.engine.db import Database
from sessionstore.storage.read.paging import list_sessions, session_row
from sessionstore.storage.records.state import load_state
from tests.conftest import PG_URL
from tests.support.pgadmin import admin_url, url_for

pytestmark = pytest.mark.skipif(
    not PG_URL, reason="row-level security needs SESSIONSTORE_TEST_PG_URL (.ci/run sets it)"
)

MESSAGES = 300
#: Rows of `messages` a per-session probe may read: the last message (and its neighbour, for a backward scan).
PROBE_ROWS = 2


@pytest.fixture
def owner_url() -> Iterator[str]:
    """A store in its own schema, owned by a new ordinary role (policies bind it: FORCE), as that role."""
    tag = uuid.uuid4().hex[:10]
    role, schema = f"rlsplan_{tag}", f"rlsplan_{tag}"
    admin = admin_url(PG_URL or "")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOBYPASSRLS')
        conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"')
    try:
        yield f"{url_for(PG_URL or '', user=role)}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP OWNED BY "{role}" CASCADE')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


class Recorder:
    """The SELECT statements (with their parameters) a block of API calls runs on one Database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.statements: list[tuple[str, dict[str, Any]]] = []
        self._execute = db.execute

    def __enter__(self) -> "Recorder":
        def execute(statement: str, params: dict[str, Any] | None = None) -> Any:
            if statement.lstrip().upper().startswith("SELECT"):
                self.statements.append((statement, dict(params or {})))
            return self._execute(statement, params)

        self.db.execute = execute  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.db.execute


def _message_rows(plan: dict[str, Any]) -> int:
    """Rows every scan of `messages` in a plan read (kept, plus removed by a filter), over all its loops."""
    own = 0
    if plan.get("Relation Name") == "messages":
        loops = int(plan.get("Actual Loops", 1))
        own = (int(plan.get("Actual Rows", 0)) + int(plan.get("Rows Removed by Filter", 0))) * loops
    return own + sum(_message_rows(child) for child in plan.get("Plans", []))


def _rows_read(db: Database, statement: str, params: dict[str, Any]) -> int:
    (doc,) = db.one("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)
    return _message_rows(doc[0]["Plan"])


def _store_with_sessions(url: str) -> tuple[SessionStore, list[str]]:
    store = SessionStore.open(url)
    ids = []
    for k in range(2):
        session = store.create_session(title=f"s{k}")
        for i in range(MESSAGES):  # one by one: appends do not write the session row (its checkpoint stays at 0)
            session.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"})
        ids.append(session.id)
    store.db.execute("ANALYZE messages, sessions")  # this store's tables: others' schemas are dropped meanwhile
    return store, ids


def test_the_session_state_reads_one_message_under_row_level_security(owner_url: str) -> None:
    store, ids = _store_with_sessions(owner_url)
    try:
        assert store.db.one("SELECT relforcerowsecurity FROM pg_class WHERE oid = 'messages'::regclass")[0]
        with Recorder(store.db) as rec:
            state = load_state(store.db, ids[0])
        assert state.last_seq == MESSAGES
        assert rec.statements
        for statement, params in rec.statements:
            assert _rows_read(store.db, statement, params) <= PROBE_ROWS, statement
    finally:
        store.close()


def test_listing_sessions_reads_one_message_a_session_under_row_level_security(owner_url: str) -> None:
    store, ids = _store_with_sessions(owner_url)
    try:
        with Recorder(store.db) as rec:
            listed = store.list()
            page = list_sessions(store.db, limit=10)
            one = session_row(store.db, ids[0])
        assert {s["id"] for s in listed} == set(ids)
        assert all(s["messages"] == MESSAGES for s in listed)
        assert len(page) == 2 and one is not None
        heavy = [(s, n) for s, p in rec.statements if (n := _rows_read(store.db, s, p)) > PROBE_ROWS * len(ids)]
        assert not heavy, heavy
    finally:
        store.close()
