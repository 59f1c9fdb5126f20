"""Installing a (forked) view where Claude Code and Codex resume from, found by their own rules, re-imported whole."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_file
from sessionstore.interchange.install import InstallError, install_claude_code, install_codex
from sessionstore.storage.upkeep.doctor import check

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
CODEX = sorted(
    [
        "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl",
        "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
    ]
)
#: Codex's rule for a rollout file name (rollout/list.rs parse_timestamp_uuid_from_filename).
ROLLOUT_NAME = re.compile(
    r"^rollout-(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})-"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)


def same_view(a: Any, b: Any) -> None:
    """The API messages and the entries' identities (uuid, role, type, subtype) match."""
    assert b.active_view() == a.active_view()
    ids = [(e.uuid, e.role, e.type, e.subtype) for e in a.active_entries()]
    assert [(e.uuid, e.role, e.type, e.subtype) for e in b.active_entries()] == ids


def find_claude_session(claude_dir: Path, cwd: str, session_id: str) -> list[dict[str, Any]]:
    """Claude Code's lookup for `claude --resume ID` run in `cwd`: projects/<cwd, non-alphanumerics as '-'>/<ID>.jsonl,
    whose lines carry that sessionId; the conversation is the parentUuid chain from the last entry back to a root."""
    path = claude_dir / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd) / f"{session_id}.jsonl"
    lines = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    assert lines and all(line["sessionId"] == session_id and line["cwd"] == cwd for line in lines)
    assert lines[0]["parentUuid"] is None and lines[0]["type"] in ("user", "system")
    by_uuid = {line["uuid"]: line for line in lines}
    chain, node = [], lines[-1]
    while node is not None:
        chain.append(node)
        node = by_uuid.get(node["parentUuid"]) if node["parentUuid"] else None
    return list(reversed(chain))


def find_codex_session(home: Path, session_id: str) -> list[dict[str, Any]]:
    """Codex's lookup for `codex resume ID`: sessions/YYYY/MM/DD/rollout-<time>-<ID>.jsonl, the date folders those
    of the name, a session_meta first line naming the id, and a user_message event (what its session list needs)."""
    found = [p for p in (home / "sessions").rglob("*.jsonl") if p.name.endswith(f"-{session_id}.jsonl")]
    assert len(found) == 1
    match = ROLLOUT_NAME.match(found[0].name)
    assert match is not None and match.group(7) == session_id
    assert found[0].parent.relative_to(home / "sessions").parts == match.groups()[:3]
    datetime(*(int(g) for g in match.groups()[:6]))
    lines = [json.loads(raw) for raw in found[0].read_bytes().splitlines()]
    first = lines[0]
    assert first["type"] == "session_meta" and first["payload"]["id"] == session_id
    assert {"timestamp", "cwd", "originator", "cli_version"} <= set(first["payload"])
    assert any(line["type"] == "event_msg" and line["payload"]["type"] == "user_message" for line in lines)
    return lines


@pytest.mark.parametrize("name", [FASTHOOKS, SPOTTER])
def test_claude_code_install_of_forks_is_found_by_its_rules_and_reimports_as_the_same_view(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path, name: str
) -> None:
    parent = store.get(import_file(store, transcripts_dir / name).session_id)
    claude = tmp_path / "claude"
    for fork in (parent.fork(before_boundary=1), parent.fork()):
        installed = install_claude_code(fork, claude_config=claude)
        assert installed.command.endswith(f"claude --resume {installed.session_id}")
        chain = find_claude_session(claude, parent.cwd, installed.session_id)
        assert [line["uuid"] for line in chain] == [e.uuid for e in fork.active_entries()]
        again = store.get(import_file(store, installed.path).session_id)
        same_view(fork, again)
        before = installed.path.read_bytes()
        with pytest.raises(InstallError, match="exists already"):
            install_claude_code(fork, claude_config=claude)
        assert installed.path.read_bytes() == before
    assert check(store).ok, check(store).to_dict()


@pytest.mark.parametrize("name", CODEX)
def test_codex_install_of_a_fork_is_found_by_its_rules_and_reimports_as_the_same_view(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path, name: str
) -> None:
    parent = store.get(import_file(store, transcripts_dir / name).session_id)
    fork = parent.fork()
    home = tmp_path / "codex"
    installed = install_codex(fork, home=home)
    assert installed.command.endswith(f"codex resume {installed.session_id}")
    lines = find_codex_session(home, installed.session_id)
    assert lines[0]["payload"]["cwd"] == parent.cwd
    again = store.get(import_file(store, installed.path).session_id)
    assert again.active_view() == fork.active_view()
    assert again.model == parent.model and again.cwd == parent.cwd
    earlier = home / "sessions" / "2020" / "01" / "01" / f"rollout-2020-01-01T00-00-00-{installed.session_id}.jsonl"
    earlier.parent.mkdir(parents=True)
    installed.path.rename(earlier)  # as if installed on another day: Codex would still find it by its id
    with pytest.raises(InstallError, match="exists already"):
        install_codex(fork, home=home)
    assert list((home / "sessions").rglob("*.jsonl")) == [earlier]


def test_a_native_session_installs_in_both_tools(store: SessionStore, tmp_path: Path) -> None:
    s = store.create_session(title="native", cwd="/tmp/some project", model="claude-sonnet-4-6")
    s.append({"role": "user", "content": "List the files."})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            ],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py\nb.py"}]})
    s.append({"role": "assistant", "content": [{"type": "text", "text": "Two files."}]})
    cc = install_claude_code(s, claude_config=tmp_path / "claude")
    assert cc.path.parent.name == "-tmp-some-project"
    same_view(s, store.get(import_file(store, cc.path).session_id))
    cx = install_codex(s, home=tmp_path / "codex")
    lines = find_codex_session(tmp_path / "codex", cx.session_id)
    calls = [line["payload"] for line in lines if line["payload"].get("type") == "function_call"]
    assert calls == [{"type": "function_call", "name": "Bash", "arguments": '{"command": "ls"}', "call_id": "t1"}]
    texts = [
        [b.get("text") or b.get("content") for b in m["content"]] if isinstance(m["content"], list) else [m["content"]]
        for m in store.get(import_file(store, cx.path).session_id).active_view()
    ]
    assert texts == [["List the files."], ["Let me look.", None], ["a.py\nb.py"], ["Two files."]]
