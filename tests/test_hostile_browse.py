"""`browse` draws stored text as text (issue 20, items 1, 2 and 7): every screen on the hostile corpus.

Each screen is opened with Textual's pilot on the sessions of tests/support/hostile.py (appended
through the API and imported from a Claude Code file) and rendered; no C0 control other than
newline and tab, no DEL and no C1 control may be in what it draws. One snapshot pins how a
hostile message looks. The browser's export goes through the CLI's output file (no-follow, 0600).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Iterator

import pytest
from textual.pilot import Pilot
from textual.widgets import Collapsible

from sessionstore import SessionStore
from sessionstore.cli.browse.app import make_app
from sessionstore.cli.browse.boundary import BoundaryScreen
from sessionstore.cli.browse.exporting import export_to_file
from sessionstore.cli.browse.exportscreen import ExportScreen
from sessionstore.cli.browse.message import MessageScreen, OriginalScreen
from sessionstore.cli.browse.session import SessionScreen
from sessionstore.storage.write.spill import list_spills
from tests.conftest import ENGINES, PG_URL
from tests.support.hostile import HOSTILE, MEDIUM, NEEDLE, HostileStore, hostile_store, hostile_text, unsafe_bytes
from tests.support.pilot import drive, settle


Hostile = HostileStore


@pytest.fixture(scope="module", params=ENGINES)
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    yield from hostile_store(request.param, tmp_path_factory.mktemp("hostile-browse"), PG_URL)


class Shots:
    """What each screen drew (the screenshot's text holds every character the screen put on a cell)."""

    def __init__(self) -> None:
        self.drawn: dict[str, str] = {}

    async def take(self, pilot: Pilot[None], name: str) -> None:
        await settle(pilot)
        self.drawn[name] = pilot.app.export_screenshot()

    def assert_clean(self) -> None:
        assert self.drawn
        dirty = {name: unsafe_bytes(svg) for name, svg in self.drawn.items() if unsafe_bytes(svg)}
        assert not dirty, dirty


def test_every_screen_draws_stored_controls_as_text(hostile: Hostile) -> None:
    shots = Shots()
    app = make_app(hostile.url)

    async def steps(pilot: Pilot[None]) -> None:
        store = pilot.app.store
        await shots.take(pilot, "sessions")
        await pilot.press("down")
        await shots.take(pilot, "sessions, second preview")
        await pilot.press("slash", *NEEDLE, "enter")
        await shots.take(pilot, "search hits")
        await pilot.press("down")
        await shots.take(pilot, "search hit preview")
        await pilot.press("escape")
        for sid in (hostile.native, hostile.imported):
            session = store.get(sid)
            await pilot.app.push_screen(SessionScreen(session))
            await shots.take(pilot, f"session {sid}")
            for message in session.transcript():
                await pilot.app.push_screen(MessageScreen(session, message.seq))
                for part in pilot.app.screen.query(Collapsible):
                    part.collapsed = False
                await shots.take(pilot, f"message {sid} {message.seq}")
                pilot.app.pop_screen()
            for spill in list_spills(session):
                await pilot.app.push_screen(OriginalScreen(session, [spill.tool_use_id]))
                await shots.take(pilot, f"original {sid}")
                pilot.app.pop_screen()
            await pilot.app.push_screen(ExportScreen(sid))
            await shots.take(pilot, f"export picker {sid}")
            pilot.app.pop_screen()
            pilot.app.pop_screen()
        boundary = BoundaryScreen(store.get(hostile.native), 1)
        await pilot.app.push_screen(boundary)
        await shots.take(pilot, "boundary, view before")
        boundary.action_tab("summary")
        await shots.take(pilot, "boundary, summary")
        boundary.action_tab("kept")
        await shots.take(pilot, "boundary, preserved")
        pilot.app.export(hostile.native, "markdown", Path("/nonexistent-folder") / HOSTILE[:40])
        await shots.take(pilot, "export failed notice")

    drive(app, steps, size=(160, 60))
    assert len(shots.drawn) > 30
    shots.assert_clean()
    assert any("\\x1b]0;PWNED-TITLE" in svg.replace("&#160;", " ") for svg in shots.drawn.values())


def test_rich_markup_in_stored_values_is_drawn_as_written(hostile: Hostile) -> None:
    """`[link=...]` and `[/]` in a tool_use_id, a title and text: drawn as those characters (item 2)."""
    shots = Shots()

    async def steps(pilot: Pilot[None]) -> None:
        session = pilot.app.store.get(hostile.native)
        seq = next(
            m.seq
            for m in session.transcript()
            if isinstance(m.content, list) and any(b.get("type") == "tool_use" for b in m.content)
        )
        await pilot.app.push_screen(MessageScreen(session, seq))
        await shots.take(pilot, "message")

    drive(make_app(hostile.url), steps, size=(400, 80))
    drawn = shots.drawn["message"].replace("&#160;", " ")
    assert "[link=https://e.x]x[/link][/]" in drawn


def test_the_snapshot_of_a_hostile_message(snap_compare: Any, tmp_path: Path) -> None:
    """How a message full of escape sequences, markup and HTML looks: its text, controls shown as escapes."""
    url = f"sqlite:///{tmp_path / 'snap.db'}"
    with SessionStore.open(url) as store:
        s = store.create_session(
            session_id="5e55101a-7e57-4000-8000-00000000beef", title=HOSTILE, model=MEDIUM, cwd="/tmp/" + HOSTILE
        )
        s.append(
            {
                "role": "user",
                "content": hostile_text("question"),
                "uuid": MEDIUM + "-q",
                "timestamp": "2024-03-05T09:00:00.000Z",
            }
        )
        s.append(
            {
                "role": "assistant",
                "uuid": MEDIUM + "-a",
                "timestamp": "2024-03-05T09:00:41.000Z",
                "content": [
                    {"type": "text", "text": hostile_text("answer")},
                    {
                        "type": "tool_use",
                        "id": "toolu_" + MEDIUM,
                        "name": "Bash",
                        "input": {"command": hostile_text("input")},
                    },
                ],
            }
        )
        seq = 2
    app = make_app(url)

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.pause()
        await pilot.app.push_screen(MessageScreen(pilot.app.store.get(s.id), seq))
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
    finally:
        app.store.close()


# ------------------------------------------------------------------ item 7: the browser's export file


@pytest.mark.parametrize("fmt", ["jsonl", "markdown", "html", "claude-code"])
def test_browser_export_never_writes_through_a_planted_partial_symlink(
    hostile: Hostile, tmp_path: Path, fmt: str
) -> None:
    """The old export opened `<path>.partial` with open(): a symlink planted there was written through."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / f"out.{fmt}"
    for planted in (tmp_path / f"{target.name}.partial", tmp_path / f".{target.name}.{os.getpid()}.partial"):
        planted.symlink_to(victim)
    old = os.umask(0o022)
    try:
        count = export_to_file(hostile.url, hostile.native, fmt, target)
    finally:
        os.umask(old)
    assert count > 0 and NEEDLE.encode() in target.read_bytes()
    assert victim.read_text() == "keep me"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
