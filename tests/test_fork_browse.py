"""Browse: `y` copies the resume command of the session's source; `f` forks at a message or before a boundary."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Awaitable, Callable

from textual.pilot import Pilot

from sessionstore import SessionStore
from sessionstore.cli.browse.app import BrowseApp, make_app
from sessionstore.cli.browse.boundary import BoundaryScreen
from sessionstore.cli.browse.message import MessageScreen
from sessionstore.cli.browse.session import SessionScreen
from sessionstore.interchange.importing import import_file
from sessionstore.storage.read import history as hist
from sessionstore.storage.write.fork import lineage

FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
CODEX = "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"


def drive(app: BrowseApp, steps: Callable[[Pilot[None]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            await steps(pilot)

    try:
        asyncio.run(main())
    finally:
        app.store.close()


def copied(url: str, session_id: str) -> str:
    """What `y` on the session screen puts on the clipboard."""
    seen: dict[str, str] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("y")
        seen["copied"] = pilot.app.clipboard

    drive(make_app(url, session_id=session_id), steps)
    return seen["copied"]


def test_y_copies_the_command_of_the_sessions_source(store_url: str, transcripts_dir: Path) -> None:
    with SessionStore.open(store_url) as store:
        claude = store.get(import_file(store, transcripts_dir / FASTHOOKS).session_id)
        codex = store.get(import_file(store, transcripts_dir / CODEX).session_id)
        fork = claude.fork()
        native = store.create_session(title="here")
        ids = {
            "claude": (claude.id, claude.metadata["source_session_id"], claude.cwd),
            "codex": (codex.id, codex.metadata["source_session_id"], codex.cwd),
            "fork": fork.id,
            "native": native.id,
        }
        shown_db = store.display_url
    assert copied(store_url, ids["claude"][0]) == f"cd {ids['claude'][2]} && claude --resume {ids['claude'][1]}"
    assert copied(store_url, ids["codex"][0]) == f"cd {ids['codex'][2]} && codex resume {ids['codex'][1]}"
    assert copied(store_url, ids["fork"]) == f"sessionstore chat {ids['fork']} --db {shown_db}"
    assert copied(store_url, ids["native"]) == f"sessionstore chat {ids['native']} --db {shown_db}"
    with SessionStore.open(store_url) as store:
        local = store.get(ids["claude"][0])
        local.append({"role": "user", "content": "continued in the store"})
    # The append went to the imported session's local continuation: the imported one still resumes there.
    assert local.id != ids["claude"][0]
    assert copied(store_url, ids["claude"][0]) == f"cd {ids['claude'][2]} && claude --resume {ids['claude'][1]}"
    assert copied(store_url, local.id) == f"sessionstore chat {local.id} --db {shown_db}"


def test_f_forks_before_a_boundary_and_at_a_message(store_url: str, transcripts_dir: Path) -> None:
    with SessionStore.open(store_url) as store:
        parent = store.get(import_file(store, transcripts_dir / FASTHOOKS).session_id)
        before = [e.uuid for e in hist.view_before(parent, 1)]
        active = parent.active_entries()
        target = next(e for e in reversed(active) if e.role == "user" and isinstance(e.content, str))
        pid = parent.id
    opened: list[str] = []

    async def steps(pilot: Pilot[None]) -> None:
        pilot.app.push_screen(BoundaryScreen(pilot.app.store.get(pid), 1))
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(pilot.app.screen, SessionScreen)
        opened.append(pilot.app.screen.session.id)
        pilot.app.push_screen(MessageScreen(pilot.app.store.get(pid), target.seq))
        await pilot.pause()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(pilot.app.screen, SessionScreen)
        opened.append(pilot.app.screen.session.id)

    drive(make_app(store_url, session_id=pid), steps)
    with SessionStore.open(store_url) as store:
        undo, at = (store.get(i) for i in opened)
        assert [e.uuid for e in undo.active_entries()] == before
        assert [e.uuid for e in at.active_entries()] == [e.uuid for e in active[: active.index(target) + 1]]
        assert (lineage(store.db, undo.id).boundary_index, lineage(store.db, at.id).message_uuid) == (1, target.uuid)
