"""A member's open transaction does not hang the owner's `db upgrade`: it waits a bounded time, then says who.

On a team PostgreSQL a member may leave `psql` in an open transaction after reading the store; that holds
an ACCESS SHARE lock on each table read, which an upgrade's `ALTER TABLE` must wait for. Without a bound
the owner's upgrade waited in silence, and every later query queued behind it.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine

from sessionstore.storage.engine.migrate import head_revision, upgrade
from tests.conftest import PG_URL
from tests.support.outside import private_env, sessionstore
from tests.support.pgadmin import admin_execute, create_role, drop_role, fresh_database, url_for

pytestmark = pytest.mark.skipif(not PG_URL, reason="PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")

#: The revision before 0022, whose first statement alters agent_sdk_keys (the table the member holds).
BEFORE = "0021"


def test_an_upgrade_behind_a_member_s_open_transaction_gives_up_and_names_it(tmp_path: Path) -> None:
    assert PG_URL
    owner, member = create_role(PG_URL, "t24uo"), create_role(PG_URL, "t24um")
    try:
        with fresh_database(PG_URL) as name:
            admin_execute(PG_URL, name, f'ALTER DATABASE "{name}" OWNER TO "{owner}"')
            admin_execute(PG_URL, name, f'ALTER SCHEMA public OWNER TO "{owner}"')
            as_owner = url_for(PG_URL, database=name, user=owner)
            engine = create_engine(as_owner)
            try:
                upgrade(engine, BEFORE, backup=False)
            finally:
                engine.dispose()
            admin_execute(
                PG_URL,
                name,
                f'GRANT USAGE ON SCHEMA public TO "{member}"',
                f'GRANT SELECT ON agent_sdk_keys TO "{member}"',
            )
            env = {**private_env(tmp_path), "SESSIONSTORE_UPGRADE_LOCK_TIMEOUT_SECONDS": "1"}
            member_url = url_for(PG_URL, database=name, user=member).replace("postgresql+psycopg://", "postgresql://")
            with psycopg.connect(member_url) as held:  # psql's default: the SELECT opens a transaction left open
                held.execute("SELECT count(*) FROM agent_sdk_keys").fetchone()
                waited = sessionstore(as_owner, env, "db", "upgrade")
                assert waited.code == 1, waited
                assert not waited.traceback, waited.err
                line = " ".join(waited.err.split())
                assert "waited 1 s for a table another connection holds" in line, waited.err
                assert f"role {member} (pid " in line and "holds agent_sdk_keys" in line, waited.err
                assert "nothing was changed" in line, waited.err
                assert f"current: {BEFORE} " in sessionstore(as_owner, env, "db", "current").out
                held.rollback()
            done = sessionstore(as_owner, env, "db", "upgrade")
            assert done.code == 0, done
            assert f"database at {head_revision()}" in done.out
    finally:
        for role in (member, owner):
            drop_role(PG_URL, role)
