"""Smoke test of bench/cli.py: a tiny run writes its section with every subject timed and each target judged.

No timing assertions: the figures depend on the machine and its load.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- cli:start -->", "<!-- cli:end -->"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rg") is None, reason="bench/cli.py compares with ripgrep (apt-get install ripgrep)")
def test_a_tiny_run_writes_its_section(tmp_path: Path, transcripts_dir: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "cli.py"), "--size-mb", "1", "--runs", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = out.read_text(encoding="utf-8").split(START, 1)[1].split(END, 1)[0]
    rows = {line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")}
    assert {"baseline import", "--version", "sessions", "view", "search", "ripgrep"} <= rows, section
    assert section.count(": met") + section.count(": **missed**") == 3, section
    assert "Load average" in section
