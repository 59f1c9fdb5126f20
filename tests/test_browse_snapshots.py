"""SVG snapshots of every browser screen at 80x24 and 120x40, on fixed data.

The store is built from a seeded conversation with fixed uuids and
timestamps; the compactions' own uuids and times are fixed while it is
built, and the clock is UTC, so the pictures only change when the screens
do. Update with `pytest tests/test_browse_snapshots.py --snapshot-update`
after looking at the report.
"""

from __future__ import annotations

import itertools
import time
import uuid as uuid_mod
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from sessionstore import SessionStore
from sessionstore.cli.browse.app import make_app
from sessionstore.compaction.engine import compact
from sessionstore.storage.records import validate
from textual.pilot import Pilot
from tests.support.messages import conversation

SESSION = "5e55101a-7e57-4000-8000-000000000001"
OTHER = "0a7e0000-7e57-4000-8000-000000000002"
START = datetime(2024, 3, 5, 9, 0, tzinfo=timezone.utc)
SIZES = [(80, 24), (120, 40)]


def fixed(messages: list[dict[str, Any]], first: int) -> list[dict[str, Any]]:
    """The messages with uuids and timestamps that depend only on their place in the conversation."""
    out = []
    for i, m in enumerate(messages, first):
        stamp = (START + timedelta(seconds=41 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        out.append({**m, "uuid": f"00000000-0000-4000-8000-{i:012d}", "timestamp": stamp})
    return out


def whole_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cut back to a finished assistant turn, so the batch can be compacted."""
    while messages[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in messages[-1]["content"]):
        messages.pop()
    return messages


@pytest.fixture
def snapshot_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A SQLite store with two sessions, the main one compacted twice (full, then partial keeping a suffix)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    counter = itertools.count(1)
    monkeypatch.setattr(uuid_mod, "uuid4", lambda: uuid_mod.UUID(int=(0xC0 << 120) + next(counter)))
    clock = (START + timedelta(hours=h) for h in itertools.count(20))
    monkeypatch.setattr(validate, "_now_iso", lambda: next(clock).strftime("%Y-%m-%dT%H:%M:%S.000Z"))
    url = f"sqlite:///{tmp_path / 'snap.db'}"
    with SessionStore.open(url) as store:
        other = store.create_session(
            session_id=OTHER,
            title="docs: explain the --dry-run flag",
            model="claude-haiku-4-5-20251001",
            cwd="/home/me/projects/sync",
        )
        other.append_many(fixed(whole_turns(list(conversation(30, seed=3))), 5000))
        s = store.create_session(
            session_id=SESSION,
            title="textstats: fix the failing word-count test",
            model="claude-sonnet-4-5-20250929",
            cwd="/home/me/projects/textstats",
        )
        source = list(conversation(900, seed=7))
        s.append_many(fixed(whole_turns(source[:400]), 0))
        compact(s)
        s.append_many(fixed(whole_turns(source[400:800]), 400))
        users = [e for e in s.active_entries() if e.role == "user" and isinstance(e.content, str)]
        compact(s, up_to_uuid=users[-2].uuid)
        s.append_many(fixed(source[800:830], 800))
        for n, sid in enumerate((OTHER, SESSION)):
            store.db.execute(
                "UPDATE sessions SET created_at = :t, updated_at = :t WHERE id = :id",
                {"t": START.timestamp() + 86400 * n, "id": sid},
            ).close()
            store.db.execute(
                "UPDATE messages SET written_at = :t WHERE session_id = :id",
                {"t": START.timestamp() + 86400 * n, "id": sid},
            ).close()
        store.db.execute("UPDATE compactions SET created_at = :t", {"t": START.timestamp()}).close()
    yield url
    monkeypatch.delenv("TZ")
    time.tzset()


Steps = Callable[[Pilot[None]], Any]


def check(snap_compare: Any, url: str, size: tuple[int, int], steps: list[str], *, session: str | None = None) -> None:
    app = make_app(url, session_id=session)

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.pause()
        for key in steps:
            await pilot.press(key)
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=size, run_before=run_before)
    finally:
        app.store.close()


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_sessions_screen(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, [])


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_session_screen(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["enter"])


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_boundary_screen_view_before(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["b", "down", "enter"], session=SESSION)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_boundary_screen_summary(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["b", "enter", "2"], session=SESSION)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_boundary_screen_preserved(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["b", "down", "enter", "3"], session=SESSION)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_message_screen(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["end", "up", "up", "enter"], session=SESSION)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_export_picker(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["e", "down"], session=SESSION)


def test_session_screen_light(snap_compare: Any, snapshot_url: str) -> None:
    """The light theme (`--light`, Ctrl+T) at 80x24."""
    app = make_app(snapshot_url, session_id=SESSION, light=True)
    try:
        assert snap_compare(app, terminal_size=(80, 24))
    finally:
        app.store.close()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_search_hits(snap_compare: Any, snapshot_url: str, size: tuple[int, int]) -> None:
    check(snap_compare, snapshot_url, size, ["slash", *"test_sync", "enter", "down"])
