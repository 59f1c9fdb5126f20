"""`browse`: j/k, g/G and Home/End move the cursor on the sessions list and the search hits, as on every list.

The sessions list is read a page at a time: End (and G) go to the last session of the
store, not the last one loaded so far.
"""

from __future__ import annotations

from typing import Any

from sessionstore import SessionStore
from sessionstore.cli.browse.app import make_app
from sessionstore.cli.browse.sessions import PAGE, SessionsScreen
from textual.pilot import Pilot
from textual.widgets import DataTable
from tests.test_browse import drive, settle

WORD = "zanzibar"
#: Sessions holding WORD (each a hit).
HITS = 6


def _store(url: str) -> list[str]:
    """PAGE + 30 sessions, HITS of them saying WORD; their ids newest first."""
    with SessionStore.open(url) as store:
        for i in range(PAGE + 30):
            s = store.create_session(title=f"session {i:03d}")
            if i < HITS:
                s.append({"role": "user", "content": f"where is {WORD} number {i}"})
        return [r["id"] for r in store.list(limit=1000)]


async def _walk(pilot: Pilot[None], table: DataTable[Any]) -> list[tuple[str, int]]:
    """(key, cursor row after it) for each list key in turn."""
    seen = []
    for key in ("j", "j", "j", "k", "G", "g", "end", "home", "j"):
        await pilot.press(key)
        await settle(pilot)
        seen.append((key, table.cursor_row))
    return seen


def test_list_keys_move_on_the_sessions_list(sqlite_url: str) -> None:
    ids = _store(sqlite_url)
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, SessionsScreen)
        seen["loaded_at_open"] = screen.table.row_count
        seen["moves"] = await _walk(pilot, screen.table)
        await pilot.press("G")
        await settle(pilot)
        seen["last"] = screen.highlighted.id if screen.highlighted else None

    drive(make_app(sqlite_url), steps, size=(80, 24))
    last = len(ids) - 1
    assert seen["loaded_at_open"] == PAGE < len(ids)
    assert seen["moves"] == [
        ("j", 1),
        ("j", 2),
        ("j", 3),
        ("k", 2),
        ("G", last),
        ("g", 0),
        ("end", last),
        ("home", 0),
        ("j", 1),
    ]
    assert seen["last"] == ids[-1]


def test_list_keys_move_on_the_search_hits(sqlite_url: str) -> None:
    _store(sqlite_url)
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *WORD, "enter")
        await settle(pilot)
        hits = pilot.app.screen.query_one("#hits", DataTable)
        seen["rows"] = hits.row_count
        seen["focused"] = pilot.app.focused is hits
        seen["moves"] = await _walk(pilot, hits)

    drive(make_app(sqlite_url), steps, size=(80, 24))
    last = HITS - 1
    assert seen["rows"] == HITS and seen["focused"]
    assert seen["moves"] == [
        ("j", 1),
        ("j", 2),
        ("j", 3),
        ("k", 2),
        ("G", last),
        ("g", 0),
        ("end", last),
        ("home", 0),
        ("j", 1),
    ]
