"""`.ci/run`: a green run means both engines ran. PostgreSQL missing is installed (Debian's package);
installed but unreachable, or impossible to install, fails the run instead of skipping its tests."""

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


def _run(tmp_path: Path, port: int, *, installed: bool, apt: bool = False) -> subprocess.CompletedProcess[str]:
    """`.ci/run` in dry-run mode, with a `pg_ctlcluster` that cannot start anything when `installed`, and
    with `apt`, an `apt-get` that records its arguments in `apt.log` and fails (no package reaches it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if apt:
        fake_apt = bin_dir / "apt-get"
        fake_apt.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "apt.log"}\n[ "$1" = update ]\n')
        fake_apt.chmod(0o755)
    for tool in ("python3", "ls", "sleep", "head", "dirname", "id"):
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


def test_without_postgresql_the_run_installs_it_and_fails_when_it_cannot(tmp_path: Path) -> None:
    proc = _run(tmp_path, _closed_port(), installed=False, apt=os.getuid() == 0)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not installed; installing Debian's postgresql" in proc.stdout
    assert "failing rather than passing with its tests skipped" in proc.stderr
    if os.getuid() == 0:
        assert "install -y -qq postgresql" in (tmp_path / "apt.log").read_text()


def test_a_run_required_to_use_postgresql_fails_when_it_did_not() -> None:
    """`.ci/run` sets SESSIONSTORE_REQUIRE_PG: a suite that then runs without PostgreSQL is red, not green."""
    import sys

    env = {k: v for k, v in os.environ.items() if k != "SESSIONSTORE_TEST_PG_URL"}
    env["SESSIONSTORE_REQUIRE_PG"] = "1"
    one = "tests/test_sanitize.py::test_colour_codes_are_dropped_and_the_text_kept"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", one],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 passed" in proc.stdout and "PostgreSQL did not run" in proc.stdout
    env.pop("SESSIONSTORE_REQUIRE_PG")
    assert (
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", one],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        ).returncode
        == 0
    )
