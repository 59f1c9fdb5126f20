"""`import` and `watch` follow symlinked folders inside the given root, never out of it (both engines).

A link whose real location is inside the root is walked (each real folder
once: a link back up is no loop); a link that leads out of the root is not
followed (the hostile-input rule: capture never reads outside its root).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_paths, transcript_files
from sessionstore.interchange.tree import transcripts_under
from sessionstore.interchange.watch import Watcher, WatchEvent
from tests.support.cli import run_cli

FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
TOOL_HEAVY = "claude-code/spotter/tool_heavy.jsonl"


def linked_root(transcripts_dir: Path, tmp_path: Path) -> Path:
    """root/projects/p -> root/real/p (inside), root/projects/out -> a folder outside root, and a loop; returns root."""
    root = tmp_path / "root"
    (root / "real" / "p").mkdir(parents=True)
    (root / "projects").mkdir()
    shutil.copy(transcripts_dir / FASTHOOKS, root / "real" / "p" / "inside.jsonl")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copy(transcripts_dir / TOOL_HEAVY, outside / "outside.jsonl")
    (root / "projects" / "p").symlink_to(root / "real" / "p", target_is_directory=True)
    (root / "projects" / "out").symlink_to(outside, target_is_directory=True)
    (root / "real" / "p" / "loop").symlink_to(root / "real", target_is_directory=True)
    return root


def test_import_follows_a_linked_folder_inside_the_root_only(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    projects = linked_root(transcripts_dir, tmp_path)
    assert [p.name for p in transcript_files([projects])] == ["inside.jsonl"]
    results = import_paths(store, [projects])
    assert [(Path(r.path).name, r.status) for r in results] == [("out", "skipped"), ("inside.jsonl", "imported")]
    assert "--follow-symlinks" in results[0].warnings[0], "the folder that leads out is said, not walked"


def test_watch_once_follows_a_linked_folder_inside_the_root_only(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    projects = linked_root(transcripts_dir, tmp_path)
    result = run_cli(capsys, "watch", str(projects), "--once", "--json", "--db", store_url)
    assert result.code == 0, result.err
    with SessionStore.open(store_url) as store:
        names = {Path(p).name for (p,) in store.db.all("SELECT path FROM imports")}
        assert names == {"inside.jsonl"}
        events: list[object] = []
        assert [p.name for p in Watcher(store, [projects], events.append).files()] == ["inside.jsonl"]


def test_a_linked_folder_is_walked_through_its_link(transcripts_dir: Path, tmp_path: Path) -> None:
    """The walk goes through root/projects/p (the link) and does not walk its target root/real/p again."""
    root = linked_root(transcripts_dir, tmp_path)
    walked = list(transcripts_under(root))
    assert walked == [root / "projects" / "p" / "inside.jsonl"]


def test_a_folder_linked_out_of_the_root_is_said_once_and_taken_with_follow_symlinks(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    """Its files are reachable only through the link: skipped (and said) by default, imported with the flag."""
    root = linked_root(transcripts_dir, tmp_path)
    result = run_cli(capsys, "import", "claude-code", str(root), "--json", "--db", store_url)
    assert result.code == 0, result.err
    notes = [line for line in result.err.splitlines() if "elsewhere" in line]
    assert len(notes) == 1 and "out" in notes[0] and "--follow-symlinks" in notes[0], result.err
    with SessionStore.open(store_url) as store:
        assert {Path(p).name for (p,) in store.db.all("SELECT path FROM imports")} == {"inside.jsonl"}
    again = run_cli(capsys, "import", "claude-code", str(root), "--follow-symlinks", "--json", "--db", store_url)
    assert again.code == 0, again.err
    assert "elsewhere" not in again.err
    with SessionStore.open(store_url) as store:
        names = sorted(Path(p).name for (p,) in store.db.all("SELECT path FROM imports"))
        assert names == ["inside.jsonl", "outside.jsonl"]


def test_a_watcher_says_a_folder_linked_out_once_and_follows_it_when_told(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    root = linked_root(transcripts_dir, tmp_path)
    events: list[WatchEvent] = []
    watcher = Watcher(store, [root], events.append)
    watcher.sync_all()
    watcher.sync_all()
    skipped = [e for e in events if e.event == "skipped"]
    assert len(skipped) == 1 and skipped[0].path == str(root.resolve() / "projects" / "out"), events
    assert "--follow-symlinks" in (skipped[0].message or "")
    followed = Watcher(store, [root], events.append, follow_symlinks=True).files()
    assert sorted(p.name for p in followed) == ["inside.jsonl", "outside.jsonl"]
