"""Fault injection in the PostgreSQL-only writes of sharing and access: share, unshare, db grant, db revoke.

A forked child runs the write armed at each of its points and SIGKILLs itself there; the
share rows and the role's privileges must then be exactly the old ones (any point before
COMMIT) or exactly the new ones (after COMMIT). A real role is created and dropped here.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from sessionstore import SessionStore
from sessionstore.storage.core import faults
from sessionstore.storage.team import ownership
from tests.conftest import PG_URL, _pg_schema_url
from tests.support.faultcases import SHARING, case_for
from tests.support.pgadmin import create_role, drop_role
from tests.test_fault_points import _assert_killed_at, _fork

pytestmark = [
    pytest.mark.pg,
    pytest.mark.skipif(not PG_URL, reason="PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)"),
]

Setup = Callable[[SessionStore, str, str], None]
Write = Callable[[SessionStore, str, str], Any]


def _nothing(store: SessionStore, sid: str, role: str) -> None:
    return None


#: write -> (what stands before it, the write itself)
OPERATIONS: dict[str, tuple[Setup, Write]] = {
    "share": (_nothing, lambda st, sid, role: ownership.share(st, sid, role, read_only=True)),
    "unshare": (
        lambda st, sid, role: ownership.share(st, sid, role),
        lambda st, sid, role: ownership.unshare(st, sid, role),
    ),
    "grant": (_nothing, lambda st, sid, role: ownership.grant(st, role)),
    "revoke": (lambda st, sid, role: ownership.grant(st, role), lambda st, sid, role: ownership.revoke(st, role)),
}


def _state(store: SessionStore, sid: str, role: str) -> dict[str, Any]:
    """The share rows (the session named `<session>`) and what `role` may do in the store's schema."""
    schema = store.db.one("SELECT current_schema()")[0]
    privileges = store.db.all(
        "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
        "WHERE grantee = :role AND table_schema = :schema ORDER BY 1, 2",
        {"role": role, "schema": schema},
    )
    usage = store.db.one("SELECT has_schema_privilege(:role, :schema, 'USAGE')", {"role": role, "schema": schema})[0]
    shares = store.db.all("SELECT session_id, grantee, read_only FROM session_shares ORDER BY 1, 2")
    return {
        "privileges": [tuple(r) for r in privileges],
        "usage": bool(usage),
        "shares": [("<session>" if r[0] == sid else r[0], r[1], bool(r[2])) for r in shares],
    }


def test_the_sharing_writes_are_the_named_points() -> None:
    assert sorted({case_for(p) for p in faults.POINTS if p.split(".")[0] in SHARING}) == sorted(SHARING)


@pytest.mark.parametrize("write", list(OPERATIONS))
def test_every_point_of_a_sharing_write_leaves_the_old_or_the_new_state(write: str) -> None:
    assert PG_URL
    setup, run = OPERATIONS[write]
    points = [p for p in faults.POINTS if case_for(p) == write]
    assert points, f"no fault point for {write}"
    role = create_role(PG_URL, prefix="t24f")
    try:
        old, new = _run_at(write, None, role)
        assert new != old, f"the unharmed {write} changed nothing"
        for point in points:
            before, after = _run_at(write, point, role)
            assert before == old, f"{write}: the setup is not deterministic"
            expected = new if point.endswith(".after_commit") else old
            assert after == expected, f"{point}: not exactly the {'new' if expected is new else 'old'} state"
    finally:
        drop_role(PG_URL, role)


def _run_at(write: str, point: str | None, role: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Set up a fresh schema, run `write` in a child armed at `point` (None: unharmed); the state before and after."""
    assert PG_URL
    setup, run = OPERATIONS[write]
    for url in _pg_schema_url(PG_URL):
        with SessionStore.open(url) as store:
            sid = store.create_session(title="shared").id
            setup(store, sid, role)
            before = _state(store, sid, role)
        status = _fork(url, point, lambda st, sid=sid: run(st, sid, role))
        if point is None:
            assert status == 0, f"the unharmed {write} failed"
        else:
            _assert_killed_at(status, point, url)
        with SessionStore.open(url) as store:
            after = _state(store, sid, role)
            ownership.revoke(store, role)  # the schema is dropped next: the role must hold nothing in it
    return before, after
