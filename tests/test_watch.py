"""`sessionstore watch`: capture files as they grow, whole lines only, restart-safe, on both engines.

The live tests run the real command in a subprocess next to a writer
process (tests/support/slowwriter.py) that appends a real transcript in
random chunks, splitting lines, with pauses. What the store holds at the end
is compared with the file itself (`export --format claude-code` byte for
byte) or with a one-shot import of the finished file (Codex).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code, export_jsonl
from sessionstore.interchange.importing import import_file
from sessionstore.interchange.watch import Watcher, WatchEvent
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parent.parent
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
TOOL_HEAVY = "claude-code/spotter/tool_heavy.jsonl"
ROLLOUT = "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
ROLLOUT_COMPACTED = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
SETTLE = "2"


# ------------------------------------------------------------ helpers


def imported_bytes(url: str, path: Path) -> int:
    """How many bytes of `path` the store holds (-1 when it has none of it)."""
    with SessionStore.open(url) as store:
        row = store.db.one("SELECT bytes_done FROM imports WHERE path = :p", {"p": str(path.resolve())})
    return int(row[0]) if row else -1


def wait_for(url: str, path: Path, size: int, timeout: float = 60.0) -> None:
    """Until the store holds the first `size` bytes of `path`."""
    deadline = time.monotonic() + timeout
    while imported_bytes(url, path) != size:
        assert time.monotonic() < deadline, f"{path.name}: {imported_bytes(url, path)} of {size} bytes after {timeout}s"
        time.sleep(0.1)


def session_of(url: str, path: Path) -> str:
    with SessionStore.open(url) as store:
        return str(store.db.one("SELECT session_id FROM imports WHERE path = :p", {"p": str(path.resolve())})[0])


def claude_export(url: str, path: Path) -> bytes:
    with SessionStore.open(url) as store:
        out = io.BytesIO()
        export_claude_code(store.get(session_of(url, path)), out)
        return out.getvalue()


def transcript_and_view(url: str, session_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The jsonl export (every message, usage included) and the active view's messages."""
    with SessionStore.open(url) as store:
        session = store.get(session_id)
        out = io.StringIO()
        export_jsonl(session, out)
        return [json.loads(line) for line in out.getvalue().splitlines()], session.active_view()


def half_line_warning(warning: str) -> bool:
    """A warning about a line seen before it was whole."""
    return any(word in warning for word in ("truncated", "malformed", "UTF-8", "no line terminator"))


