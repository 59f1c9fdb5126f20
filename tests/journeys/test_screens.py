"""The person's store through `browse` (its Textual pilot, in this process) and the MCP server over stdio.

Both on a copy of the imported store that nothing has searched yet, so the first search an agent or
the browser makes is the one that builds the index, as on a person's machine.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from textual.pilot import Pilot
from textual.widgets import DataTable

from sessionstore.cli.browse.app import make_app
from sessionstore.cli.browse.boundary import BoundaryScreen
from sessionstore.cli.browse.search import SEARCH_LIMIT
from sessionstore.cli.browse.sessions import SessionsScreen
from tests.journeys.conftest import SCRIPT, World

QUERY = "spotter-gqc"  # typed in the spotter session, before and after its compaction


def test_browse_lists_the_sessions_and_its_search_opens_the_boundary(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    expected = me.run("search", QUERY, "--json", "--limit", str(SEARCH_LIMIT)).json()["hits"]
    assert any(h["boundary"] is not None for h in expected)
    app = make_app(me.url)
    seen: dict[str, Any] = {}

    async def settle(pilot: Pilot[None]) -> None:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    async def steps(pilot: Pilot[None]) -> None:
        await settle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, SessionsScreen)
        seen["sessions"] = [r.id for r in screen.rows]
        await pilot.press("slash", *QUERY, "enter")
        await settle(pilot)
        hits = pilot.app.screen.hits  # type: ignore[attr-defined]
        seen["hits"] = [(h.session, h.seq, h.boundary) for h in hits]
        pick = next(i for i, h in enumerate(hits) if h.boundary is not None)
        pilot.app.screen.query_one("#hits", DataTable).move_cursor(row=pick)
        await pilot.press("enter")
        await settle(pilot)
        seen["opened"] = pilot.app.screen
        seen["picked"] = hits[pick]

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await steps(pilot)

    try:
        asyncio.run(main())
    finally:
        app.store.close()
    assert seen["sessions"] == [r["id"] for r in world.sessions]
    assert seen["hits"] == [(h["session"], h["seq"], h["boundary"]) for h in expected]
    opened = seen["opened"]
    assert isinstance(opened, BoundaryScreen)
    assert opened.index == seen["picked"].boundary and opened.session.id == seen["picked"].session


def payload(answer: Any) -> Any:
    """A tool's answer as the client reads it (structured content, else the JSON text)."""
    assert not answer.is_error, answer.content
    structured = getattr(answer, "structured_content", None) or getattr(answer, "structuredContent", None)
    return structured if structured is not None else json.loads(answer.content[0].text)


@pytest.mark.anyio
async def test_an_agent_searches_and_recalls_over_the_mcp_server(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    spotter = world.source("258c7280")["id"]
    params = StdioServerParameters(command=str(SCRIPT), args=["mcp"], env=me.env(), cwd=str(me.home))
    with anyio.fail_after(120):
        async with Client(params) as client:
            listed = payload(await client.call_tool("list_sessions", {"limit": 100}))
            found = payload(await client.call_tool("search", {"query": QUERY, "limit": 50}))
            compacted = payload(await client.call_tool("search", {"query": QUERY, "place": "compacted", "limit": 50}))
            history = payload(await client.call_tool("history", {"session": "258c7280"}))
            recalled = payload(await client.call_tool("recall", {"session": spotter, "query": QUERY}))
    assert sorted(s["id"] for s in listed["sessions"]) == sorted(r["id"] for r in world.sessions)
    cli = me.run("search", QUERY, "--json", "--limit", "50").json()["hits"]
    assert [(h["session"], h["seq"]) for h in found["hits"]] == [(h["session"], h["seq"]) for h in cli]
    assert compacted["hits"] and all(h["boundary"] is not None and h["recall"] for h in compacted["hits"])
    (boundary,) = history["boundaries"]
    assert boundary["kind"] == "full" and boundary["trigger"] == "auto"
    assert QUERY in json.dumps(recalled)
