"""Test-only: a team store as docs/teams.md sets one up, with the roles an attacker can be.

A new database; its tables owned by an ordinary owner role (`db upgrade` as the owner) or by the
superuser the tests were given (`db upgrade` as `postgres`, the most common first try). Roles,
each new (uuid-suffixed: roles are cluster-global and other tests run beside these) and dropped
afterwards: alice (granted; owns the sessions), bob (granted; a read share of one of alice's sessions
and a write share of another), carol (never granted) and dave (granted, then revoked). Alice has an
unshared session holding a secret and a spilled blob, and an import lock on a file named after her word.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import psycopg

from sessionstore import SessionStore
from sessionstore.storage.codecs.blobs import put_blob
from sessionstore.storage.team.ownership import grant, revoke, share

from .pgadmin import admin_url, create_role, drop_role, fresh_database, url_for

SECRET = "aws_secret_access_key=wJalrXUtnFEMI-K7MDENG-7f3e9"
SPILLED = b"spilled: " + SECRET.encode() + b" " + b"x" * 4000
#: A word only alice's unshared session holds.
WORD = "zebracorn"
#: The lock row an import of alice's takes (sessionstore/interchange/importing.py), here for a file named after WORD.
LOCK_ROW = "INSERT INTO import_locks (source, name) VALUES ('claude-code', :name)"


@dataclass
class Team:
    """One store and its roles; `owner` is the role that owns its tables (the superuser, or an owner role)."""

    base: str
    database: str
    owner: str
    superuser_owned: bool
    alice: str
    bob: str
    carol: str
    dave: str
    secret_session: str = ""
    read_shared: str = ""
    write_shared: str = ""
    blob: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def url(self, role: str | None) -> str:
        """The sessionstore URL of the store as `role` (None: the superuser)."""
        return url_for(self.base, database=self.database, user=role)

    def raw(self, role: str | None, *, autocommit: bool = True) -> Any:
        """A plain psycopg connection as `role` (None: the superuser)."""
        return psycopg.connect(url_for(admin_url(self.base), database=self.database, user=role), autocommit=autocommit)

    def admin_one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """One row of a superuser query."""
        with self.raw(None) as conn:
            return conn.execute(sql, params).fetchone()


#: scripts/mutate_policies.py: `TABLE:POLICY:using|check` makes that clause of that policy `true` in every team store.
POLICY_BREAK = "SESSIONSTORE_TEST_POLICY_BREAK"


def break_policy(base: str, database: str) -> None:
    """Under scripts/mutate_policies.py only: one row-level security clause made permissive, as a bad revision would."""
    wanted = os.environ.get(POLICY_BREAK, "")
    if not wanted:
        return
    table, policy, clause = wanted.split(":")
    with psycopg.connect(url_for(admin_url(base), database=database), autocommit=True) as conn:
        conn.execute(f'ALTER POLICY "{policy}" ON "{table}" {"USING" if clause == "using" else "WITH CHECK"} (true)')


@contextmanager
def team_store(base: str, *, superuser_owned: bool = False) -> Iterator[Team]:
    """A filled team store (see the module docstring); everything created is dropped afterwards."""
    roles = [create_role(base, p) for p in ("tmown", "tmalice", "tmbob", "tmcarol", "tmdave")]
    owner_role, alice, bob, carol, dave = roles
    try:
        with fresh_database(base) as name:
            if not superuser_owned:
                with psycopg.connect(url_for(admin_url(base), database=name), autocommit=True) as conn:
                    conn.execute(f'ALTER DATABASE "{name}" OWNER TO "{owner_role}"')
                    conn.execute(f'ALTER SCHEMA public OWNER TO "{owner_role}"')
            else:
                with psycopg.connect(url_for(admin_url(base), database=name), autocommit=True) as conn:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            superuser = str(
                psycopg.connect(admin_url(base), autocommit=True).execute("SELECT current_user").fetchone()[0]
            )
            team = Team(
                base, name, superuser if superuser_owned else owner_role, superuser_owned, alice, bob, carol, dave
            )
            _fill(team)
            yield team
    finally:
        for role in roles:
            drop_role(base, role)


def _fill(team: Team) -> None:
    """The owner upgrades and grants; alice records her sessions and shares two with bob; dave is revoked."""
    from sessionstore.storage.engine.migrate import upgrade
    from sessionstore.storage.engine.db import make_engine

    engine = make_engine(team.url(None if team.superuser_owned else team.owner))
    try:
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    break_policy(team.base, team.database)
    with SessionStore.open(team.url(None if team.superuser_owned else team.owner)) as store:
        for role in (team.alice, team.bob, team.dave):
            grant(store, role)
    with SessionStore.open(team.url(team.alice)) as store:
        secret = store.create_session(title="alice's keys", cwd="/home/alice/secret-project")
        secret.append({"role": "user", "content": f"{WORD} remember {SECRET}"})
        secret.append({"role": "assistant", "content": [{"type": "text", "text": "noted"}]})
        team.secret_session = secret.id

        def spill(db: Any) -> None:
            sha = put_blob(db, SPILLED)
            db.execute(
                "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
                "created_at) VALUES (:s, 'toolu_secret', 'spilled', 'preview', :sha, :n, :now)",
                {"s": secret.id, "sha": sha, "n": len(SPILLED), "now": time.time()},
            ).close()
            team.blob = sha

        store.db.run_write(spill, session_id=secret.id)
        store.db.run_write(lambda db: db.execute(LOCK_ROW, {"name": f"{WORD}-{secret.id}.jsonl"}).close())
        readable = store.create_session(title="shared to read")
        readable.append({"role": "user", "content": "bob may read this"})
        team.read_shared = readable.id
        writable = store.create_session(title="shared to write")
        writable.append({"role": "user", "content": "bob may append here"})
        writable.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        team.write_shared = writable.id
        share(store, readable.id, team.bob, read_only=True)
        share(store, writable.id, team.bob)
        assert store.search(WORD), "alice's own search finds her word"
    with SessionStore.open(team.url(None if team.superuser_owned else team.owner)) as store:
        revoke(store, team.dave)
