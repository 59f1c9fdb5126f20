"""The MCP server is read-only in fact, not by a flag: its store refuses writes, and a whole
client session leaves every table but the derived search index exactly as it was."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from sessionstore import ReadOnlyStore, SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from tests.support.convo import tool_result, tool_use
from tests.support.mcpstdio import stdio_server
from tests.support.tabledigest import table_digests

#: The derived search index: the only tables a search may write (it catches up at query time).
INDEX_TABLES = ("search_",)
HOSTILE = ["\x1b]52;c;cHduZWQ=\x07", "[/]", "[link=https://evil.example]x[/link]", "' OR 1=1 --", "\x00", "é" * 3000]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _filled(store: SessionStore) -> str:
    """A session with a compaction, a spilled result and a later message: something for every tool."""
    session = store.create_session(title="ro", cwd="/w")
    for i in range(12):
        session.append({"role": "user", "content": f"step {i} the release branch " + "word " * 20})
        session.append({"role": "assistant", "content": [tool_use(f"b{i}", "Bash", command=f"echo {i}")]})
        session.append({"role": "user", "content": [tool_result(f"b{i}", f"out {i} " + "v " * 200)]})
        session.append({"role": "assistant", "content": f"done {i}"})
    compact(session)
    session.append({"role": "user", "content": "go"})
    session.append({"role": "assistant", "content": [tool_use("big1", "Bash", command="cat big")]})
    session.append({"role": "user", "content": [tool_result("big1", "".join(f"line {i}\n" for i in range(12_000)))]})
    Pipeline(store).prepare(session)
    return session.id


async def _every_tool(client: Client, session_id: str) -> list[str]:
    """Every tool with valid arguments (each must answer) and hostile ones (each may refuse); the refusals."""
    valid: list[tuple[str, dict[str, Any]]] = [
        ("list_sessions", {}),
        ("list_sessions", {"limit": 1}),
        ("history", {"session": session_id}),
        ("view_before", {"session": session_id, "boundary": 1, "limit": 5}),
        ("recall", {"session": session_id, "query": "release branch"}),
        ("recall", {"session": session_id}),
        ("spill_cat", {"session": session_id, "tool_use_id": "big1"}),
        ("search", {"query": "release branch"}),
        ("search", {"query": "step", "place": "compacted", "limit": 3}),
    ]
    for tool, args in valid:
        answer = await client.call_tool(tool, args)
        assert not answer.is_error, (tool, args, answer.content)
    refused = []
    for value in HOSTILE:
        for tool, args in [
            ("history", {"session": value}),
            ("view_before", {"session": session_id, "boundary": 1, "cursor": value}),
            ("recall", {"session": session_id, "query": value}),
            ("recall", {"session": session_id, "around_uuid": value}),
            ("spill_cat", {"session": session_id, "tool_use_id": value}),
            ("search", {"query": value}),
            ("search", {"query": "step", "session": value, "cwd": value}),
            ("list_sessions", {"cursor": value}),
        ]:
            answer = await client.call_tool(tool, args)
            if answer.is_error:
                refused.append(answer.content[0].text)
    return refused


@pytest.mark.anyio
async def test_a_client_session_over_stdio_changes_no_table_but_the_search_index(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session_id = _filled(store)
    before = table_digests(store_url, INDEX_TABLES)
    params = stdio_server(store_url)
    with anyio.fail_after(120):
        async with Client(params) as client:
            refused = await _every_tool(client, session_id)
    assert refused, "the hostile arguments were all accepted: the test no longer reaches the refusals"
    assert not any("Traceback" in r for r in refused)
    after = table_digests(store_url, INDEX_TABLES)
    assert after == before, [t for t in before if before[t] != after.get(t)]


def test_a_read_only_store_refuses_writes_by_construction(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session = store.create_session(title="ro")
        session.append({"role": "user", "content": "hello there"})
    with SessionStore.open(store_url, read_only=True) as store:
        assert store.read_only
        with pytest.raises(ReadOnlyStore):
            store.get(session.id).append({"role": "assistant", "content": "no"})
        with pytest.raises(ReadOnlyStore):
            store.create_session(title="no")
        # Below the application's check, the connection itself refuses: a write fails by construction.
        with pytest.raises(Exception, match="(?i)read.?only"):
            store.db.conn.execute("UPDATE sessions SET title = 'x'")
        if store.db.is_sqlite:
            # The second connection that keeps the search index may write its tables and nothing else.
            assert [h.seq for h in store.search("hello")] == [1]
            with pytest.raises(Exception, match="not authorized"):
                store.index_db.conn.execute("DELETE FROM messages")
            with pytest.raises(Exception, match="not authorized"):
                store.index_db.conn.execute("PRAGMA writable_schema = 1")
        else:
            assert [h.seq for h in store.search("hello")] == [1]
    with SessionStore.open(store_url) as store:
        assert [m.seq for m in store.get(session.id).transcript()] == [1]
        assert store.get(session.id).title == "ro"
