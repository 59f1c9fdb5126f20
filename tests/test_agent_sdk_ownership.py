"""The SDK adapter on PostgreSQL as ordinary roles under row-level security.

A store owner role runs `db upgrade` and `db grant`; roles A and B (LOGIN, no superuser, no
BYPASSRLS) each use an adapter. The SDK's conformance suite passes as A with nothing skipped. A
replays a real Claude Code session (with a subagent): A owns its keys, entries and sessions, and B
sees none of them through any of the six methods, the SDK's readers or the CLI, and cannot delete
or extend them; once A shares the session, B reads it with `history` and `export`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import (  # noqa: E402
    get_session_messages_from_store,
    import_session_to_store,
    project_key_for_directory,
)
from claude_agent_sdk.testing import run_session_store_conformance  # noqa: E402

from sessionstore.integrations.agent_sdk import AgentSdkStore  # noqa: E402
from tests.conftest import PG_URL  # noqa: E402
from tests.support.agent_sdk import Laid, lay_out, main_files  # noqa: E402
from tests.support.cli import run_cli  # noqa: E402
from tests.support.pgadmin import admin_url, url_for  # noqa: E402
from tests.support.tworoles import granted_store  # noqa: E402


class Roles:
    """The store's database, its owner role and the roles A and B."""

    def __init__(self, database: str, owner: str, a: str, b: str) -> None:
        self.database, self.owner, self.a, self.b = database, owner, a, b

    def url(self, role: str) -> str:
        return url_for(PG_URL or "", database=self.database, user=role)

    def superuser(self) -> Any:
        return psycopg.connect(url_for(admin_url(PG_URL or ""), database=self.database), autocommit=True)


@pytest.fixture(scope="module")
def roles() -> Iterator[Roles]:
    if not PG_URL:
        pytest.skip("needs SESSIONSTORE_TEST_PG_URL (a PostgreSQL superuser)")
    with granted_store(PG_URL, "t39") as made:
        yield Roles(made.database, made.owner, made.a, made.b)


def _empty_for(roles: Roles, role: str) -> AgentSdkStore:
    """An adapter as `role` on a store where that role holds no key (its earlier keys deleted as itself)."""
    with psycopg.connect(url_for(admin_url(PG_URL or ""), database=roles.database, user=role), autocommit=True) as conn:
        conn.execute("DELETE FROM agent_sdk_entries")
        conn.execute("DELETE FROM agent_sdk_keys")
    return AgentSdkStore.open(roles.url(role))


def test_conformance_as_an_ordinary_role_under_row_level_security(roles: Roles) -> None:
    made: list[AgentSdkStore] = []

    def fresh() -> AgentSdkStore:
        made.append(_empty_for(roles, roles.a))
        return made[-1]

    try:
        asyncio.run(run_session_store_conformance(fresh))
    finally:
        for adapter in made:
            adapter.close()
    with roles.superuser() as conn:
        owners = {
            r[0] for r in conn.execute("SELECT owner FROM agent_sdk_keys UNION SELECT owner FROM agent_sdk_entries")
        }
    assert owners == {roles.a}


@pytest.fixture(scope="module")
def replayed(roles: Roles, transcripts_dir_module: Path, tmp_path_factory: pytest.TempPathFactory) -> Laid:
    """A's replay of a real session with a subagent."""
    source = next(p for p in main_files(transcripts_dir_module) if (p.with_suffix("") / "subagents").is_dir())
    laid = lay_out(source, tmp_path_factory.mktemp("a"))
    patch = pytest.MonkeyPatch()
    patch.setenv("CLAUDE_CONFIG_DIR", str(laid.project_dir.parent.parent))
    try:
        with AgentSdkStore.open(roles.url(roles.a)) as adapter:
            asyncio.run(import_session_to_store(laid.session_id, adapter, directory=str(laid.workdir)))
    finally:
        patch.undo()
    return laid


@pytest.fixture(scope="module")
def transcripts_dir_module() -> Path:
    from tests.conftest import TRANSCRIPTS, shared_transcripts

    shared_transcripts()  # a skip, or a failure under .ci/run (SESSIONSTORE_REQUIRE_TRANSCRIPTS)
    return TRANSCRIPTS


def _keys(laid: Laid) -> tuple[dict[str, str], dict[str, str]]:
    pk = project_key_for_directory(str(laid.workdir))
    main = {"project_key": pk, "session_id": laid.session_id}
    agent = next(k for k in laid.files if "/" in k).split("/", 1)[1]
    return main, {**main, "subpath": f"subagents/{agent}"}


