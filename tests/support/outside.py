"""Run the installed console script as a person does: a subprocess on a store URL, in a private home.

`run_ok` runs it in the test process's own environment, for a step whose success is all that matters.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: The console script installed beside this interpreter.
SCRIPT = Path(sys.executable).parent / "sessionstore"


@dataclass(frozen=True)
class Ran:
    """What one command gave a person: exit code and both streams."""

    code: int
    out: str
    err: str

    @property
    def traceback(self) -> bool:
        """True when either stream holds a Python traceback."""
        return "Traceback (most recent call last)" in self.out + self.err


#: A person's own folders: the variable a program finds each by, and the folder's name under a private root.
PRIVATE_FOLDERS = (
    ("HOME", "home"),
    ("XDG_DATA_HOME", "data"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_CACHE_HOME", "cache"),
    ("XDG_CONFIG_HOME", "config"),
)


def private_folders(root: Path, *extra: tuple[str, str]) -> dict[str, str]:
    """HOME and the XDG folders (and `extra` (variable, folder) pairs) made under `root`: variable -> folder.

    So nothing a command writes or reads as per-user state is the caller's.
    """
    folders = {}
    for var, sub in (*PRIVATE_FOLDERS, *extra):
        (root / sub).mkdir(parents=True, exist_ok=True)
        folders[var] = str(root / sub)
    return folders


def private_env(home: Path) -> dict[str, str]:
    """The environment with HOME and the XDG folders under `home` and no store URL of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONSTORE_DB", "ANTHROPIC_"))}
    env.update(private_folders(home))
    env["COLUMNS"] = "80"
    return env


def sessionstore(url: str, env: dict[str, str], *args: str, stdin: str = "") -> Ran:
    """`sessionstore ARGS` on the store at `url`, as a subprocess; its exit code and output."""
    proc = subprocess.run(
        [str(SCRIPT), *args],
        input=stdin.encode(),
        capture_output=True,
        env={**env, "SESSIONSTORE_DB_URL": url},
        timeout=300,
    )
    return Ran(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def run_ok(*args: str) -> str:
    """`sessionstore ARGS` through the installed script in this process's environment, which must exit 0: its stdout."""
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout
