"""A NUL character in what a tool printed goes through the whole pipeline on both engines.

PostgreSQL's text type cannot hold NUL: the messages keep it (their JSON escapes it), and the
text derived from them (spill previews, session notes, summaries, an imported session's title, cwd
and model) shows U+FFFD in its place, on both engines (one code path). The hostile corpus
(tests/support/hostile.py) holds NUL and binary output before its pipeline runs, on both engines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.storage.write.memory import load_memory
from sessionstore.storage.write.session import Session
from sessionstore.storage.records.validate import storable_text
from tests.support.cli import run_cli

NUL_OUTPUT = "line one\x00line two " * 300
BIG_NUL_OUTPUT = "line one\x00line two " * 3_500  # over tool_result_max_chars: spilled, with a preview


def _append_nul_steps(session: Session, start: int) -> None:
    for i in range(start, start + 12):
        session.append({"role": "user", "content": f"step {i}: read /src/f{i}.py\x00 please"})
        session.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"tu{i}", "name": "bash", "input": {"cmd": "cat\x00"}}],
            }
        )
        session.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"tu{i}",
                        "content": BIG_NUL_OUTPUT if i % 12 == 0 else NUL_OUTPUT,
                    }
                ],
            }
        )


def test_the_pipeline_and_every_reader_take_a_nul(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with SessionStore.open(store_url) as store:
        session = store.create_session(title="nul", model="claude-sonnet-4-6", context_window=80_000)
        sid = session.id
        _append_nul_steps(session, 0)
    compacted = run_cli(capsys, "compact", sid, "--db", store_url)
    assert compacted.code == 0, compacted.err[-1500:]
    with SessionStore.open(store_url) as store:
        _append_nul_steps(store.get(sid), 12)
        prepared = Pipeline(store).prepare(store.get(sid))
        shown = json.dumps(prepared.messages)
        memory = load_memory(store.get(sid))
        assert memory is not None and "\x00" not in memory.notes
        assert "persisted-output" in shown and "line one\ufffdline two" in shown.encode().decode("unicode_escape")
    for args in (
        ["spill", "list", sid],
        ["stats", sid],
        ["history", sid],
        ["search", "line"],
        ["view", sid, "--json"],
    ):
        result = run_cli(capsys, *args, "--db", store_url)
        assert result.code == 0, (args, result.err[-1500:])
        assert "Traceback" not in result.err
    exported = run_cli(capsys, "export", sid, "--format", "jsonl", "--db", store_url)
    assert exported.code == 0, exported.err
    records = [json.loads(line) for line in exported.out.splitlines() if line.strip()]
    texts = [json.dumps(r) for r in records]
    assert sum("step 0: read /src/f0.py\\u0000 please" in t for t in texts) >= 1
    assert any(NUL_OUTPUT[:40].replace("\x00", "\\u0000") in t for t in texts)


def test_storable_text_replaces_only_nul() -> None:
    assert storable_text("a\x00b\x01c") == "a\ufffdb\x01c"
    assert storable_text("plain") == "plain"


def _nul_transcript(path: Path) -> bytes:
    """A Claude Code file whose prompt, tool input, tool output (binary) and summary title hold NUL."""
    binary = bytes(range(256)).decode("latin-1")
    lines: list[dict[str, Any]] = []

    def add(entry: dict[str, Any]) -> None:
        entry.update(
            uuid=f"u-{len(lines)}",
            parentUuid=lines[-1]["uuid"] if lines else None,
            sessionId="nul-session",
            cwd="/tmp/nul",
            timestamp=f"2026-11-01T10:00:{len(lines):02d}.000Z",
            isSidechain=False,
            userType="external",
        )
        lines.append(entry)

    add({"type": "user", "message": {"role": "user", "content": "first\x00 prompt " + binary}})
    for i in range(3):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": "cat\x00 f.bin"}}
        add(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_0nul{i}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [use],
                    "usage": {"input_tokens": 5, "output_tokens": 5},
                },
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": ("bin\x00ary " + binary) * 2_000}
        add({"type": "user", "message": {"role": "user", "content": [result]}})
    data = "".join(
        json.dumps(x) + "\n"
        for x in [{"type": "summary", "summary": "a title\x00 with NUL", "leafUuid": lines[-1]["uuid"]}, *lines]
    ).encode()
    path.write_bytes(data)
    return data


def test_the_console_script_imports_prepares_and_compacts_binary_output(store_url: str, tmp_path: Path) -> None:
    """From the console script, on both engines: the file's bytes kept exactly, what is derived from them storable."""
    from tests.support.outside import private_env, sessionstore

    env = private_env(tmp_path / "home")
    data = _nul_transcript(tmp_path / "nul.jsonl")
    ran = sessionstore(store_url, env, "import", "claude-code", str(tmp_path / "nul.jsonl"))
    assert ran.code == 0 and not ran.traceback, ran.err
    [session] = json.loads(sessionstore(store_url, env, "sessions", "--json").out)
    assert session["title"] == "a title\ufffd with NUL"
    for args in (("prepare", session["id"]), ("compact", session["id"]), ("view", session["id"])):
        ran = sessionstore(store_url, env, *args)
        assert ran.code == 0 and not ran.traceback, (args, ran.err)
    ran = sessionstore(store_url, env, "export", session["id"], "-f", "claude-code", "-o", str(tmp_path / "back.jsonl"))
    assert ran.code == 0, ran.err
    assert (tmp_path / "back.jsonl").read_bytes()[: len(data)] == data, "the original kept exactly"
