"""`watch` and `import DIR` take no file whose link leads out of the watched folder (said once),
unless --follow-symlinks; both engines.

The outside file is a valid transcript with a recognizable text, so a test sees it neither
imported nor recorded under its outside path.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.confine import inside_root
from sessionstore.interchange.watch import Watcher, WatchEvent
from tests.support.cli import run_cli
from tests.test_watch import WatchProcess, watchers  # noqa: F401  (the fixture)

OUTSIDE_TEXT = "outside-secret-transcript-text"


def _transcript(path: Path, text: str) -> Path:
    """A one-exchange Claude Code transcript saying `text`."""
    sid, first, second = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    lines = [
        {
            "type": "user",
            "uuid": first,
            "parentUuid": None,
            "sessionId": sid,
            "cwd": "/tmp",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": text},
        },
        {
            "type": "assistant",
            "uuid": second,
            "parentUuid": first,
            "sessionId": sid,
            "cwd": "/tmp",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {
                "id": f"msg_{sid[:8]}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
            },
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, Path]:
    """A watched folder with a real file, a link to a file inside it, and a link leading outside."""
    root = tmp_path / "projects"
    inside = _transcript(root / "p" / "inside.jsonl", "inside text")
    outside = _transcript(tmp_path / "elsewhere" / "private.jsonl", OUTSIDE_TEXT)
    (root / "p" / "escape.jsonl").symlink_to(outside)
    (root / "p" / "alias.jsonl").symlink_to(inside)
    return {"root": root, "inside": inside, "outside": outside, "link": root / "p" / "escape.jsonl"}


def _paths(store: SessionStore) -> set[str]:
    return {str(r[0]) for r in store.db.all("SELECT path FROM imports", {})}


def test_inside_root_resolves_links_and_dots(planted: dict[str, Path]) -> None:
    root = planted["root"]
    assert inside_root(planted["inside"], root) and inside_root(root / "p" / "alias.jsonl", root)
    assert not inside_root(planted["link"], root)
    assert not inside_root(root / "p" / ".." / ".." / "elsewhere" / "private.jsonl", root)


def test_a_watcher_skips_a_link_out_of_its_root_and_says_so_once(store: SessionStore, planted: dict[str, Path]) -> None:
    events: list[WatchEvent] = []
    watcher = Watcher(store, [planted["root"]], events.append)
    watcher.sync_all()
    watcher.sync_all()
    watcher.files()
    skipped = [e for e in events if e.event == "skipped"]
    assert len(skipped) == 1 and skipped[0].path.endswith("escape.jsonl"), events
    assert str(planted["outside"].resolve()) in (skipped[0].message or "")
    assert _paths(store) == {str(planted["inside"].resolve())}
    assert store.search(OUTSIDE_TEXT) == []


def test_follow_symlinks_takes_the_outside_file(store: SessionStore, planted: dict[str, Path]) -> None:
    events: list[WatchEvent] = []
    Watcher(store, [planted["root"]], events.append, follow_symlinks=True).sync_all()
    assert _paths(store) == {str(planted["inside"].resolve()), str(planted["outside"].resolve())}
    assert not [e for e in events if e.event == "skipped"]


def test_a_live_watcher_skips_a_link_planted_after_it_started(
    store_url: str,
    tmp_path: Path,
    watchers: list[Any],  # noqa: F811  (the fixture imported above)
) -> None:
    root = tmp_path / "live"
    root.mkdir()
    outside = _transcript(tmp_path / "away" / "private.jsonl", OUTSIDE_TEXT)
    watcher = WatchProcess(store_url, root)
    watchers.append(watcher)
    watcher.wait_event("watching")
    (root / "escape.jsonl").symlink_to(outside)
    _transcript(root / "later.jsonl", "a real later file")
    skipped = watcher.wait_event("skipped")
    assert skipped["path"].endswith("escape.jsonl") and str(outside.resolve()) in skipped["message"]
    watcher.wait_event("imported")
    with SessionStore.open(store_url) as store:
        assert str(outside.resolve()) not in _paths(store)
        assert store.search(OUTSIDE_TEXT) == []


def test_import_of_a_folder_skips_the_link_with_one_warning(
    capsys: pytest.CaptureFixture[str], store_url: str, planted: dict[str, Path]
) -> None:
    result = run_cli(capsys, "import", "claude-code", str(planted["root"]), "--json", "--db", store_url)
    assert result.code == 0, result.err
    notes = [line for line in result.err.splitlines() if "escape.jsonl" in line]
    assert len(notes) == 1 and "--follow-symlinks" in notes[0], result.err
    with SessionStore.open(store_url) as store:
        assert _paths(store) == {str(planted["inside"].resolve())}
    again = run_cli(
        capsys, "import", "claude-code", str(planted["root"]), "--follow-symlinks", "--json", "--db", store_url
    )
    assert again.code == 0, again.err
    with SessionStore.open(store_url) as store:
        assert str(planted["outside"].resolve()) in _paths(store)


def test_the_api_import_reports_the_link_as_skipped(store: SessionStore, planted: dict[str, Path]) -> None:
    from sessionstore.interchange.importing import import_paths

    results = import_paths(store, [planted["root"]])
    skipped = [r for r in results if r.status == "skipped"]
    assert len(skipped) == 1 and skipped[0].path.endswith("escape.jsonl") and "outside" in skipped[0].warnings[0]
    assert _paths(store) == {str(planted["inside"].resolve())}
    assert os.path.islink(planted["link"])
