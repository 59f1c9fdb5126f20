"""An older sessionstore, installed from this repository's own history, for upgrade tests.

The release is taken with `git archive` from the checkout's history and installed (with pip's build
isolation, as a person's `pip install` of that version would) into a fresh venv whose dependencies are
this test run's own, so it builds offline. A clone without that history fails with the command that
brings it, never skips.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Release:
    """An installed older release: its console script, run on a store named by URL."""

    commit: str
    script: Path

    def run(self, url: str, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """`sessionstore ARGS` of this release on the store at `url`."""
        env = {**os.environ, "SESSIONSTORE_DB_URL": url, "COLUMNS": "200"}
        env.pop("SESSIONSTORE_FAULT", None)
        done = subprocess.run([str(self.script), *args], env=env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(
                f"{self.commit}: sessionstore {' '.join(args)} exited {done.returncode}: {done.stderr}"
            )
        return done

    def json(self, url: str, *args: str) -> object:
        """The parsed `--json` output of a read command."""
        return json.loads(self.run(url, *args, "--json").stdout)


def install_release(commit: str, target: Path) -> Release:
    """Install the release at `commit` of this repository into a venv under `target`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, timeout=120)
    if archive.returncode != 0:
        pytest.fail(
            f"the upgrade tests install release {commit} from this repository's history, which this clone lacks "
            f"({archive.stderr.decode(errors='replace').strip()}); run `git fetch --unshallow` and try again"
        )
    source = target / "source"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")
    env_dir = target / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The release's dependencies are this run's own (the same pins): its venv reads our site-packages after its own.
    Path(site, "zz-test-run-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(source)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"could not install release {commit}: {done.stderr[-2000:]}")
    return Release(commit, env_dir / "bin" / "sessionstore")
