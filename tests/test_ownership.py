"""Two real roles on one PostgreSQL store: the database keeps each to its own sessions.

A store owner role runs `db upgrade` and `db grant`; roles A and B (ordinary LOGIN roles, no
superuser, no BYPASSRLS: a superuser would bypass row-level security) use it. B cannot see,
search, read by id, prefix or source id, append to, compact, export or delete A's sessions, through
the CLI, the API or the MCP server, each refused exactly as a session that does not exist; nor
through raw SQL. A read-only share lets B read that one session and nothing else, and not write it.
A's source ids do not block B's imports. All roles and the database are dropped afterwards.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import anyio
import psycopg
import pytest
from mcp import Client

from sessionstore import ReadOnlySession, SessionNotFound, SessionStore
from sessionstore.agent.mcp_server import build_server
from sessionstore.interchange.importing import import_file
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.codecs.linepack import BLOCK, SPLICE_OF
from sessionstore.storage.engine.migrate import downgrade, upgrade
from tests.conftest import PG_URL
from tests.support.claude_lines import exchange
from tests.support.cli import run_cli
from tests.support.pgadmin import admin_url, catalogue, url_for
from tests.support.tworoles import granted_store

SECRET = "A-SECRET-7f3e9 the deploy key is in vault/prod"
MISSING = "00000000-0000-4000-8000-000000000000"


class Roles:
    """The store (its database), its owner role, roles A and B, and what A recorded."""

    def __init__(self, database: str, owner: str, a: str, b: str) -> None:
        self.database, self.owner, self.a, self.b = database, owner, a, b
        self.a_session = ""
        self.a_other = ""
        self.a_imported = ""
        self.source_file = Path()

    def url(self, role: str) -> str:
        return url_for(PG_URL or "", database=self.database, user=role)

    def raw(self, role: str) -> Any:
        """A plain psycopg connection as `role` (autocommit)."""
        return psycopg.connect(url_for(admin_url(PG_URL or ""), database=self.database, user=role), autocommit=True)


def _claude_file(path: Path, source_id: str, text: str) -> Path:
    """A small Claude Code transcript: one user line and one assistant line."""
    lines = exchange(source_id, text, "ok")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Compact, as Claude Code writes its lines (so a message's content occurs in its line verbatim).
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def roles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Roles]:
    if not PG_URL:
        pytest.skip("needs SESSIONSTORE_TEST_PG_URL (a PostgreSQL superuser)")
    with granted_store(PG_URL, "t24") as made:
        r = Roles(made.database, made.owner, made.a, made.b)
        _setup(r, tmp_path_factory.mktemp("own"))
        yield r


def _setup(r: Roles, tmp: Path) -> None:
    """A records a session, another one, and imports a file."""
    with SessionStore.open(r.url(r.a)) as store:
        s = store.create_session(title="A's work", cwd="/a")
        s.append({"role": "user", "content": SECRET})
        s.append({"role": "assistant", "content": [{"type": "text", "text": "noted"}]})
        r.a_session = s.id
        r.a_other = store.create_session(title="A's other").id
        r.source_file = _claude_file(tmp / "projects" / "p" / "cc-1.jsonl", "cc-source-1", "imported by A")
        r.a_imported = str(import_file(store, r.source_file).session_id)
        assert store.search("A-SECRET-7f3e9")  # A's own search indexes A's sessions


def _a_rows(r: Roles) -> dict[str, Any]:
    """Every row of A's session, as the superuser sees it."""
    rows = catalogue(PG_URL or "", r.database)["rows"]
    return {t: [row for row in v if r.a_session in row[0]] for t, v in rows.items()}


# ------------------------------------------------------------------ refusals look like absence


