"""The API key never lands anywhere: not in output, logs, the database, exports or errors; files are owner-only.

Every command runs with a recognizable fake key in the environment and the
API pointed at a closed port, under a private HOME and XDG tree, so every
byte any command writes can be searched afterwards.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import stat
import traceback
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from sessionstore import SessionStore
from tests.support.cli import Result, run_cli, run_cli_process
from tests.support.messages import conversation
from tests.support.outside import private_folders

KEY = f"sk-ant-test-SENTINEL-{uuid.uuid4().hex}"
ROOT = Path(__file__).resolve().parent.parent


def closed_port_url() -> str:
    """An http URL on localhost where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private HOME/XDG tree, the fake key in the environment, the API on a closed port."""
    for var, folder in private_folders(tmp_path).items():
        monkeypatch.setenv(var, folder)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", closed_port_url())
    monkeypatch.delenv("SESSIONSTORE_DB_URL", raising=False)
    yield tmp_path


def assert_no_key(where: str, data: str | bytes) -> None:
    """Neither the key nor its random tail occurs in `data`."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    assert KEY.encode() not in raw and KEY[-32:].encode() not in raw, f"the API key leaked into {where}"


def every_file(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


#: Commands that serve a client over stdin/stdout; tests/test_mcp_server.py runs the server with the SDK's client.
SERVERS = {"mcp"}


def _app_commands() -> set[str]:
    """Every leaf command of the CLI, as "group sub"."""
    import typer.main

    from sessionstore.cli.app import app

    def walk(command: object, path: list[str]) -> Iterator[str]:
        subs = getattr(command, "commands", None)
        if subs is None:
            yield " ".join(path)
            return
        for name, sub in subs.items():
            yield from walk(sub, [*path, name])

    return set(walk(typer.main.get_command(app), []))


def _ran(args: tuple[str, ...], commands: set[str]) -> str:
    """Which command of the app `args` ran."""
    two = " ".join(args[:2])
    return two if two in commands else args[0]


def _claude_code_file(path: Path) -> None:
    """A two-line Claude Code transcript."""
    lines = [
        {
            "type": "user",
            "uuid": "cc-1",
            "parentUuid": None,
            "sessionId": "cc-secrets",
            "isSidechain": False,
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "hello"},
        },
        {
            "type": "assistant",
            "uuid": "cc-2",
            "parentUuid": "cc-1",
            "sessionId": "cc-secrets",
            "isSidechain": False,
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_no_command_writes_the_key(
    sandbox: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every command of the app runs here (the list is checked against the typer app)."""
    caplog.set_level(logging.DEBUG)
    work = sandbox / "work"
    (work / "in.jsonl").write_text("\n".join(json.dumps(m) for m in conversation(40, seed=3)) + "\n")
    _claude_code_file(work / "cc.jsonl")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    outputs: list[tuple[str, Result]] = []

    def run(*args: str, ok: bool = True) -> Result:
        result = run_cli(capsys, *args)
        outputs.append((" ".join(args), result))
        if ok:
            assert result.code == 0, (args, result)
        return result

    sid = json.loads(run("new", "--title", "secrets", "--json").out)["id"]
    run("append", sid, "in.jsonl")
    first = json.loads(run("view", sid, "--json").out)["entries"][0]["uuid"]
    run("pin", sid, first)
    run("pins", sid, "--json")
    run("unpin", sid, first)
    for args in (
        ("view", sid),
        ("view", sid, "--json"),
        ("stats", sid, "--json"),
        ("sessions",),
        ("sessions", "--json"),
        ("compact", sid, "--json"),
        ("history", sid),
        ("export", sid, "-f", "jsonl", "-o", "out.jsonl"),
        ("export", sid, "-f", "markdown", "-o", "out.md"),
        ("export", sid, "-f", "html", "-o", "out.html"),
        ("doctor", "--json"),
        ("doctor", "--repair"),
        ("db", "current"),
        ("secrets", sid),
        ("secrets", "--json"),
        ("fork", sid, "--json"),
    ):
        run(*args)
    for args in (("prepare", sid, "--json"), ("spill", "list", sid)):
        run(*args, ok=False)
    failed = run("compact", sid, "--summarizer", "anthropic", ok=False)
    assert failed.code == 1 and failed.err.startswith("error: ")  # the API unreachable: a runtime failure
    big = (
        {"role": "user", "content": "read the log"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "big1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "big1", "content": "log line\n" * 8_000}]},
    )
    (work / "big.jsonl").write_text("".join(json.dumps(m) + "\n" for m in big))
    spill_sid = json.loads(run("new", "--json").out)["id"]
    run("append", spill_sid, "big.jsonl")
    run("prepare", spill_sid, "--json")
    for args in (
        ("spill", "cat", spill_sid, "big1"),
        ("spill", "materialize", spill_sid, "big1", "spilled"),
        ("import", "jsonl", "out.jsonl"),
        ("import", "claude-code", "cc.jsonl"),
        ("db", "upgrade"),
        ("db", "history"),
        ("chat", "--new"),
    ):
        run(*args)
    run("import", "codex", "in.jsonl", ok=False)
    (work / "watched.jsonl").write_bytes((work / "cc.jsonl").read_bytes().replace(b"cc-secrets", b"cc-watched"))
    run("watch", "--once", "watched.jsonl")
    run("search", "hello")
    run("usage", "--by", "session", "--json")
    run("eval", sid, "--json")
    run("recall", sid, "--json")
    run("show", sid, "1")
    run("fork", sid)
    run("browse", ok=False)  # refuses without a terminal: one line, exit 2
    run("pins", sid)
    for args in (("pin", sid, "no-such-message"), ("unpin", sid, "no-such-message")):
        run(*args, ok=False)  # no such message: one line, exit 2
    run("shares")
    for args in (
        ("share", sid, "--with", "bob"),
        ("unshare", sid, "--with", "bob"),
        ("db", "grant", "bob"),
        ("db", "revoke", "bob"),
    ):
        run(*args, ok=False)  # PostgreSQL only: one line, exit 2 on SQLite
    run("delete", spill_sid, "--yes")
    run("db", "vacuum")
    commands = _app_commands() - SERVERS
    assert commands <= {_ran(tuple(c.split()), commands) for c, _ in outputs}, "a command of the app is not run here"

    for command, result in outputs:
        assert_no_key(f"the output of `{command}`", result.out + result.err)
    assert_no_key("the log records", caplog.text)
    files = every_file(sandbox)
    assert {"out.jsonl", "out.md", "out.html", "sessions.db"} <= {p.name for p in files}
    for path in files:
        assert_no_key(str(path), path.read_bytes())


def test_a_failing_summarizer_process_does_not_print_the_key(sandbox: Path) -> None:
    url = f"sqlite:///{sandbox / 'work' / 'sessions.db'}"
    with SessionStore.open(url) as store:
        s = store.create_session()
        s.append_many(list(conversation(12, seed=4)))
    result = run_cli_process("compact", s.id, "--summarizer", "anthropic", "--db", url, env=dict(os.environ))
    assert result.code == 1, result  # the API on a closed port: a runtime failure
    assert result.err.startswith("error: ") and "Traceback" not in result.err
    assert_no_key("the compact process output", result.out + result.err)
    for path in every_file(sandbox):
        assert_no_key(str(path), path.read_bytes())


def test_summarizer_errors_do_not_carry_the_key(sandbox: Path, sqlite_url: str) -> None:
    from sessionstore.compaction.summarizers.anthropic import AnthropicSummarizer
    from sessionstore.compaction.summarizers.base import SummarizerError

    with SessionStore.open(sqlite_url) as store:
        s = store.create_session()
        s.append_many(list(conversation(8, seed=5)))
        entries = s.active_entries()
    for summarizer in (
        AnthropicSummarizer(max_retries=0, timeout=2),
        AnthropicSummarizer(api_key=KEY, base_url=closed_port_url(), max_retries=0, timeout=2),
    ):
        with pytest.raises(SummarizerError) as info:
            summarizer.summarize(entries)
        text = "".join(traceback.format_exception(info.value))
        assert_no_key("a summarizer error", str(info.value) + repr(info.value) + text)


def test_database_files_are_owner_only(sandbox: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sid = run_cli(capsys, "new").out.strip()
    with SessionStore.open() as store:
        store.get(sid).append({"role": "user", "content": "hello"})
        folder = sandbox / "data" / "sessionstore"
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
        assert {"sessions.db", "sessions.db-wal", "sessions.db-shm"} <= set(modes), "WAL files exist while open"
        assert modes == dict.fromkeys(modes, 0o600), modes
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "sessions.db").stat().st_mode) == 0o600


def test_the_mcp_server_writes_no_key(sandbox: Path) -> None:
    """`sessionstore mcp` (the one command the test above leaves out), over stdio, with the key in its environment."""
    import sys

    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    work = sandbox / "work"
    (work / "in.jsonl").write_text("\n".join(json.dumps(m) for m in conversation(40, seed=3)) + "\n")
    sid = json.loads(run_cli_process("new", "--title", "mcp secrets", "--json").out)["id"]
    assert run_cli_process("append", sid, "in.jsonl").code == 0
    assert run_cli_process("compact", sid).code == 0
    errfile = sandbox / "mcp-stderr.txt"
    serve = f'exec "{sys.executable}" -m sessionstore mcp 2>"{errfile}"'
    params = StdioServerParameters(
        command="sh", args=["-c", serve], env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(work)
    )

    async def talk() -> list[str]:
        answers = []
        with anyio.fail_after(60):
            # stdio_client's errlog defaults to the sys.stderr of when mcp was first imported: in this suite that
            # may be an earlier test's capture (the CLI imports mcp lazily), which has no file descriptor.
            async with Client(stdio_client(params, errlog=sys.__stderr__)) as client:
                for tool, args in (
                    ("list_sessions", {}),
                    ("history", {"session": sid}),
                    ("view_before", {"session": sid, "boundary": 1}),
                    ("recall", {"session": sid}),
                    ("search", {"query": "the"}),
                    ("history", {"session": "no-such-session"}),
                ):
                    result = await client.call_tool(tool, args)
                    answers.append(json.dumps(result.structured_content) + str(result.content))
        return answers

    answers = anyio.run(talk)
    assert len(answers) == 6
    for answer in answers:
        assert_no_key("an MCP answer", answer)
    assert_no_key("the MCP server's stderr", errfile.read_bytes())
    for path in every_file(sandbox):
        assert_no_key(str(path), path.read_bytes())
