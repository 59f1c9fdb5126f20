"""Many machines, one store: a session records the host it was captured on, and the same source file
seen from two machines (a synced ~/.claude under two home folders) is one session, every line once.

The host is SESSIONSTORE_HOST (else the machine's name), so two watchers on one machine stand in for
two machines.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from sessionstore import Config, SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.importing import import_file
from sessionstore.storage.read.paging import list_sessions
from tests.support.cli import run_cli
from tests.test_watch import FASTHOOKS, WatchProcess, watchers, writer  # noqa: F401  (watchers: a fixture)


def wait_for_file(url: str, path: Path, size: int, timeout: float = 60.0) -> None:
    """Until the store's offsets for the file at `path` reach `size` bytes."""
    import time

    deadline = time.monotonic() + timeout
    done = -1
    while done != size:
        assert time.monotonic() < deadline, f"{path}: {done} of {size} bytes in the store after {timeout}s"
        time.sleep(0.1)
        with SessionStore.open(url) as store:
            row = store.db.one("SELECT bytes_done FROM import_files WHERE path = :p", {"p": str(path.resolve())})
        done = int(row[0]) if row else -1


def _open(url: str, host: str) -> SessionStore:
    return SessionStore.open(url, config=Config.from_env(host=host))


def _sessions(url: str) -> list[dict]:
    with SessionStore.open(url) as store:
        return store.list(limit=1000)


def _exported(url: str, session_id: str) -> bytes:
    with SessionStore.open(url) as store:
        out = io.BytesIO()
        export_claude_code(store.get(session_id), out)
        return out.getvalue()


def test_a_session_records_its_host_and_filters_by_it(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with _open(store_url, "alpha") as store:
        a = store.create_session(title="on alpha")
        a.append({"role": "user", "content": "the kettle is on alpha"})
    with _open(store_url, "beta") as store:
        b = store.create_session(title="on beta")
        b.append({"role": "user", "content": "the kettle is on beta"})
        assert store.get(a.id).host == "alpha" and store.get(b.id).host == "beta"
        assert [r["id"] for r in store.list(host="alpha")] == [a.id]
        assert {h.session for h in store.search("kettle", host="beta")} == {b.id}
    listed = run_cli(capsys, "sessions", "--host", "beta", "--json", "--db", store_url)
    assert [r["id"] for r in json.loads(listed.out)] == [b.id] and json.loads(listed.out)[0]["host"] == "beta"
    found = run_cli(capsys, "search", "kettle", "--host", "alpha", "--json", "--db", store_url)
    assert [h["session"] for h in json.loads(found.out)["hits"]] == [a.id]
    table = run_cli(capsys, "sessions", "--db", store_url)
    assert "host" in table.out and "alpha" in table.out
    with SessionStore.open(store_url) as store:
        assert [r.id for r in list_sessions(store.db, text="host:alpha")] == [a.id]
        assert [r.id for r in list_sessions(store.db, text="on host:beta")] == [b.id]
        assert [r.id for r in list_sessions(store.db, text="host:gamma")] == []


def test_the_same_file_from_two_hosts_is_one_session(store_url: str, transcripts_dir: Path, tmp_path: Path) -> None:
    source = (transcripts_dir / FASTHOOKS).read_bytes()
    lines = source.splitlines(keepends=True)
    half = len(lines) // 2
    on_alpha = tmp_path / "alpha" / ".claude" / "projects" / "p" / "s.jsonl"
    on_beta = tmp_path / "beta" / ".claude" / "projects" / "p" / "s.jsonl"
    for path in (on_alpha, on_beta):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"".join(lines[:half]))
    with _open(store_url, "alpha") as store:
        first = import_file(store, on_alpha, live=True)
    with _open(store_url, "beta") as store:
        again = import_file(store, on_beta, live=True)
        # Recognised as a copy of the stored source (sessionstore.interchange.copies): nothing new, same session.
        assert (again.status, again.session_id, again.lines_added) == ("copy", first.session_id, 0)
        on_beta.write_bytes(b"".join(lines[: half + 3]))
        grown = import_file(store, on_beta, live=True)
        assert (grown.status, grown.session_id, grown.lines_added) == ("grown", first.session_id, 3)
    shutil.copyfile(transcripts_dir / FASTHOOKS, on_alpha)
    with _open(store_url, "alpha") as store:
        rest = import_file(store, on_alpha, live=True)
        assert (rest.session_id, rest.lines_added) == (first.session_id, len(lines) - half - 3)
    assert [(r["id"], r["host"]) for r in _sessions(store_url)] == [(first.session_id, "alpha")]
    assert _exported(store_url, first.session_id) == source


def test_two_watchers_on_two_hosts_capture_each_session_once(
    store_url: str,
    transcripts_dir: Path,
    tmp_path: Path,
    watchers: list[WatchProcess],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two machines (watchers with different host names) follow their own copies of one growing file."""
    source = transcripts_dir / FASTHOOKS
    roots = [tmp_path / "alpha" / "projects", tmp_path / "beta" / "projects"]
    started = []
    for host, root in zip(("alpha", "beta"), roots, strict=True):
        root.mkdir(parents=True)
        monkeypatch.setenv("SESSIONSTORE_HOST", host)
        started.append(WatchProcess(store_url, root))
    watchers += started
    for w in started:
        w.wait_event("watching")
    copies = [
        writer(source, root / "s.jsonl", seed=seed, max_pause=0.05) for seed, root in zip((5, 9), roots, strict=True)
    ]
    assert [c.wait(timeout=120) for c in copies] == [0, 0]
    size = source.stat().st_size
    total = len(source.read_bytes().splitlines())
    # Each host is done once the store holds its own copy's every byte (the copies' offsets are kept per path).
    for root in roots:
        wait_for_file(store_url, root / "s.jsonl", size)
    for w in started:
        # A synced copy is the same session, not a duplicate of it: both hosts keep capturing it.
        assert [e for e in w.events if e["event"] in ("error", "conflict", "duplicate")] == []
        assert w.proc.poll() is None, w.stderr()
    added = sum(e["lines_added"] for w in started for e in w.events if e["event"] in ("imported", "grown"))
    assert added == total, "every line imported once, on one host or the other"
    sessions = _sessions(store_url)
    assert len(sessions) == 1 and sessions[0]["host"] in ("alpha", "beta")
    assert _exported(store_url, sessions[0]["id"]) == source.read_bytes()
    assert size == len(source.read_bytes())