def _a_sees(roles: Roles, laid: Laid) -> Any:
    main, sub = _keys(laid)

    async def look() -> Any:
        with AgentSdkStore.open(roles.url(roles.a)) as adapter:
            return (
                await adapter.load(main),
                await adapter.load(sub),
                await adapter.list_sessions(main["project_key"]),
                await adapter.list_session_summaries(main["project_key"]),
                await adapter.list_subkeys(main),
            )

    return asyncio.run(look())


def test_the_appending_role_owns_the_sessions(roles: Roles, replayed: Laid) -> None:
    with roles.superuser() as conn:
        owners = conn.execute(
            "SELECT s.owner, count(*) FROM agent_sdk_keys k JOIN sessions s ON s.id = k.linked_session "
            "WHERE k.sdk_session_id = %s GROUP BY s.owner",
            (replayed.session_id,),
        ).fetchall()
    with roles.superuser() as conn:
        keys = conn.execute(
            "SELECT id, subpath, entry_count, imported_count, linked_session, import_note FROM agent_sdk_keys"
        ).fetchall()
    assert owners == [(roles.a, 2)], keys  # the main session and its subagent's


def test_b_sees_none_of_a_through_any_method(roles: Roles, replayed: Laid, capsys: pytest.CaptureFixture[str]) -> None:
    before = _a_sees(roles, replayed)
    assert before[0] and before[1] and before[2] and before[3] and before[4]
    main, sub = _keys(replayed)
    pk = main["project_key"]

    async def as_b() -> Any:
        with AgentSdkStore.open(roles.url(roles.b)) as adapter:
            seen = (
                await adapter.load(main),
                await adapter.load(sub),
                await adapter.list_sessions(pk),
                await adapter.list_session_summaries(pk),
                await adapter.list_subkeys(main),
                await get_session_messages_from_store(adapter, replayed.session_id, directory=str(replayed.workdir)),
            )
            await adapter.delete(main)  # B's delete finds nothing of A's
            await adapter.append(main, [{"type": "x", "uuid": "b-own"}])  # B's own key of the same name
            return seen, await adapter.load(main)

    seen, bs_own = asyncio.run(as_b())
    assert seen == (None, None, [], [], [], [])
    assert bs_own == [{"type": "x", "uuid": "b-own"}]
    assert _a_sees(roles, replayed) == before
    listed = run_cli(capsys, "sessions", "--json", "--db", roles.url(roles.b))
    assert listed.code == 0 and json.loads(listed.out) == []


def test_a_share_lets_b_read_the_sdk_session(roles: Roles, replayed: Laid, capsys: pytest.CaptureFixture[str]) -> None:
    with roles.superuser() as conn:
        (session_id,) = conn.execute(
            "SELECT linked_session FROM agent_sdk_keys WHERE sdk_session_id = %s AND subpath = ''",
            (replayed.session_id,),
        ).fetchone()
    refused = run_cli(capsys, "history", session_id, "--db", roles.url(roles.b))
    assert refused.code != 0
    shared = run_cli(capsys, "share", session_id, "--with", roles.b, "--read-only", "--db", roles.url(roles.a))
    assert shared.code == 0, shared.err
    history = run_cli(capsys, "history", session_id, "--db", roles.url(roles.b))
    assert history.code == 0, history.err
    exported = run_cli(capsys, "export", session_id, "--format", "claude-code", "--db", roles.url(roles.b))
    assert exported.code == 0 and exported.out.encode() == replayed.files[replayed.session_id].read_bytes()


def test_b_cannot_put_entries_into_a_s_key(roles: Roles, replayed: Laid) -> None:
    """Revision 0025: an entry of B's own naming A's key is refused by the policy (a foreign key ignores
    row-level security), so B cannot take the slots A's next appends need."""
    with roles.superuser() as conn:
        key_id, n = conn.execute(
            "SELECT id, entry_count FROM agent_sdk_keys WHERE owner = %s ORDER BY id LIMIT 1", (roles.a,)
        ).fetchone()
    with psycopg.connect(url_for(admin_url(PG_URL or ""), database=roles.database, user=roles.b)) as conn:
        for statement in (
            "INSERT INTO agent_sdk_entries (key_id, n, uuid, entry) VALUES (%s, %s, 'b-planted', '{}')",
            "INSERT INTO agent_sdk_entries (key_id, n, owner, uuid, entry) VALUES (%s, %s, current_user, 'b', '{}')",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                with conn.transaction():
                    conn.execute(statement, (key_id, n + 1))