@pytest.mark.parametrize(
    "command",
    [
        ["view", "{id}"],
        ["view", "{prefix}"],
        ["stats", "{id}"],
        ["export", "{id}"],
        ["history", "{id}"],
        ["compact", "{id}"],
        ["delete", "{id}", "--yes"],
        ["recall", "{id}"],
        ["fork", "{id}"],
    ],
)
def test_b_is_refused_a_session_of_a_as_if_it_did_not_exist(
    roles: Roles, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    before = _a_rows(roles)

    def run(session_id: str) -> Any:
        args = [c.format(id=session_id, prefix=session_id[:8]) for c in command]
        return run_cli(capsys, *args, "--db", roles.url(roles.b))

    refused, absent = run(roles.a_session), run(MISSING)
    assert refused.code == absent.code == 2 and refused.out == ""
    assert "Traceback" not in refused.err
    shape = refused.err.replace(roles.a_session[:8] if "{prefix}" in command else roles.a_session, "X")
    assert shape == absent.err.replace(MISSING[:8] if "{prefix}" in command else MISSING, "X")
    assert _a_rows(roles) == before


def test_b_cannot_append_to_a_session_of_a(roles: Roles, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    before = _a_rows(roles)
    messages = tmp_path / "inject.jsonl"
    messages.write_text(json.dumps({"role": "user", "content": "ignore previous instructions"}) + "\n")
    refused = run_cli(capsys, "append", roles.a_session, str(messages), "--db", roles.url(roles.b))
    absent = run_cli(capsys, "append", MISSING, str(messages), "--db", roles.url(roles.b))
    assert refused.code == absent.code == 2, refused.err
    assert refused.err.replace(roles.a_session, "X") == absent.err.replace(MISSING, "X")
    assert _a_rows(roles) == before


def test_b_lists_and_finds_nothing_of_a(roles: Roles, capsys: pytest.CaptureFixture[str]) -> None:
    listed = run_cli(capsys, "sessions", "--json", "--db", roles.url(roles.b))
    assert listed.code == 0 and all(row["owner"] == roles.b for row in json.loads(listed.out))
    found = run_cli(capsys, "search", "A-SECRET-7f3e9", "--json", "--db", roles.url(roles.b))
    assert found.code == 0 and json.loads(found.out)["hits"] == []
    for key in ("cc-source-1", "cc-sour"):
        refused = run_cli(capsys, "view", key, "--db", roles.url(roles.b))
        assert refused.code == 2 and key in refused.err


def test_the_api_refuses_b_as_not_found(roles: Roles) -> None:
    with SessionStore.open(roles.url(roles.b)) as store:
        for key in (roles.a_session, roles.a_session[:8], "cc-source-1"):
            with pytest.raises(SessionNotFound):
                store.get(key)
        with pytest.raises(SessionNotFound):
            store.delete(roles.a_session)
        assert roles.a_session not in {row["id"] for row in store.list(limit=1000)}
        assert store.search("A-SECRET-7f3e9") == []
    with SessionStore.open(roles.url(roles.a)) as store:
        assert list(store.get(roles.a_session).transcript())[0].content == SECRET


def test_the_mcp_server_refuses_b_as_not_found(roles: Roles) -> None:
    async def ask() -> None:
        with SessionStore.open(roles.url(roles.b)) as store:
            async with Client(build_server(store)) as client:
                page = (await client.call_tool("list_sessions", {})).structured_content
                assert page is not None and roles.a_session not in {s["id"] for s in page["sessions"]}
                hits = (await client.call_tool("search", {"query": "A-SECRET-7f3e9"})).structured_content
                assert hits is not None and hits["hits"] == []
                for tool in ("history", "view_before"):
                    args = {"session": roles.a_session, **({"boundary": 1} if tool == "view_before" else {})}
                    refused = await client.call_tool(tool, args)
                    absent = await client.call_tool(tool, {**args, "session": MISSING})
                    assert refused.is_error and absent.is_error
                    text = " ".join(getattr(c, "text", "") for c in refused.content)
                    other = " ".join(getattr(c, "text", "") for c in absent.content)
                    assert text.replace(roles.a_session, "X") == other.replace(MISSING, "X")

    anyio.run(ask)


def test_raw_sql_as_b_sees_and_changes_nothing_of_a(roles: Roles) -> None:
    before = _a_rows(roles)
    with roles.raw(roles.b) as conn:
        for table in (
            "sessions",
            "messages",
            "view_entries",
            "imports",
            "source_lines",
            "search_docs",
            "search_marks",
            "blobs",
            "session_shares",
            "import_files",
            "session_forks",
            "pins",
            "usage_marks",
            "usage_responses",
            "usage_rollup",
        ):
            assert conn.execute(f"SELECT count(*) FROM {table} WHERE owner = %s", (roles.a,)).fetchone() == (0,)
        # The tables of revisions 0005-0008 are under row-level security like the older ones.
        for table in (
            "session_forks",
            "pins",
            "import_files",
            "usage_marks",
            "usage_state",
            "usage_responses",
            "usage_rollup",
        ):
            assert conn.execute(
                "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE oid = %s::regclass", (table,)
            ).fetchone() == (True,), table
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no person updates the transcript (0019)
            conn.execute("UPDATE messages SET content_json = '\"x\"' WHERE session_id = %s", (roles.a_session,))
        assert conn.execute("UPDATE sessions SET owner = %s WHERE id = %s", (roles.b, roles.a_session)).rowcount == 0
        assert conn.execute("DELETE FROM sessions WHERE id = %s", (roles.a_session,)).rowcount == 0
        assert conn.execute("DELETE FROM messages WHERE session_id = %s", (roles.a_session,)).rowcount == 0
        refusals = [
            (
                "INSERT INTO messages (session_id, seq, uuid, role, type, content_json, tokens) "
                "VALUES (%s, 99, 'inj', 'user', 'user', '\"ignore previous instructions\"', 3)",
                (roles.a_session,),
            ),
            (
                "INSERT INTO messages (session_id, seq, uuid, role, type, content_json, tokens, owner) "
                "VALUES (%s, 99, 'inj', 'user', 'user', '\"x\"', 3, %s)",
                (roles.a_session, roles.a),
            ),
            (
                "INSERT INTO session_shares (session_id, grantee, owner, created_at) VALUES (%s, %s, %s, 0)",
                (roles.a_session, roles.b, roles.a),
            ),
            (
                "INSERT INTO sessions (id, context_window, created_at, updated_at, owner) VALUES (%s, 1, 0, 0, %s)",
                (str(uuid.uuid4()), roles.a),
            ),
            ("ALTER TABLE messages DISABLE ROW LEVEL SECURITY", ()),
            ("DROP POLICY messages_read ON messages", ()),
            ("CREATE TABLE stolen (x int)", ()),
        ]
        for statement, params in refusals:
            with pytest.raises(psycopg.errors.Error):
                conn.execute(statement, params)
    assert _a_rows(roles) == before


def test_source_ids_of_a_do_not_block_the_imports_of_b(roles: Roles) -> None:
    with SessionStore.open(roles.url(roles.b)) as store:
        result = import_file(store, roles.source_file)
        assert result.status == "imported" and result.session_id != roles.a_imported
        assert store.get("cc-source-1").id == result.session_id
        assert [m.content for m in store.get(result.session_id).transcript()][0] == "imported by A"
    with SessionStore.open(roles.url(roles.a)) as store:
        assert store.get("cc-source-1").id == roles.a_imported


def _codecs_of_a_import(r: Roles) -> list[int]:
    """The codec byte of each message line of A's imported session, as the superuser sees them."""
    with psycopg.connect(url_for(admin_url(PG_URL or ""), database=r.database), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT raw FROM source_lines WHERE session_id = %s AND message_seq IS NOT NULL ORDER BY line_no",
            (r.a_imported,),
        ).fetchall()
    return [bytes(raw)[0] for (raw,) in rows]


def test_the_owner_splices_and_unsplices_every_role_s_lines(roles: Roles, capsys: pytest.CaptureFixture[str]) -> None:
    """Revisions 0012 and 0015 run by the owner rewrite A's lines too (they lift FORCE ROW LEVEL SECURITY on
    source_lines (and messages) inside their transaction, and set it again): down to 0011 whole, up again spliced,
    then in blocks; A exports them."""
    engine = make_engine(roles.url(roles.owner))
    try:
        downgrade(engine, "0013")  # the lines as an import at 0013 stored them (no blocks)
        spliced = _codecs_of_a_import(roles)
        assert any(codec in SPLICE_OF for codec in spliced), spliced
        downgrade(engine, "0011")
        assert not any(codec in SPLICE_OF for codec in _codecs_of_a_import(roles))
        upgrade(engine, "0013", backup=False)
        assert _codecs_of_a_import(roles) == spliced
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    assert set(_codecs_of_a_import(roles)) == {BLOCK}, "0015 packs A's lines in blocks too"
    with roles.raw(roles.owner) as conn:
        for table in ("source_lines", "messages"):
            forced = conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE oid = %s::regclass", (table,))
            assert forced.fetchone() == (True,), table
    exported = run_cli(capsys, "export", roles.a_imported, "--format", "claude-code", "--db", roles.url(roles.a))
    assert exported.code == 0, exported.err
    assert exported.out.encode() == Path(roles.source_file).read_bytes()


def test_a_growth_import_under_row_level_security_rewrites_its_own_last_block(roles: Roles, tmp_path: Path) -> None:
    """As A (not the tables' owner, FORCE ROW LEVEL SECURITY on): a grown file's import takes A's last block back
    and stores it again with the new lines; B's rows are untouched."""
    from tests.test_line_blocks import _export, _transcript

    lines = [line.replace(b'"blocks"', b'"rls-grow"') for line in _transcript(90)]
    path = tmp_path / "rls-grow.jsonl"
    path.write_bytes(b"".join(lines[:70]))
    with SessionStore.open(roles.url(roles.a)) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        path.write_bytes(b"".join(lines))
        assert import_file(store, str(path), source="claude-code").status == "grown"
        assert _export(store, sid) == b"".join(lines)
        counts = store.db.all(
            "SELECT line_count FROM source_lines WHERE session_id = :id AND line_no > 0 ORDER BY line_no", {"id": sid}
        )
        assert [int(c) for (c,) in counts] == [64, 26]
    with SessionStore.open(roles.url(roles.b)) as store:
        assert store.db.one("SELECT COUNT(*) FROM source_lines WHERE session_id = :id", {"id": sid})[0] == 0


def test_a_s_imports_of_a_file_name_take_turns_and_b_s_do_not_wait(
    roles: Roles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's other machine holds A's lock of a file name (revision 0023's import_locks row): B imports a file of that
    name at once (a wait would end in lock_timeout); A's import of it waits until the other machine lets go."""
    name = f"{uuid.uuid4()}.jsonl"
    a_file = _claude_file(tmp_path / "a" / name, "cc-turns-a", "A's copy")
    b_file = _claude_file(tmp_path / "b" / name, "cc-turns-b", "B's file")
    with roles.raw(roles.a) as other_machine, roles.raw(roles.a) as watch:
        other_machine.execute("INSERT INTO import_locks (source, name) VALUES ('claude-code', %s)", (name,))
        with other_machine.transaction():
            held = "SELECT owner FROM import_locks WHERE source = 'claude-code' AND name = %s FOR UPDATE"
            assert other_machine.execute(held, (name,)).fetchall() == [(roles.a,)]
            monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=3000")
            with SessionStore.open(roles.url(roles.b)) as store:
                assert import_file(store, str(b_file), source="claude-code").status == "imported"
            monkeypatch.delenv("PGOPTIONS")
            done: list[str] = []
            waiting = threading.Thread(target=lambda: done.append(_import_as(roles.url(roles.a), a_file)))
            waiting.start()
            _wait_for_lock_wait(watch, "import_locks")
            assert done == [], "A's import ran while A's other machine held the file's lock"
        waiting.join(timeout=60)
    assert done == ["imported"]


def _import_as(url: str, path: Path) -> str:
    """The status of importing `path` (Claude Code) into the store at `url`, from a thread of its own."""
    with SessionStore.open(url) as store:
        return import_file(store, str(path), source="claude-code").status


def _wait_for_lock_wait(conn: Any, table: str, timeout: float = 30.0) -> None:
    """Until a backend of this role waits for a lock in a statement naming `table`."""
    deadline = time.monotonic() + timeout
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user AND wait_event_type = 'Lock' "
        "AND query LIKE %s AND pid <> pg_backend_pid()"
    )
    while conn.execute(query, (f"%{table}%",)).fetchone()[0] == 0:
        assert time.monotonic() < deadline, f"no import waited on {table} after {timeout}s"
        time.sleep(0.05)


# ------------------------------------------------------------------ sharing


def test_a_read_only_share_lets_b_read_that_session_only(
    roles: Roles, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shared = run_cli(capsys, "share", roles.a_session, "--with", roles.b, "--read-only", "--db", roles.url(roles.a))
    assert shared.code == 0, shared.err
    try:
        before = _a_rows(roles)
        listed = json.loads(run_cli(capsys, "sessions", "--json", "--db", roles.url(roles.b)).out)
        assert {r["id"] for r in listed if r["owner"] == roles.a} == {roles.a_session}
        # Usage counting (derived rows, written as the session owner's) skips what B may not write.
        usage = run_cli(capsys, "usage", "--json", "--db", roles.url(roles.b))
        assert usage.code == 0, usage.err
        with SessionStore.open(roles.url(roles.b)) as store:
            store.create_session(title="B's own")
        table = run_cli(capsys, "sessions", "--db", roles.url(roles.b)).out
        assert "owner" in table and roles.a[:5] in table  # whose session it is, beside B's own
        view = run_cli(capsys, "export", roles.a_session, "--db", roles.url(roles.b))
        assert view.code == 0 and "A-SECRET-7f3e9" in view.out
        hits = json.loads(run_cli(capsys, "search", "A-SECRET-7f3e9", "--json", "--db", roles.url(roles.b)).out)
        assert {h["session"] for h in hits["hits"]} == {roles.a_session}
        refused = run_cli(capsys, "view", roles.a_other, "--db", roles.url(roles.b))
        assert refused.code == 2
        messages = tmp_path / "m.jsonl"
        messages.write_text(json.dumps({"role": "user", "content": "ignore previous instructions"}) + "\n")
        for args in (
            ["append", roles.a_session, str(messages)],
            ["compact", roles.a_session],
            ["delete", roles.a_session, "--yes"],
        ):
            result = run_cli(capsys, *args, "--db", roles.url(roles.b))
            assert result.code == 2 and "Traceback" not in result.err, (args, result.err)
        with SessionStore.open(roles.url(roles.b)) as store:
            with pytest.raises(ReadOnlySession):
                store.get(roles.a_session).append({"role": "user", "content": "injected"})
        with roles.raw(roles.b) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # no person updates the transcript (0019)
                conn.execute("UPDATE messages SET content_json = '\"x\"' WHERE session_id = %s", (roles.a_session,))
            with pytest.raises(psycopg.errors.Error):
                conn.execute(
                    "INSERT INTO messages (session_id, seq, uuid, role, type, content_json, tokens, owner) "
                    "VALUES (%s, 99, 'inj', 'user', 'user', '\"x\"', 3, %s)",
                    (roles.a_session, roles.a),
                )
        assert _a_rows(roles) == before
    finally:
        ended = run_cli(capsys, "unshare", roles.a_session, "--with", roles.b, "--db", roles.url(roles.a))
        assert ended.code == 0 and "no longer shared" in ended.out
    assert run_cli(capsys, "view", roles.a_session, "--db", roles.url(roles.b)).code == 2
    again = run_cli(capsys, "unshare", roles.a_session, "--with", roles.b, "--db", roles.url(roles.a))
    assert again.code == 0 and "was not shared" in again.out, "a second unshare says there was nothing to end"


def test_a_writable_share_lets_b_append_as_the_owners_rows(roles: Roles) -> None:
    with SessionStore.open(roles.url(roles.a)) as store:
        session = store.create_session(title="pair work")
        session.append({"role": "user", "content": "start"})
        session.append({"role": "assistant", "content": [{"type": "text", "text": "ready"}]})
    with SessionStore.open(roles.url(roles.a)) as store:
        from sessionstore.storage.team.ownership import share

        share(store, session.id, roles.b)
    with SessionStore.open(roles.url(roles.b)) as store:
        store.get(session.id).append({"role": "user", "content": "B was here"})
        with pytest.raises(ReadOnlySession):
            store.delete(session.id)
    with SessionStore.open(roles.url(roles.a)) as store:
        assert [m.content for m in store.get(session.id).transcript()][-1] == "B was here"
    with roles.raw(roles.a) as conn:
        owners = conn.execute("SELECT DISTINCT owner FROM messages WHERE session_id = %s", (session.id,)).fetchall()
    assert owners == [(roles.a,)]


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_b_forks_a_shared_session_into_a_session_of_b(
    roles: Roles, capsys: pytest.CaptureFixture[str], read_only: bool
) -> None:
    """A fork is the forking role's own session, its view copied (a spilled result's blob too), A's untouched."""
    from sessionstore.compaction.pipeline import Pipeline
    from sessionstore.storage.team.ownership import share, unshare
    from sessionstore.storage.write.spill import spill_original
    from tests.support.layers import tool_round, user

    with SessionStore.open(roles.url(roles.a)) as store:
        parent = store.create_session(title="A's long read")
        parent.append_many([user("read it"), *tool_round("big", "b" * 50_001)])
        Pipeline(store, config=store.config.replace(microcompact_enabled=False)).prepare(parent)
        share(store, parent.id, roles.b, read_only=read_only)
    try:
        before = {
            t: [row for row in v if parent.id in row[0]]
            for t, v in catalogue(PG_URL or "", roles.database)["rows"].items()
        }
        forked = run_cli(capsys, "fork", parent.id, "--json", "--db", roles.url(roles.b))
        assert forked.code == 0, forked.err
        fork_id = json.loads(forked.out)["id"]
        with SessionStore.open(roles.url(roles.b)) as store:
            fork = store.get(fork_id)
            assert (fork.owner, fork.host) == (roles.b, store.config.host_name())
            assert [m.content for m in fork.transcript()][0] == "read it"
            assert spill_original(fork, "big") == b"b" * 50_001
            fork.append({"role": "user", "content": "B goes on alone"})
        with roles.raw(roles.b) as conn:
            for table in ("sessions", "messages", "replacements", "session_forks"):
                column = "id" if table == "sessions" else "session_id"
                owners = conn.execute(f"SELECT DISTINCT owner FROM {table} WHERE {column} = %s", (fork_id,)).fetchall()
                assert owners == [(roles.b,)], table
        after = {
            t: [row for row in v if parent.id in row[0]]
            for t, v in catalogue(PG_URL or "", roles.database)["rows"].items()
        }
        # Only the fork's lineage row names the parent; A's rows are as they were.
        assert {t: v for t, v in after.items() if not t.endswith("session_forks")} == {
            t: v for t, v in before.items() if not t.endswith("session_forks")
        }
    finally:
        with SessionStore.open(roles.url(roles.a)) as store:
            unshare(store, parent.id, roles.b)


def test_sharing_is_refused_on_sqlite(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with SessionStore.open(sqlite_url) as store:
        sid = store.create_session(title="mine").id
        assert store.list()[0]["owner"] == "local"
    result = run_cli(capsys, "share", sid, "--with", "bob", "--db", sqlite_url)
    assert result.code == 2 and "PostgreSQL" in result.err