class WatchProcess:
    """`sessionstore watch ROOT --json` in a subprocess, its JSON lines gathered by a thread."""

    def __init__(self, url: str, *roots: Path) -> None:
        env = dict(os.environ, SESSIONSTORE_WATCH_SETTLE_SECONDS=SETTLE, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sessionstore", "watch", *map(str, roots), "--json", "--db", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
        )
        self.events: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def writes(self) -> int:
        """How many times this watcher has written lines to the store so far."""
        return sum(1 for e in list(self.events) if e["event"] in ("imported", "grown"))

    def said(self, kind: str) -> bool:
        return any(e["event"] == kind for e in list(self.events))

    def wait_for(self, condition: Callable[[], bool], timeout: float = 60.0) -> None:
        """Until `condition()` holds (polled), while the watcher runs."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"condition not met in {timeout}s: {self.events}"
            assert self.proc.poll() is None, self.stderr()
            time.sleep(0.05)

    def wait_event(self, kind: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((e for e in self.events if e["event"] == kind), None)
            if found is not None:
                return found
            assert self.proc.poll() is None, self.stderr()
            time.sleep(0.05)
        raise AssertionError(f"no {kind!r} event in {timeout}s: {self.events}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.reader.join(timeout=10)

    def stderr(self) -> str:
        return self.proc.stderr.read().decode() if self.proc.poll() is not None and self.proc.stderr else ""


@pytest.fixture
def watchers() -> Iterator[list[WatchProcess]]:
    started: list[WatchProcess] = []
    yield started
    for w in started:
        w.kill()


def writer(source: Path, target: Path, seed: int, max_pause: float = 0.15) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.slowwriter", str(source), str(target), str(seed), str(max_pause)],
        cwd=REPO,
    )


# ------------------------------------------------------------ in-process: whole lines, truncation, deletion


def test_a_half_written_last_line_waits_unwarned(store: SessionStore, transcripts_dir: Path, tmp_path: Path) -> None:
    data = (transcripts_dir / FASTHOOKS).read_bytes()
    lines = data.splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    events: list[WatchEvent] = []
    watcher = Watcher(store, [tmp_path], events.append)
    path.write_bytes(lines[0][:7])
    assert watcher.sync(path) is None, "no whole line yet: nothing to import, no session"
    assert store.list() == []
    half = len(lines[10]) // 2
    path.write_bytes(b"".join(lines[:10]) + lines[10][:half])
    first = watcher.sync(path)
    assert first is not None and first.event == "imported"
    assert (first.lines_added, first.warnings) == (10, [])
    with open(path, "ab") as f:
        f.write(lines[10][half:] + lines[11][:3])
    second = watcher.sync(path)
    assert second is not None and (second.event, second.lines_added, second.warnings) == ("grown", 1, [])
    with open(path, "ab") as f:
        f.write(b"".join(lines[11:])[3:])
    third = watcher.sync(path)
    assert third is not None and third.lines_added == len(lines) - 11
    out = io.BytesIO()
    export_claude_code(store.get(third.session_id or ""), out)
    assert out.getvalue() == data
    assert watcher.sync(path) is None, "nothing new"


def test_a_rewritten_file_is_reported_once_and_its_lines_kept(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    data = (transcripts_dir / FASTHOOKS).read_bytes()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    events: list[WatchEvent] = []
    watcher = Watcher(store, [tmp_path], events.append)
    imported = watcher.sync(path)
    assert imported is not None
    path.write_bytes(data[: len(data) // 3].rsplit(b"\n", 1)[0] + b"\n")
    conflict = watcher.sync(path)
    assert conflict is not None and conflict.event == "conflict" and "kept" in (conflict.message or "")
    assert conflict.session_id == imported.session_id and "truncated" in (conflict.message or "")
    assert watcher.sync(path) is None, "reported once"
    out = io.BytesIO()
    export_claude_code(store.get(imported.session_id or ""), out)
    assert out.getvalue() == data, "every imported line is still there"


@pytest.mark.parametrize("left", [b"", b'{"type": "user", "mess'], ids=["emptied", "less-than-a-line"])
def test_an_emptied_file_is_reported_and_its_lines_kept(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path, left: bytes
) -> None:
    """A file cut to nothing (or to less than one whole line) was silent: it looked like a new, empty file."""
    data = (transcripts_dir / FASTHOOKS).read_bytes()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    watcher = Watcher(store, [tmp_path], lambda event: None)
    imported = watcher.sync(path)
    assert imported is not None and imported.session_id
    path.write_bytes(left)
    conflict = watcher.sync(path)
    assert conflict is not None and conflict.event == "conflict", conflict
    assert conflict.session_id == imported.session_id
    assert "truncated to 0 bytes" in (conflict.message or "") and "kept" in (conflict.message or "")
    assert not (conflict.message or "").startswith(str(path)), "the path is in the event, not repeated in its message"
    assert watcher.sync(path) is None, "reported once"
    out = io.BytesIO()
    export_claude_code(store.get(imported.session_id), out)
    assert out.getvalue() == data


def test_a_deleted_file_stays_in_the_store(store: SessionStore, transcripts_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((transcripts_dir / TOOL_HEAVY).read_bytes())
    events: list[WatchEvent] = []
    watcher = Watcher(store, [tmp_path], events.append)
    imported = watcher.sync(path)
    assert imported is not None
    before = len(list(store.get(imported.session_id or "").transcript()))
    path.unlink()
    gone = watcher.sync(path)
    assert gone is not None and gone.event == "deleted" and gone.session_id == imported.session_id
    assert len(list(store.get(imported.session_id or "").transcript())) == before
    assert [e.event for e in events] == ["imported", "deleted"]


def test_once_catches_up_on_every_file_and_prints_a_summary(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "projects"
    (root / "a").mkdir(parents=True)
    (root / "a" / "one.jsonl").write_bytes((transcripts_dir / FASTHOOKS).read_bytes())
    (root / "a" / "two.jsonl").write_bytes((transcripts_dir / TOOL_HEAVY).read_bytes()[:-40])
    result = run_cli(capsys, "watch", str(root), "--once", "--json", "--db", store_url)
    assert result.code == 0, result.err
    lines = [json.loads(line) for line in result.out.splitlines()]
    assert sorted(e["event"] for e in lines) == ["imported", "imported", "summary"]
    assert lines[-1]["event"] == "summary" and lines[-1]["changed"] == 2
    assert not any(half_line_warning(w) for e in lines[:-1] for w in e["warnings"])
    again = run_cli(capsys, "watch", str(root), "--once", "--json", "--db", store_url)
    assert [json.loads(line)["event"] for line in again.out.splitlines()] == ["summary"]
    missing = run_cli(capsys, "watch", str(tmp_path / "nowhere"), "--once", "--db", store_url)
    assert missing.code == 2 and missing.err.count("\n") == 1
    stdin = run_cli(capsys, "watch", "-", "--once", "--db", store_url)
    assert stdin.code == 2 and "not stdin" in stdin.err and "import claude-code -" in stdin.err


def test_once_names_a_file_that_is_no_transcript(
    capsys: pytest.CaptureFixture[str], store_url: str, tmp_path: Path
) -> None:
    """A `.jsonl` of something else was passed over without a word ("1 file(s) checked, 0 changed")."""
    root = tmp_path / "projects"
    root.mkdir()
    data = root / "data.jsonl"
    data.write_text('{"a": 1}\n{"b": 2}\n')
    an_hour_ago = time.time() - 3600  # settled: a file written just now may still get its first message
    os.utime(data, (an_hour_ago, an_hour_ago))
    result = run_cli(capsys, "watch", str(root), "--once", "--json", "--db", store_url)
    assert result.code == 0, result.err
    events = [json.loads(line) for line in result.out.splitlines()]
    assert [e["event"] for e in events] == ["skipped", "summary"] and events[-1]["changed"] == 0
    assert "no message in it" in events[0]["message"] and str(root / "data.jsonl") not in events[0]["message"]
    text = run_cli(capsys, "watch", str(root), "--once", "--db", store_url)
    assert text.code == 0 and "skipped" in text.out and "data.jsonl" in text.out


def test_once_says_what_a_fresh_codex_file_holds_back(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    """A response written seconds ago waits for its usage line; --once said nothing of it (22 of 23 messages)."""
    rollout = transcripts_dir / ROLLOUT
    root = tmp_path / "sessions"
    root.mkdir()
    (root / rollout.name).write_bytes(b"".join(rollout.read_bytes().splitlines(keepends=True)[:61]))
    first = run_cli(capsys, "watch", str(root), "--once", "--json", "--db", store_url)
    assert first.code == 0, first.err
    summary = json.loads(first.out.splitlines()[-1])
    assert summary["held_back_lines"] >= 1 and summary["held_back_files"] == 1
    text = run_cli(capsys, "watch", str(root), "--once", "--db", store_url)
    assert "wait for their response's usage line; the next run imports them" in text.err
    settled = time.time() - 3600
    os.utime(root / rollout.name, (settled, settled))
    last = run_cli(capsys, "watch", str(root), "--once", "--json", "--db", store_url)
    events = [json.loads(line) for line in last.out.splitlines()]
    assert events[-1]["held_back_lines"] == 0 and events[0]["messages_added"] >= 1


SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
#: SPOTTER cut after its line 643 ends amid two parallel tool calls with one result written:
#: a file being written looks like that for a moment; a session stopped there has calls unanswered.
CUT = 643
CALLS = ("d5f085ed-98cc-4ad5-bc24-6d5f6c87cdd0", "c60c99c5-9778-4bb4-bcfb-91c4f989bd29")


def _about_the_calls(warnings: list[str]) -> list[str]:
    return [w for w in warnings if any(uuid in w for uuid in CALLS)]


def _watch_the_cut(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> tuple[list[bytes], Path, Watcher, list[WatchEvent], WatchEvent]:
    """SPOTTER's lines, the file cut at CUT, its watcher (long settle time) and the first import's event."""
    lines = (transcripts_dir / SPOTTER).read_bytes().splitlines(keepends=True)
    path = tmp_path / "spotter.jsonl"
    path.write_bytes(b"".join(lines[:CUT]))
    events: list[WatchEvent] = []
    watcher = Watcher(store, [tmp_path], events.append, settle_seconds=3600)
    first = watcher.sync(path)
    assert first is not None and first.session_id and _about_the_calls(first.warnings) == []
    return lines, path, watcher, events, first


def test_a_call_waiting_for_its_result_while_the_file_is_written_is_not_warned_about(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    """Live capture saw tool calls before their results and warned "interrupted" (14 times on this file)."""
    lines, path, watcher, events, first = _watch_the_cut(store, transcripts_dir, tmp_path)
    with open(path, "ab") as f:
        f.write(b"".join(lines[CUT : CUT + 60]))
    assert watcher.sync(path) is not None
    settled = time.time() - 7200
    os.utime(path, (settled, settled))
    watcher.settle()
    assert _about_the_calls([w for e in events for w in e.warnings]) == []
    in_view = {e.uuid for e in store.get(first.session_id).active_entries()}
    assert set(CALLS) <= in_view, "both calls were answered and are in the view"


def test_a_call_still_unanswered_when_the_file_settles_is_reported_then(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    """The same file, stopped for good before the second result: the warnings come once it has settled."""
    _, path, watcher, events, first = _watch_the_cut(store, transcripts_dir, tmp_path)
    settled = time.time() - 7200
    os.utime(path, (settled, settled))
    watcher.settle()
    late = [e for e in events if e.event == "settled"]
    assert len(late) == 1 and late[0].session_id == first.session_id
    said = _about_the_calls(late[0].warnings)
    assert len(said) == 2 and all("tool_use without a tool_result" in w for w in said), late[0].warnings
    watcher.settle()
    assert len([e for e in events if e.event == "settled"]) == 1, "reported once"


# ------------------------------------------------------------ live: a real watcher process


def test_a_live_watcher_follows_a_growing_file_a_new_file_and_a_deletion(
    store_url: str, transcripts_dir: Path, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    root = tmp_path / "projects"
    root.mkdir()
    watcher = WatchProcess(store_url, root)
    watchers.append(watcher)
    watcher.wait_event("watching")
    source = transcripts_dir / TOOL_HEAVY
    target = root / "new-project" / "s.jsonl"
    target.parent.mkdir()
    w = writer(source, target, seed=1, max_pause=0.05)
    assert w.wait(timeout=120) == 0
    wait_for(store_url, target, source.stat().st_size)
    assert claude_export(store_url, target) == source.read_bytes()
    warned = [w for e in watcher.events for w in e.get("warnings", [])]
    assert not any(half_line_warning(w) for w in warned), "half-written lines are never warned about"
    assert len(warned) == len(set(warned)), "a warning is reported once"
    target.unlink()
    gone = watcher.wait_event("deleted")
    assert gone["session"] == session_of(store_url, target)


@pytest.mark.slow
def test_sigkilled_watchers_lose_and_duplicate_nothing(
    store_url: str, transcripts_dir: Path, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    sqlite_url = f"sqlite:///{tmp_path / 'one-shot.db'}"
    root = tmp_path / "home"
    (root / "claude").mkdir(parents=True)
    (root / "codex").mkdir()
    claude_source, codex_source = transcripts_dir / FASTHOOKS, transcripts_dir / ROLLOUT
    claude_target, codex_target = root / "claude" / "s.jsonl", root / "codex" / codex_source.name
    writers = [writer(claude_source, claude_target, seed=7), writer(codex_source, codex_target, seed=8)]
    kills = 0
    while any(w.poll() is None for w in writers) or kills < 3:
        watcher = WatchProcess(store_url, root)
        watchers.append(watcher)
        # Killed at a different point each time: after its first, second or third write to the store
        # (or, once the writers are done, as soon as it follows changes), never after a fixed time.
        watcher.wait_for(
            lambda w=watcher, n=kills % 3: (
                w.writes() > n or (all(p.poll() is not None for p in writers) and w.said("watching"))
            )
        )
        watcher.kill()
        kills += 1
    assert [w.wait() for w in writers] == [0, 0]
    assert claude_target.read_bytes() == claude_source.read_bytes()

    last = WatchProcess(store_url, root)
    watchers.append(last)
    wait_for(store_url, claude_target, claude_source.stat().st_size)
    wait_for(store_url, codex_target, codex_source.stat().st_size, timeout=90)
    last.kill()

    assert claude_export(store_url, claude_target) == claude_source.read_bytes()
    with SessionStore.open(sqlite_url) as fresh:
        once = import_file(fresh, codex_target)
    assert transcript_and_view(store_url, session_of(store_url, codex_target)) == transcript_and_view(
        sqlite_url, once.session_id or ""
    )
    assert kills >= 3


def store_snapshot(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    """Transcript, active view and every past view of a session: what must not depend on how it came in."""
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


@pytest.mark.parametrize("name", [FASTHOOKS, ROLLOUT, ROLLOUT_COMPACTED])
def test_following_a_file_chunk_by_chunk_gives_what_one_import_gives(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path, name: str
) -> None:
    """The watcher keeps each file's importer between changes and reads only new lines; nothing differs."""
    import random

    data = (transcripts_dir / name).read_bytes()
    path = tmp_path / Path(name).name
    rng = random.Random(5)
    watcher = Watcher(store, [tmp_path], lambda event: None, settle_seconds=3600)
    at = 0
    with open(path, "wb", buffering=0) as out:
        while at < len(data):
            step = rng.randint(1, len(data) // 15)
            out.write(data[at : at + step])
            at += step
            watcher.sync(path)
    watcher.sync(path, settle=True)  # the file is finished: a response still waiting for its usage goes in
    with SessionStore.open(f"sqlite:///{tmp_path / 'one-shot.db'}") as fresh:
        once = import_file(fresh, path)
        expected = store_snapshot(fresh, once.session_id or "")
    assert store_snapshot(store, session_of_store(store, path)) == expected


def session_of_store(store: SessionStore, path: Path) -> str:
    return str(store.db.one("SELECT session_id FROM imports WHERE path = :p", {"p": str(path.resolve())})[0])


@pytest.mark.slow
def test_two_watchers_on_one_store_take_turns(
    store_url: str, transcripts_dir: Path, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    """A second watcher (a unit plus one started by hand) neither duplicates nor fails."""
    root = tmp_path / "projects"
    root.mkdir()
    source = transcripts_dir / FASTHOOKS
    first, second = WatchProcess(store_url, root), WatchProcess(store_url, root)
    watchers += [first, second]
    first.wait_event("watching")
    second.wait_event("watching")
    target = root / "s.jsonl"
    assert writer(source, target, seed=3, max_pause=0.05).wait(timeout=120) == 0
    wait_for(store_url, target, source.stat().st_size)
    lines = len(source.read_bytes().splitlines())

    def added() -> int:
        """Lines the two watchers have said they wrote (a write's event may follow its commit)."""
        return sum(
            e["lines_added"] for w in (first, second) for e in list(w.events) if e["event"] in ("imported", "grown")
        )

    first.wait_for(lambda: added() >= lines)
    assert claude_export(store_url, target) == source.read_bytes()
    for w in (first, second):
        assert [e for e in w.events if e["event"] in ("error", "conflict")] == []
        assert w.proc.poll() is None, w.stderr()
    assert added() == lines, "every line imported once, by one or the other"


def test_a_restarted_watcher_does_not_repeat_old_warnings(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    lines = (transcripts_dir / FASTHOOKS).read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:5]) + b"{not json\n" + b"".join(lines[5:20]))
    first = Watcher(store, [tmp_path], lambda event: None).sync(path)
    assert first is not None and [w for w in first.warnings if ":6: malformed JSON" in w]
    with open(path, "ab") as f:
        f.write(b"".join(lines[20:]) + b'{"type": "no-such-entry"}\n')
    restarted = Watcher(store, [tmp_path], lambda event: None)
    grown = restarted.sync(path)
    assert grown is not None and grown.event == "grown"
    assert not [w for w in grown.warnings if ":6:" in w], "the bad line was reported when it came in"
    assert [w for w in grown.warnings if f":{len(lines) + 2}: unknown entry type" in w], "a new one is reported"
