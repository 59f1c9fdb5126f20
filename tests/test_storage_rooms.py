"""The storage rooms' old module paths: each still imports, as the moved module itself, until 0.3.0.

`sessionstore.storage.moved` maps the paths of release 0.1 (`sessionstore.storage.session`) to
the rooms (`sessionstore.storage.write.session`). Code in this repository uses the new paths only.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

from sessionstore.storage import moved
from tests.support.importgraph import REPO, modules

OLD_PATH = re.compile(r"sessionstore\.storage\.([a-z_]+)\b")


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_path_is_the_moved_module(old: str) -> None:
    aliased = importlib.import_module(f"sessionstore.storage.{old}")
    real = importlib.import_module(f"sessionstore.storage.{moved.MOVED[old]}.{old}")
    assert aliased is real
    assert real.__spec__ is not None and real.__spec__.name == real.__name__


def test_every_alias_names_a_module_in_its_room() -> None:
    found = modules()
    for old, room in moved.MOVED.items():
        assert f"sessionstore.storage.{room}.{old}" in found, f"{old} is not in storage/{room}/"


def test_from_imports_and_patching_reach_the_moved_module() -> None:
    """`from old import name` and a patch through the old path act on the one module (a fresh process)."""
    code = (
        "import sessionstore.storage.session as old\n"
        "from sessionstore.storage.session import Session\n"
        "import sessionstore.storage.write.session as new\n"
        "old.TRANSCRIPT_BATCH = 7\n"
        "assert new.TRANSCRIPT_BATCH == 7 and Session is new.Session\n"
        "from sessionstore.storage.search import Hit\n"
        "from sessionstore.storage.derived.search import Hit as H2\n"
        "assert Hit is H2\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_other_names_are_not_aliased() -> None:
    assert moved.new_name("sessionstore.storage.nothing") is None
    assert moved.new_name("sessionstore.storage.write.session") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sessionstore.storage.nothing")


def test_the_repository_uses_the_new_paths() -> None:
    """No module, test, bench or script of ours imports or patches an old path."""
    stale = []
    for folder in ("sessionstore", "compaction", "cli", "tests", "bench", "scripts", "examples"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "moved.py" or path == REPO / "tests" / "test_storage_rooms.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if any(m.group(1) in moved.MOVED for m in OLD_PATH.finditer(line)):
                    stale.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not stale, "old storage paths:\n" + "\n".join(stale)
