"""A store made by an older release, the way a person used it, upgraded by this one: nothing lost or changed.

Release f44011c (schema 0004) is installed from the repository's history and its own console script builds
the store: every shared transcript imported, a native session with a 1 MB tool result holding NUL and
escape bytes and a message longer than that release's search limit, `prepare` (spills, snips, clears), full
and partial compactions, and a search (so its index exists). Each session's jsonl export, active view,
boundaries and view before each boundary, and each imported Claude Code session's own export, are recorded
by the old release, then compared after this release's `db upgrade`; `doctor` must find nothing.
Both engines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.oldrelease import Release, install_release

RELEASE = "f44011c"
SCRIPT = Path(sys.executable).parent / "sessionstore"
#: A word only at the end of a message longer than the old release's 1,000,000-character search limit.
TAIL_WORD = "zanzibarquuxtail"
#: Boundary fields both releases report and must agree on.
BOUNDARY_FIELDS = ("index", "boundary_uuid", "kind", "trigger", "messages_summarized", "replaced_version")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    return install_release(RELEASE, tmp_path_factory.mktemp("release"))


def new(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """This release's console script on the store at `url`."""
    full = {**os.environ, "SESSIONSTORE_DB_URL": url, "COLUMNS": "200", **(env or {})}
    return subprocess.run([str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=600)


def new_json(url: str, *args: str) -> Any:
    done = new(url, *args, "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    return json.loads(done.stdout)


def _native_messages() -> list[dict[str, Any]]:
    """A native session's messages: a 1 MB tool result with NUL and escape bytes, and a message longer than
    the old search limit whose last word only a whole-text index finds."""
    noisy = ("build step \x00 ok \x1b[31mred\x1b[0m é ✓\n" * 30_000)[:1_000_000]
    return [
        {"role": "user", "content": "Run the build and show me the whole log."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_build", "name": "Bash", "input": {"command": "make"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_build", "content": noisy}]},
        {"role": "assistant", "content": "The build passed; the log is long."},
        {"role": "user", "content": "Here is the whole spec: " + "lorem ipsum " * 100_000 + TAIL_WORD},
        {"role": "assistant", "content": "Read the spec."},
        {"role": "user", "content": "Now summarize what we did."},
        {"role": "assistant", "content": "We built the project and read the spec."},
    ]


def _sessions(release: Release, url: str) -> list[dict[str, Any]]:
    listed = release.json(url, "sessions", "--limit", "1000")
    assert isinstance(listed, list)
    return listed


