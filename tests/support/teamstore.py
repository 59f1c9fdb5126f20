"""Test-only: a team store as docs/teams.md sets one up, with the roles an attacker can be.

A new database; its tables owned by an ordinary owner role (`db upgrade` as the owner) or by the
superuser the tests were given (`db upgrade` as `postgres`, the most common first try). Roles,
each new (uuid-suffixed: roles are cluster-global and other tests run beside these) and dropped
afterwards: alice (granted; owns the sessions), bob (granted; a read share of one of alice's sessions
and a write share of another), carol (never granted) and dave (granted, then revoked). Alice has an
unshared session holding a secret and a spilled blob, and an import lock on a file named after her word.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import psycopg

from sessionstore import SessionStore
from sessionstore.storage.codecs.blobs import put_blob
from sessionstore.storage.team.ownership import grant, revoke, share

from .claude_lines import exchange
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
    """Under scripts/mutate_policies.py only: row-level security clauses made permissive, as a bad revision would
    (`TABLE:POLICY:using|check`, several separated by commas)."""
    wanted = os.environ.get(POLICY_BREAK, "")
    if not wanted:
        return
    with psycopg.connect(url_for(admin_url(base), database=database), autocommit=True) as conn:
        for item in wanted.split(","):
            table, policy, clause = item.split(":")
            conn.execute(
                f'ALTER POLICY "{policy}" ON "{table}" {"USING" if clause == "using" else "WITH CHECK"} (true)'
            )


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
        # A blob no replacement holds on to any more (deleting a session keeps its spilled blobs): no foreign key
        # keeps a permissive delete policy off it.
        store.db.run_write(lambda db: put_blob(db, SPILLED + b" of a deleted session"))
        store.db.run_write(lambda db: db.execute(LOCK_ROW, {"name": f"{WORD}-{secret.id}.jsonl"}).close())
        _fill_every_table(team, store, secret)
        readable = store.create_session(title="shared to read")
        readable.append({"role": "user", "content": "bob may read this"})
        team.read_shared = readable.id
        writable = store.create_session(title="shared to write")
        writable.append({"role": "user", "content": "bob may append here"})
        writable.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        team.write_shared = writable.id
        store.db.run_write(  # a replacement alice wrote, in the session bob may write: his to read, not to change
            lambda db: db.execute(
                "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, original_size, created_at) "
                "VALUES (:s, 'toolu_alices', 'cleared', 'alice cleared this', 1, 0)",
                {"s": writable.id},
            ).close(),
            session_id=writable.id,
        )
        share(store, readable.id, team.bob, read_only=True)
        share(store, writable.id, team.bob)
        assert store.search(WORD), "alice's own search finds her word"
        # After the search: a session of hers whose one message nothing derived names yet (no search row, no
        # mark, no usage row), so a row claimed into it meets no key of hers and only a policy may refuse it.
        untouched = store.create_session(title="alice's untouched session")
        untouched.append({"role": "user", "content": f"{WORD} not indexed yet"})
        team.extra["untouched"] = untouched.id
        team.extra["sessions"].append(untouched.id)
    with SessionStore.open(team.url(team.bob)) as store:  # bob's own session, to move rows into or out of
        own = store.create_session(title="bob's own")
        own.append({"role": "user", "content": "bob's own message"})  # seq 1, which his claimed rows may name
        team.extra["bob_session"] = own.id
    with SessionStore.open(team.url(None if team.superuser_owned else team.owner)) as store:
        revoke(store, team.dave)


#: Tool output that makes a view worth compacting.
FILLER = "a long line of tool output that makes the view worth compacting\n" * 60


def _fill_every_table(team: Team, store: SessionStore, secret: Any) -> None:
    """Alice's unshared data in every table under row-level security: a compaction and a pin of the secret
    session, its notes and pipeline state, a fork of it (shared with dave only), an imported transcript with
    usage, counted, and an Agent SDK key.

    So a policy made permissive on any table exposes a row of hers (scripts/mutate_policies.py checks it;
    tests/attack/test_catalogue.py fails for a table where she has none). The sessions made here are in
    `team.extra["sessions"]`, which the attacker looks for too.
    """
    import asyncio
    import tempfile

    from sessionstore.compaction.engine import compact
    from sessionstore.integrations.agent_sdk import AgentSdkStore
    from sessionstore.interchange.importing import import_file
    from sessionstore.storage.write.memory import save_memory
    from sessionstore.usage import usage_report

    first = secret.transcript().__next__()
    secret.pin(first.uuid)
    secret.append({"role": "user", "content": f"read the {WORD} config"})
    secret.append({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]})
    secret.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": FILLER}]})
    secret.append({"role": "assistant", "content": "read it"})
    compact(secret)
    save_memory(secret, f"notes on {WORD}", covers_seq=1, covers_uuid=first.uuid, tokens=10, tool_calls=0)
    store.db.run_write(
        lambda db: db.execute(
            "INSERT INTO pipeline_states (session_id, view_version, scanned, state_json, saved_at) "
            "VALUES (:id, 1, 1, '{}', 0)",
            {"id": secret.id},
        ).close()
    )
    fork = secret.fork()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{WORD}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in _claude_lines("alice-source-1")))
        imported = str(import_file(store, str(path)).session_id)
    sdk_session = str(uuid.uuid4())
    adapter = AgentSdkStore(store, import_after=None)
    try:
        key = {"project_key": "alice-project", "session_id": sdk_session}
        asyncio.run(adapter.append(key, _claude_lines(sdk_session)))  # type: ignore[arg-type]
        adapter.flush_sync()
    finally:
        adapter.close()
    share(store, fork.id, team.dave, read_only=True)  # a share row of hers that bob's profiles must not see
    usage_report(store)  # the usage rows are counted when a report first reads them
    store.db.run_write(  # written by SQLite's tail check only; under row-level security on PostgreSQL all the same
        lambda db: db.execute(
            "INSERT INTO usage_state (name, last_rowid, session_id, seq) VALUES ('tail', 1, :id, 1)", {"id": secret.id}
        ).close()
    )
    team.extra["sessions"] = [fork.id, imported, sdk_session]
    team.extra["sdk_key_id"] = int(
        store.db.one("SELECT id FROM agent_sdk_keys WHERE sdk_session_id = :s", {"s": sdk_session})[0]
    )


def _claude_lines(source_id: str) -> list[dict[str, Any]]:
    """A Claude Code user line and an assistant line with usage, both holding alice's word."""
    return exchange(
        source_id,
        f"{WORD}: the deploy key",
        f"{WORD} noted",
        cwd="/home/alice/secret-project",
        message_id=f"msg_{source_id}",
        usage={"input_tokens": 10, "output_tokens": 2},
    )
