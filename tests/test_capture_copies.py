"""Copies of an imported file (a backup restored elsewhere, a moved or synced ~/.claude), on both engines.

The same source session reached through another path is recognised by its
source id and content: a longer copy extends the session with its new lines
(the result equals a one-shot import of the longer file), a copy behind or
level adds nothing and is reported as a copy, a file that only shares the
source id is imported as a session of its own, with a warning that says so.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code, export_jsonl
from sessionstore.interchange.importing import import_file
from sessionstore.interchange.watch import Watcher, WatchEvent

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
ROLLOUT_COMPACTED = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def snapshot(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    """Transcript, active view and every past view: what must not depend on how the lines came in."""
    from sessionstore.storage.read.history import boundaries, view_before

    session = store.get(session_id)
    out = io.StringIO()
    export_jsonl(session, out)
    found = boundaries(session)
    return (
        out.getvalue(),
        session.active_view(),
        [b.to_dict() for b in found],
        [[e.seq for e in view_before(session, b.index)] for b in found],
    )


def one_shot(tmp_path: Path, path: Path) -> tuple[Any, ...]:
    with SessionStore.open(f"sqlite:///{tmp_path / 'one-shot.db'}") as fresh:
        return snapshot(fresh, import_file(fresh, path).session_id or "")


def halves(transcripts_dir: Path, tmp_path: Path, name: str, head: int) -> tuple[Path, Path]:
    """The file's first `head` lines in folder a/, the whole file (a later, longer copy) in folder b/."""
    data = (transcripts_dir / name).read_bytes()
    lines = data.splitlines(keepends=True)
    first, second = tmp_path / "a" / Path(name).name, tmp_path / "b" / Path(name).name
    first.parent.mkdir()
    second.parent.mkdir()
    first.write_bytes(b"".join(lines[:head]))
    second.write_bytes(data)
    return first, second


@pytest.mark.parametrize("name", [SPOTTER, ROLLOUT_COMPACTED])
def test_a_longer_copy_in_another_folder_extends_the_session(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path, name: str
) -> None:
    first, second = halves(transcripts_dir, tmp_path, name, 500)
    before = import_file(store, first)
    after = import_file(store, second)
    assert (after.status, after.session_id) == ("grown", before.session_id)
    assert after.lines_added == len(second.read_bytes().splitlines()) - 500
    assert snapshot(store, before.session_id or "") == one_shot(tmp_path, second)
    assert [s["id"] for s in store.list()] == [before.session_id]


def test_a_copy_behind_or_level_adds_nothing_and_says_it_is_a_copy(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    first, second = halves(transcripts_dir, tmp_path, SPOTTER, 500)
    whole = import_file(store, second)
    copy = import_file(store, first)
    assert (copy.status, copy.session_id, copy.messages_added) == ("copy", whole.session_id, 0)
    assert import_file(store, first).status == "unchanged"
    out = io.BytesIO()
    export_claude_code(store.get(whole.session_id or ""), out)
    assert out.getvalue() == second.read_bytes()


def test_a_copy_behind_that_grows_level_then_past_the_session_feeds_it(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    data = (transcripts_dir / SPOTTER).read_bytes()
    lines = data.splitlines(keepends=True)
    first, second = halves(transcripts_dir, tmp_path, SPOTTER, 300)
    second.write_bytes(b"".join(lines[:900]))
    sid = import_file(store, first).session_id
    assert import_file(store, second).status == "grown"
    first.write_bytes(b"".join(lines[:700]))
    assert (import_file(store, first).status, import_file(store, first).messages_added) == ("unchanged", 0)
    first.write_bytes(data)
    grown = import_file(store, first)
    assert (grown.status, grown.session_id, grown.lines_added) == ("grown", sid, len(lines) - 900)
    out = io.BytesIO()
    export_claude_code(store.get(sid or ""), out)
    assert out.getvalue() == data


def test_a_file_that_only_shares_the_source_id_is_a_session_of_its_own(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    data = (transcripts_dir / SPOTTER).read_bytes()
    lines = data.splitlines(keepends=True)
    first, second = halves(transcripts_dir, tmp_path, SPOTTER, 400)
    second.write_bytes(b"".join(lines[:200] + lines[250:600]))
    one = import_file(store, first)
    other = import_file(store, second)
    assert other.status == "imported" and other.session_id != one.session_id
    assert any("shares its first 200 line(s)" in w and "imported as a session of its own" in w for w in other.warnings)
    out = io.BytesIO()
    export_claude_code(store.get(other.session_id or ""), out)
    assert out.getvalue() == second.read_bytes()


def test_watch_on_both_folders_reports_no_duplicate(store: SessionStore, transcripts_dir: Path, tmp_path: Path) -> None:
    first, second = halves(transcripts_dir, tmp_path, SPOTTER, 500)
    events: list[WatchEvent] = []
    watcher = Watcher(store, [tmp_path / "a", tmp_path / "b"], events.append, settle_seconds=3600)
    watcher.sync_all()
    watcher.confirm_all()
    kinds = sorted(e.event for e in events)
    assert "duplicate" not in kinds and "conflict" not in kinds, events
    out = io.BytesIO()
    sessions = store.list()
    assert len(sessions) == 1
    export_claude_code(store.get(sessions[0]["id"]), out)
    assert out.getvalue() == second.read_bytes()
