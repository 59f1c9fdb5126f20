"""Capture never stops: two copies of a growing file, and a session continued locally in between (both engines).

A real shared transcript is written in chunks (lines split across chunks)
into two folders: the original, and a later, longer copy (a restored or
synced ~/.claude). `watch` follows both. Between chunks the session is
continued locally: `prepare`, `compact`, `append`. Those writes go to the
session's local continuation (a fork with its lineage); the imported,
source-side session keeps taking the file's lines. At the end every line of
the longest file is in the store, no event says duplicate, conflict or
error, and the claude-code export of the source-side session is the longest
file byte for byte.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.watch import Watcher, WatchEvent
from sessionstore.storage.write.fork import lineage
from tests.support.cli import run_cli

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
BAD = {"duplicate", "conflict", "error"}


def source_side(store: SessionStore) -> str:
    [(sid,)] = store.db.all("SELECT session_id FROM imports")
    return str(sid)


def test_two_growing_copies_and_local_writes_lose_nothing(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    data = (transcripts_dir / SPOTTER).read_bytes()
    original, copy = tmp_path / "a" / Path(SPOTTER).name, tmp_path / "b" / Path(SPOTTER).name
    original.parent.mkdir()
    copy.parent.mkdir()
    original.write_bytes(b"")
    copy.write_bytes(b"")
    events: list[WatchEvent] = []
    watcher = Watcher(store, [original.parent, copy.parent], events.append, settle_seconds=3600)
    rng = random.Random(21)
    written = {original: 0, copy: 0}
    locals_done: list[str] = []
    while written[original] < len(data):
        # The copy runs ahead of the original by up to a fifth of the file; both split lines.
        for path, lead in ((copy, len(data) // 5), (original, 0)):
            goal = min(len(data), written[original] + rng.randint(1, len(data) // 12) + lead)
            if goal > written[path]:
                with open(path, "ab") as out:
                    out.write(data[written[path] : goal])
                written[path] = goal
            watcher.sync(path)
        if store.db.one("SELECT 1 FROM imports") is None:
            continue
        sid = source_side(store)
        done = written[original] / len(data)
        if done > 0.25 and "prepare" not in locals_done:
            assert run_cli(capsys, "prepare", sid, "--db", store_url).code == 0
            locals_done.append("prepare")
        elif "prepare" in locals_done and "compact" not in locals_done:
            result = run_cli(capsys, "compact", sid, "--db", store_url)
            assert result.code == 0, result.err
            assert "its local continuation" in result.err
            locals_done.append("compact")
        elif done > 0.8 and "compact" in locals_done and "append" not in locals_done:
            message = tmp_path / "message.jsonl"
            message.write_text('{"role": "user", "content": "continued here"}\n')
            result = run_cli(capsys, "append", sid, str(message), "--db", store_url)
            assert result.code == 0, result.err
            locals_done.append("append")
    watcher.sync(original, settle=True)
    watcher.sync(copy, settle=True)
    watcher.confirm_all()
    assert locals_done == ["prepare", "compact", "append"]
    assert not [e for e in events if e.event in BAD], [e.to_dict() for e in events if e.event in BAD]
    sid = source_side(store)
    out = io.BytesIO()
    export_claude_code(store.get(sid), out)
    assert out.getvalue() == data
    once = run_cli(capsys, "watch", str(original.parent), str(copy.parent), "--once", "--json", "--db", store_url)
    assert once.code == 0 and not [e for e in map(json.loads, once.out.splitlines()) if e["event"] in BAD]
    forks = store.db.all("SELECT session_id FROM session_forks WHERE parent_id = :p", {"p": sid})
    assert len(forks) == 1, "every local write went to the one continuation"
    local = store.get(str(forks[0][0]))
    assert lineage(store.db, local.id).parent_id == sid  # type: ignore[union-attr]  # a fork: its lineage is there
    assert [m.content for m in local.transcript()][-1] == "continued here"
    assert all(m.content != "continued here" for m in store.get(sid).transcript())
