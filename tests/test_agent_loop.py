"""End to end: the real agent loop, the real SDK, a local Messages-API server, a SIGKILL and a resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.storage.read.history import boundaries
from tests.support.fakeapi import RecordedRequest, Reply, start_fake_api
from tests.support.validity import check_messages

ROOT = Path(__file__).resolve().parent.parent
STEPS = 6


class Script:
    """Server-side script: STEPS tool calls (Bash), then a final answer; can hold one reply back."""

    def __init__(self, output_chars: int = 40) -> None:
        self.served = 0
        self.output_chars = output_chars
        self.hold_at: int | None = None
        self.release = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        if self.hold_at is not None and self.served == self.hold_at:
            self.release.wait(timeout=60)
        self.served += 1
        if self.served <= STEPS:
            command = f"python3 -c \"print('step {self.served} ' + 'x' * {self.output_chars})\""
            return Reply.tool_use("Bash", {"command": command}, text=f"Running step {self.served}.")
        return Reply.text("DONE: all steps ran.")


def _env(base_url: str, url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-agent-loop",
            "SESSIONSTORE_DB_URL": url,
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def _agent(args: list[str], env: dict[str, str], workdir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "agent_loop.py"), "--workdir", str(workdir), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate: Any, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_killed_agent_resumes_with_the_same_view_and_finishes(sqlite_url: str, tmp_path: Path) -> None:
    script = Script()
    script.hold_at = 3
    with start_fake_api(responder=script) as api:
        env = _env(api.base_url, sqlite_url)
        first = _agent(["--new", "Run the six steps."], env, tmp_path)
        assert first.stdout is not None
        session_id = first.stdout.readline().split()[1]
        _wait_for(lambda: len(api.message_requests) >= 4)
        first.send_signal(signal.SIGKILL)
        first.wait()
        script.release.set()
        with SessionStore.open(sqlite_url) as store:
            before_kill = store.get(session_id).active_view()
            seen_uuids = [m.uuid for m in store.get(session_id).transcript()]
        assert len(before_kill) == 7, "request, then 3 tool rounds recorded before the kill"
        requests_before = len(api.message_requests)
        second = _agent(["--session", session_id], env, tmp_path)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert "DONE" in out
        resumed = api.message_requests[requests_before]
        assert resumed.messages == before_kill, "the resumed agent sends exactly the view it left"
    with SessionStore.open(sqlite_url) as store:
        s = store.get(session_id)
        transcript = list(s.transcript())
        assert [m.uuid for m in transcript][: len(seen_uuids)] == seen_uuids, "every message of the first run kept"
        results = [
            b
            for m in transcript
            if m.role == "user" and isinstance(m.content, list)
            for b in m.content
            if b.get("type") == "tool_result"
        ]
        steps = [int(r["content"].split()[1]) for r in results]
        # the reply the server sent to the killed process was never recorded; everything received was
        assert steps[:3] == [1, 2, 3] and steps[-1] == STEPS and steps == sorted(set(steps))
        assert check_messages(s.active_view()) == []


def test_auto_compact_fires_midway_and_the_task_completes(sqlite_url: str, tmp_path: Path) -> None:
    script = Script(output_chars=12_000)
    with start_fake_api(responder=script) as api:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "agent_loop.py"),
                "--workdir",
                str(tmp_path),
                "--new",
                "--context-window",
                "40000",
                "Run the six steps.",
            ],
            cwd=ROOT,
            env=_env(api.base_url, sqlite_url),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
        assert "DONE" in proc.stdout
        session_id = proc.stdout.splitlines()[0].split()[1]
        for request in api.message_requests:
            assert check_messages(request.messages) == []
    with SessionStore.open(sqlite_url) as store:
        s = store.get(session_id)
        found = boundaries(s)
        assert found and all(b.trigger == "auto" for b in found)
        texts = [
            b.get("text", "")
            for m in s.transcript()
            if m.role == "assistant" and isinstance(m.content, list)
            for b in m.content
            if b.get("type") == "text"
        ]
        assert texts[-1].startswith("DONE") and sum("Running step" in t for t in texts) == STEPS


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../b"])
def test_read_tool_stays_inside_the_working_directory(tmp_path: Path, path: str) -> None:
    from sessionstore.agent import ToolError, read_file

    (tmp_path / "inside.txt").write_text("ok")
    assert read_file(tmp_path, {"file_path": "inside.txt"}) == "ok"
    with pytest.raises(ToolError, match="outside the working directory"):
        read_file(tmp_path, {"file_path": path})


def test_chat_command_answers_and_stores_everything(sqlite_url: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    with start_fake_api() as api:
        api.script(
            Reply.tool_use("Read", {"file_path": "notes.txt"}, text="Let me read it."),
            "The notes say the answer is 42.",
        )
        proc = subprocess.run(
            [sys.executable, "-m", "sessionstore", "chat", "--new", "--workdir", str(tmp_path), "--db", sqlite_url],
            input="What do my notes say?\n",
            cwd=ROOT,
            env=_env(api.base_url, sqlite_url),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "The notes say the answer is 42." in proc.stdout
        tool_results = [
            b
            for m in api.message_requests[1].messages
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
        assert tool_results and "the answer is 42" in str(tool_results[0]["content"])
    with SessionStore.open(sqlite_url) as store:
        session = store.get(store.list()[0]["id"])
        roles = [m.role for m in session.transcript()]
        assert roles == ["user", "assistant", "user", "assistant"]
