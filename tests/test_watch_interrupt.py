"""Ctrl-C stops `watch` with its own message, not the file-watching library's log line.

The watcher let watchfiles swallow the interrupt: stderr showed
"KeyboardInterrupt caught, stopping watch" and never the CLI's promise that
every file is in the store up to its last whole line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.interrupt import FAULTHANDLER_ENV, TERMINAL_SIGINT, interrupt


def test_ctrl_c_says_what_was_kept(tmp_path: Path) -> None:
    folder = tmp_path / "transcripts"
    folder.mkdir()
    env = {**os.environ, **FAULTHANDLER_ENV, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("SESSIONSTORE_DB_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessionstore", "watch", str(folder), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        **TERMINAL_SIGINT,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        deadline = time.monotonic() + 60
        while "watching" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
        assert "watching" in line, line
        _, err = interrupt(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped; every file is in the store" in err
    assert "KeyboardInterrupt" not in err and "Traceback" not in err