def _build_old_store(release: Release, url: str, transcripts: Path, work: Path) -> str:
    """Use the old release as a person did: import, append, prepare, compact, search; returns the imported
    Claude Code session it compacted."""
    release.run(url, "import", "claude-code", str(transcripts / "claude-code"))
    release.run(url, "import", "codex", str(transcripts / "codex"))
    native = release.run(url, "new", "--title", "native build").stdout.strip().split()[-1]
    first, then = work / "first.jsonl", work / "then.jsonl"
    first.write_text("".join(json.dumps(m) + "\n" for m in _native_messages()[:6]))
    then.write_text("".join(json.dumps(m) + "\n" for m in _native_messages()[6:]))
    release.run(url, "append", native, str(first))
    release.run(url, "compact", native)
    release.run(url, "append", native, str(then))
    release.run(url, "prepare", native)
    sessions = _sessions(release, url)
    by_source = {(s.get("metadata") or {}).get("source_session_id", ""): s["id"] for s in sessions}
    spotter = next(sid for source, sid in by_source.items() if source.startswith("258c7280-ae70"))
    release.run(url, "prepare", spotter, "--now", "2030-01-01T00:00:00Z")  # idle: snips and clears
    fasthooks = next(sid for source, sid in by_source.items() if source.startswith("c45af7b1"))
    entries = release.json(url, "view", fasthooks)["entries"]  # type: ignore[index]
    users = [e for e in entries if e["role"] == "user" and not e["is_compact_summary"]]
    release.run(url, "compact", fasthooks, "--up-to", users[len(users) // 2]["uuid"])
    release.run(url, "search", "error")
    return fasthooks


def _record(run: Any, url: str, sessions: list[dict[str, Any]], work: Path, tag: str) -> dict[str, Any]:
    """What a person sees of each session: its jsonl export, view, boundaries and views before them."""
    seen: dict[str, Any] = {}
    for s in sessions:
        sid = s["id"]
        out = work / f"{tag}-{sid}.jsonl"
        assert run(url, "export", sid, "-f", "jsonl", "-o", str(out)).returncode == 0
        exported = [json.loads(line) for line in out.read_text().splitlines()]
        history = json_of(run, url, "history", sid)
        seen[sid] = {
            "transcript": [(m["seq"], m["uuid"], m["type"], m["message"]) for m in exported],
            "view": json_of(run, url, "view", sid)["messages"],
            "boundaries": [{k: b.get(k) for k in BOUNDARY_FIELDS} for b in history],
            "before": [json_of(run, url, "history", sid, "-b", str(b["index"]))["messages"] for b in history],
        }
    return seen


def json_of(run: Any, url: str, *args: str) -> Any:
    done = run(url, *args, "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    return json.loads(done.stdout)


def _source_file(transcripts: Path, sid: str, sessions: list[dict[str, Any]]) -> bytes:
    """The bytes of the Claude Code file the session was imported from (found by its sessionId)."""
    source_id = next(s["metadata"]["source_session_id"] for s in sessions if s["id"] == sid)
    for path in (transcripts / "claude-code").rglob("*.jsonl"):
        data = path.read_bytes()
        if f'"sessionId":"{source_id}"'.encode() in data[:20_000]:
            return data
    raise AssertionError(f"no shared transcript holds session {source_id}")


def _claude_code_exports(run: Any, url: str, sessions: list[dict[str, Any]], work: Path, tag: str) -> dict[str, bytes]:
    out = {}
    for s in sessions:
        if (s.get("metadata") or {}).get("imported_from") != "claude-code":
            continue
        path = work / f"{tag}-{s['id']}.cc.jsonl"
        done = run(url, "export", s["id"], "-f", "claude-code", "-o", str(path))
        if done.returncode == 2 and "--as-recorded" in done.stderr:  # a view the format cannot say: as recorded
            done = run(url, "export", s["id"], "-f", "claude-code", "--as-recorded", "-o", str(path))
        assert done.returncode == 0, (s["id"], done.stderr)
        out[s["id"]] = path.read_bytes()
    return out


def test_an_old_release_s_store_upgrades_with_every_export_view_and_history_unchanged(
    release: Release, empty_store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    url = empty_store_url
    compacted = _build_old_store(release, url, transcripts_dir, tmp_path)
    sessions = _sessions(release, url)
    old_run = lambda u, *a: release.run(u, *a, check=False)  # noqa: E731
    before = _record(old_run, url, sessions, tmp_path, "old")
    old_cc = _claude_code_exports(old_run, url, sessions, tmp_path, "old")

    upgraded = new(url, "db", "upgrade")
    assert upgraded.returncode == 0 and "Traceback" not in upgraded.stderr, upgraded.stderr

    after = _record(new, url, sessions, tmp_path, "new")
    for sid in before:
        for part in ("transcript", "view", "boundaries", "before"):
            assert after[sid][part] == before[sid][part], (sid, part)
    new_cc = _claude_code_exports(new, url, sessions, tmp_path, "new")
    assert new_cc.keys() == old_cc.keys()
    for sid, exported in new_cc.items():
        if sid != compacted:
            assert exported == old_cc[sid], sid
            continue
        # The lines a compaction added after the file's own are written as this release writes them (it
        # checks they import back as the same view and history); the file's own lines are byte for byte.
        source = _source_file(transcripts_dir, sid, sessions)
        assert exported.startswith(source) and old_cc[sid].startswith(source)
    doctor = new(url, "doctor")
    assert doctor.returncode == 0 and "no problems" in doctor.stdout, doctor.stdout + doctor.stderr
    found = new_json(url, "search", TAIL_WORD)
    hits = found["hits"] if isinstance(found, dict) else found
    assert len(hits) == 1, found


def test_an_interrupted_upgrade_then_an_upgrade_on_open_keep_one_backup_and_say_what_to_vacuum(
    release: Release, transcripts_dir: Path, tmp_path: Path
) -> None:
    """SQLite: each attempt backs the file up, but only the newest copy of a revision is kept; the upgrade a
    writing command runs on open says, as `db upgrade` does, that `db vacuum` gives the repacked space back."""
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    release.run(url, "import", "claude-code", str(transcripts_dir / "claude-code" / "fasthooks"))
    killed = new(url, "db", "upgrade", env={"SESSIONSTORE_FAULT": "migration.before_commit"})
    assert killed.returncode < 0, killed.stderr
    assert len(list(tmp_path.glob("old.db.bak-0004-*"))) == 1
    opened = new(url, "new", "--title", "after the upgrade")
    assert opened.returncode == 0, opened.stderr
    assert [p.name.split("-")[1] for p in tmp_path.glob("old.db.bak-*")] == ["0004"]
    assert f"sessionstore db vacuum --db {url}" in opened.stderr


def test_a_message_past_the_old_search_limit_is_indexed_whole_after_the_upgrade(
    release: Release, empty_store_url: str, tmp_path: Path
) -> None:
    """The old release indexed 1,000,000 characters of a message, silently; after the upgrade the index holds
    every message whole: `search` finds the long message's last word and `doctor` reports nothing stale."""
    url = empty_store_url
    sid = release.run(url, "new", "--title", "long").stdout.strip().split()[-1]
    messages = tmp_path / "long.jsonl"
    messages.write_text("".join(json.dumps(m) + "\n" for m in _native_messages()[4:6]))
    release.run(url, "append", sid, str(messages))
    release.run(url, "search", "lorem")
    assert new(url, "db", "upgrade").returncode == 0
    doctor = new(url, "doctor")
    assert doctor.returncode == 0 and "no problems" in doctor.stdout, doctor.stdout + doctor.stderr
    found = new_json(url, "search", TAIL_WORD)
    assert len(found["hits"] if isinstance(found, dict) else found) == 1, found
