"""`sessionstore fork`, lineage in sessions/history/stats/exports, and `export --install`, on both engines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_file
from sessionstore.compaction.engine import compact, make_summarizer
from sessionstore.storage.read import history as hist
from sessionstore.storage.records.view import to_api_messages
from tests.support.cli import run_cli

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    result = run_cli(capsys, *args)
    assert result.code == 0, result.err
    return result.out


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one error line of a command that must exit 2 without a traceback."""
    result = run_cli(capsys, *args)
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.err
    return lines[0]


def comparable(view: dict[str, Any]) -> tuple[Any, ...]:
    """A view document without the transcript numbers (a fork numbers its own messages from 1)."""
    entries = [{k: v for k, v in e.items() if k != "seq"} for e in view["entries"]]
    return view["messages"], entries, view["tokens"]


def parent_outputs(capsys: pytest.CaptureFixture[str], db: str, sid: str, boundaries: int) -> list[str]:
    """Everything the CLI shows of the parent: view, history, each view before, the whole transcript."""
    out = [
        ok(capsys, "view", sid, "--json", "--db", db),
        ok(capsys, "history", sid, "--json", "--full", "--db", db),
        ok(capsys, "export", sid, "-f", "jsonl", "--db", db),
    ]
    out += [ok(capsys, "history", sid, "-b", str(k), "--json", "--db", db) for k in range(1, boundaries + 1)]
    return out


def test_fork_before_each_boundary_and_at_a_message_from_the_cli(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    with SessionStore.open(store_url) as store:
        imported = import_file(store, transcripts_dir / SPOTTER).session_id
        parent = store.get(imported)
        # A local write: the compaction lands on the imported session's local continuation (parent becomes it).
        compact(parent, summarizer=make_summarizer("extractive"))
        pid = parent.id
        # Its boundary 1 is the file's, copied with the view (version 1); its own compaction is boundary 2.
        expected_at = hist.view_at(parent, 1)
    before = parent_outputs(capsys, store_url, pid, 2)
    assert f"fork {imported} --before-boundary 1" in refused(capsys, "fork", pid, "-b", "1", "--db", store_url)
    forks = []
    for k in (2,):
        fid = ok(capsys, "fork", pid[:10], "--before-boundary", str(k), "--db", store_url).strip()
        forks.append(fid)
        fork_view = json.loads(ok(capsys, "view", fid, "--json", "--db", store_url))
        expected = json.loads(ok(capsys, "history", pid, "-b", str(k), "--json", "--db", store_url))
        assert comparable(fork_view) == comparable(expected)
        assert "forked from " + pid + f" before boundary {k}" in ok(capsys, "history", fid, "--db", store_url)
    cut = next(
        i
        for i in range(len(expected_at) - 1, 0, -1)
        if expected_at[i].role == "user" and isinstance(expected_at[i].content, str)
    )
    target = expected_at[cut]
    made = json.loads(
        ok(capsys, "fork", pid, "--at", target.uuid[:12], "--title", "at a prompt", "--json", "--db", store_url)
    )
    assert made["fork"]["kind"] == "message" and made["fork"]["message_uuid"] == target.uuid
    view = json.loads(ok(capsys, "view", made["id"], "--json", "--db", store_url))
    assert [e["uuid"] for e in view["entries"]] == [e.uuid for e in expected_at[: cut + 1]]
    assert view["messages"] == json.loads(json.dumps(to_api_messages(expected_at[: cut + 1])))
    again = json.loads(ok(capsys, "fork", made["id"], "--at", str(cut), "--json", "--db", store_url))
    assert again["lineage"] == [made["id"], pid, imported]
    listed = {r["id"]: r for r in json.loads(ok(capsys, "sessions", "--json", "--db", store_url))}
    assert listed[pid]["fork"]["parent_id"] == imported
    assert [listed[f]["fork"]["boundary_index"] for f in forks] == [2]
    assert listed[again["id"]]["fork"]["parent_id"] == made["id"]
    assert "⑂" + pid[:8] in ok(capsys, "sessions", "--db", store_url)
    stats = json.loads(ok(capsys, "stats", forks[0], "--json", "--db", store_url))
    assert (stats["forked_from"], stats["fork_point"]) == (pid, "before boundary 2")
    assert json.loads(ok(capsys, "stats", pid, "--json", "--db", store_url))["forks"] == 2
    assert f"forked from {pid} before boundary 2" in ok(capsys, "export", forks[0], "-f", "markdown", "--db", store_url)
    assert parent_outputs(capsys, store_url, pid, 2) == before
    assert json.loads(ok(capsys, "doctor", "--json", "--db", store_url))["ok"]


def test_refusals_are_one_line_and_write_nothing(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        s = store.create_session(title="t")
        s.append({"role": "user", "content": "go"})
        call = s.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
            }
        )
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]})
        sid = s.id
    line = refused(capsys, "fork", sid, "--at", call.uuid, "--db", store_url)
    assert "t1" in line and "seq 1" in line and "seq 3" in line
    assert "not both" in refused(capsys, "fork", sid, "--at", "1", "-b", "1", "--db", store_url)
    assert "boundary" in refused(capsys, "fork", sid, "-b", "1", "--db", store_url)
    assert "no message" in refused(capsys, "fork", sid, "--at", "zz", "--db", store_url)
    assert "with --install" in refused(capsys, "export", sid, "-f", "codex", "--db", store_url)
    assert len(json.loads(ok(capsys, "sessions", "--json", "--db", store_url))) == 1


def test_export_install_prints_the_resume_command_and_refuses_a_second_time(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    with SessionStore.open(store_url) as store:
        parent = store.get(import_file(store, transcripts_dir / FASTHOOKS).session_id)
        pid, cwd = parent.id, parent.cwd
    fid = ok(capsys, "fork", pid, "--before-boundary", "1", "--db", store_url).strip()
    claude = tmp_path / "claude"
    args = ("export", fid, "-f", "claude-code", "--install", "--claude-dir", str(claude), "--db", store_url)
    command = ok(capsys, *args).strip()
    new_id = command.rsplit(" ", 1)[1]
    assert command == f"cd {cwd} && claude --resume {new_id}"
    written = claude / "projects" / cwd.replace("/", "-") / f"{new_id}.jsonl"
    assert written.is_file()
    assert "exists already" in refused(capsys, *args)
    home = tmp_path / "codex"
    done = json.loads(
        ok(capsys, "export", fid, "-f", "codex", "--install", "--codex-home", str(home), "--json", "--db", store_url)
    )
    assert done["command"].endswith(f"codex resume {done['session_id']}") and Path(done["path"]).is_file()
    ok(capsys, "import", "claude-code", str(written), "--db", store_url)
    back = json.loads(ok(capsys, "view", new_id, "--json", "--db", store_url))
    assert back["messages"] == json.loads(ok(capsys, "view", fid, "--json", "--db", store_url))["messages"]
