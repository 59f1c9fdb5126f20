"""The transcript files under a folder, following symlinked folders that stay inside it.

People link a project folder into `~/.claude/projects` or keep their sessions
on another disk behind a link; `Path.rglob` does not follow such links. A
linked folder is walked when its real location is inside the root's real
location, and each real folder once (no loop). A linked folder that leads out of
the root is not walked (the watched-root rule, see confine.py) but named to the
caller, who says so once; `leave_root` (--follow-symlinks) walks it too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

#: The files capture and import take.
SUFFIX = ".jsonl"


def transcripts_under(root: Path, *, leave_root: bool = False, skipped: list[Path] | None = None) -> Iterator[Path]:
    """Every `*.jsonl` file under `root`, through symlinked folders whose target is inside `root`.

    A linked folder whose target is outside `root` is walked only with `leave_root`; otherwise
    it is appended to `skipped` (when given) and left out with everything under it.
    """
    top = root.resolve()
    seen: set[Path] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = Path(folder).resolve()
        if real in seen:
            dirs[:] = []
            continue
        if not leave_root and not real.is_relative_to(top):
            if skipped is not None:
                skipped.append(Path(folder))
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SUFFIX):
                yield Path(folder) / name
