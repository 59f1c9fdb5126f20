"""The watched-root rule: a file found under a folder is taken only if it really lives there.

A symlink planted in a watched folder (`~/.claude/projects/x/a.jsonl -> ~/.ssh/...`) would make
capture read, store and index a file from elsewhere, under the outside path. `inside_root` is the
one test `watch` and `import DIR` apply (unless `--follow-symlinks` is given).
"""

from __future__ import annotations

import os
from pathlib import Path


def inside_root(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True when `path`, every link resolved, is `root` (resolved) or lies under it."""
    real = Path(path).resolve()
    base = Path(root).resolve()
    return real == base or base in real.parents


def escape_note(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """What is said, once, about a file skipped because it leads out of `root` (after its path)."""
    return f"leads to {Path(path).resolve()}, outside {Path(root).resolve()}; skipped (--follow-symlinks takes it)"
