"""`.ci/run`: PostgreSQL installed but unreachable fails the run instead of skipping its tests."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path: Path, port: int, *, installed: bool) -> subprocess.CompletedProcess[str]:
    """`.ci/run` in dry-run mode, with a `pg_ctlcluster` that cannot start anything when `installed`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("python3", "ls", "sleep", "head", "dirname"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    if installed:
        fake = bin_dir / "pg_ctlcluster"
        fake.write_text("#!/bin/sh\necho 'Error: cluster is broken' >&2\nexit 1\n")
        fake.chmod(0o755)
    env = {**os.environ, "PATH": str(bin_dir), "CI_PG_PORT": str(port), "CI_DRY_RUN": "1"}
    bash = subprocess.run(["sh", "-c", "command -v bash"], capture_output=True, text=True).stdout.strip()
    return subprocess.run([bash, str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=120)


def test_installed_but_unreachable_postgresql_fails_the_run(tmp_path: Path) -> None:
    proc = _run(tmp_path, _closed_port(), installed=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "installed but could not be started or reached" in proc.stderr


def test_without_postgresql_installed_the_run_goes_on(tmp_path: Path) -> None:
    proc = _run(tmp_path, _closed_port(), installed=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not installed; its tests will skip" in proc.stdout
