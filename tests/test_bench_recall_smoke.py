"""Smoke test of bench/recall.py: a quick run writes its section with every call measured.

No timing assertions: the figures depend on the machine and its load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- recall:start -->", "<!-- recall:end -->"


@pytest.mark.slow
def test_quick_run_writes_its_section(tmp_path: Path, transcripts_dir: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "recall.py"), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    section = out.read_text(encoding="utf-8").split(START, 1)[1].split(END, 1)[0]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")}
    for call in (
        "recall last",
        "recall query",
        "recall around",
        "mcp view_before (first page)",
        "mcp view_before (deep page)",
        "mcp recall",
        "view_before page of 10",
        "recall 8,000 tokens",
    ):
        assert call in rows, section
    assert "Load average" in section, "the run says how busy the machine was"
