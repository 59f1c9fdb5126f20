"""Run the CLI in-process (fast) or as a real subprocess (exact), returning code and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from sessionstore.cli.app import main


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    """Invoke `sessionstore ARGS` in this process and capture what it printed."""
    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def run_cli_process(*args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> Result:
    """Invoke `python -m sessionstore ARGS` as a separate process."""
    proc = subprocess.run(
        [sys.executable, "-m", "sessionstore", *args], input=input, capture_output=True, env=env, timeout=120
    )
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def claude_code_round_trip(url: str, path: str, out: str) -> bytes:
    """Through the console script (`python -m sessionstore`): import the Claude Code file at `path` into the
    empty store at `url`, export its one session as claude-code to `out`, and return the bytes written."""
    env = {**os.environ, "SESSIONSTORE_DB_URL": url}
    imported = run_cli_process("import", "claude-code", path, env=env)
    assert imported.code == 0 and "Traceback" not in imported.err, imported.err
    listed = json.loads(run_cli_process("sessions", "--json", env=env).out)
    sid = (listed.get("sessions", listed) if isinstance(listed, dict) else listed)[0]["id"]
    exported = run_cli_process("export", sid, "-f", "claude-code", "-o", out, env=env)
    assert exported.code == 0, exported.err
    with open(out, "rb") as written:
        return written.read()
