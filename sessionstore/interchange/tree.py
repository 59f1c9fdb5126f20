"""The transcript files under a folder, following symlinked folders that stay inside it.

People link a project folder into `~/.claude/projects` or keep their sessions
on another disk behind a link; `Path.rglob` does not follow such links. A
linked folder is walked when its real location is inside the root's real
location (never out of it), and each real folder once (no loop).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

#: The files capture and import take.
SUFFIX = ".jsonl"


def transcripts_under(root: Path) -> Iterator[Path]:
    """Every `*.jsonl` file under `root`, through symlinked folders whose target is inside `root`."""
    top = root.resolve()
    seen: set[Path] = set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = Path(folder).resolve()
        if real in seen or not real.is_relative_to(top):
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        for name in sorted(files):
            if name.endswith(SUFFIX):
                yield Path(folder) / name
