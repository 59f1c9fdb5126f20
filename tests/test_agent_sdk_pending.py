"""An Agent SDK append keeps its entries and returns; their lines become the session afterwards, and nothing is lost.

The adapter imports a key's pending entries (`imported_count < entry_count`) once its appends
pause, on `flush()` and on `close()`. A process that stops in between leaves them kept and
pending: the next `sessionstore` command imports them before it reads (a read-only command
through a writable open of its own), and says so in one line when it cannot. Both engines.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")

from sessionstore import SessionStore, StoreBusy  # noqa: E402
from sessionstore.integrations import sdk_entries  # noqa: E402
from sessionstore.integrations.agent_sdk import AgentSdkStore  # noqa: E402
from tests.support.cli import run_cli  # noqa: E402

KEY = {"project_key": "-work-project", "session_id": "258c7280-ae70-4798-800f-63464d01a85d"}
LINES = 300
SCRIPT = Path(sys.executable).parent / "sessionstore"


@pytest.fixture
def url(store_url: str) -> str:
    """A new, migrated store on each engine."""
    return store_url


def _entries(transcripts_dir: Path) -> list[dict[str, Any]]:
    path = transcripts_dir / "claude-code" / "spotter" / f"{KEY['session_id']}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()][:LINES]


def _append(adapter: AgentSdkStore, entries: list[dict[str, Any]]) -> None:
    for start in range(0, len(entries), 100):
        asyncio.run(adapter.append(KEY, entries[start : start + 100]))  # type: ignore[arg-type]


def _key(url: str) -> tuple[int, int, str | None]:
    """(entries, imported, linked session) of the one key."""
    with SessionStore.open(url) as store:
        row = store.db.one("SELECT entry_count, imported_count, linked_session FROM agent_sdk_keys")
    return int(row[0]), int(row[1]), row[2]


def _sessions(url: str) -> int:
    with SessionStore.open(url) as store:
        return int(store.db.one("SELECT count(*) FROM sessions")[0])


def test_an_append_keeps_its_entries_and_flush_makes_the_session(url: str, transcripts_dir: Path) -> None:
    entries = _entries(transcripts_dir)
    adapter = AgentSdkStore.open(url, import_after=None)
    try:
        _append(adapter, entries)
        assert _key(url) == (LINES, 0, None) and _sessions(url) == 0
        assert asyncio.run(adapter.load(KEY)) == entries  # type: ignore[arg-type]
        assert asyncio.run(adapter.flush()) == 1
        count, imported, linked = _key(url)
        assert (count, imported) == (LINES, LINES) and linked is not None
        assert asyncio.run(adapter.flush()) == 0
        with SessionStore.open(url) as store:
            assert len(list(store.get(linked).transcript())) > 0
    finally:
        adapter.close()


def test_the_adapter_imports_once_its_appends_pause(url: str, transcripts_dir: Path) -> None:
    adapter = AgentSdkStore.open(url, import_after=0.05)
    try:
        _append(adapter, _entries(transcripts_dir))
        deadline = time.monotonic() + 60
        while _key(url)[1] < LINES and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _key(url)[1] == LINES and _sessions(url) == 1
    finally:
        adapter.close()


def test_close_imports_what_is_pending(url: str, transcripts_dir: Path) -> None:
    adapter = AgentSdkStore.open(url, import_after=None)
    _append(adapter, _entries(transcripts_dir))
    adapter.close()
    assert _key(url)[1] == LINES and _sessions(url) == 1


def test_a_process_that_stops_before_the_import_loses_nothing(url: str, transcripts_dir: Path) -> None:
    """The child appends and dies before its appends pause; the next command shows the session."""
    child = textwrap.dedent(
        f"""
        import asyncio, json, os, sys
        from sessionstore.integrations.agent_sdk import AgentSdkStore
        entries = json.loads(sys.stdin.read())
        adapter = AgentSdkStore.open({url!r}, import_after=None)
        for start in range(0, len(entries), 100):
            asyncio.run(adapter.append({KEY!r}, entries[start : start + 100]))
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child],
        input=json.dumps(_entries(transcripts_dir)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert _key(url)[:2] == (LINES, 0) and _sessions(url) == 0
    listed = subprocess.run(
        [str(SCRIPT), "sessions", "--json", "--db", url], capture_output=True, text=True, timeout=300
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == ""
    (session,) = json.loads(listed.stdout)
    assert _key(url) == (LINES, LINES, session["id"])
    history = subprocess.run(
        [str(SCRIPT), "history", session["id"], "--json", "--db", url], capture_output=True, text=True, timeout=300
    )
    assert history.returncode == 0, history.stderr


def test_a_command_that_cannot_import_says_so_and_goes_on(
    url: str, transcripts_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = AgentSdkStore(SessionStore.open(url), owns_store=True, import_after=None)
    _append(adapter, _entries(transcripts_dir))
    adapter.store.close()  # the adapter's process is gone before its close: nothing was imported
    adapter.close()

    def busy(*_: Any, **__: Any) -> int:
        raise StoreBusy("database is locked")

    monkeypatch.setattr(sdk_entries, "catch_up", busy)
    result = run_cli(capsys, "sessions", "--json", "--db", url)
    assert result.code == 0
    assert json.loads(result.out) == []
    assert result.err.count("\n") == 1 and "Agent SDK entries are kept but not yet in their sessions" in result.err
    assert "database is locked" in result.err
    assert _key(url)[:2] == (LINES, 0)


def test_an_adapter_whose_store_closed_under_it_stops_quietly(
    url: str, transcripts_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SessionStore.open(url)
    adapter = AgentSdkStore(store, import_after=0.05)
    _append(adapter, _entries(transcripts_dir)[:100])
    store.close()
    adapter.close()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    with AgentSdkStore.open(url) as later:
        assert asyncio.run(later.flush()) in (0, 1)
    assert _key(url)[1] == 100
