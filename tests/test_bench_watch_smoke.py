"""Smoke test of bench/watch.py: a quick run finishes and writes its section (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_run_writes_its_section(tmp_path: Path, transcripts_dir: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# Benchmark results\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n", encoding="utf-8")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "watch.py"),
            "--quick",
            "--lines",
            "30",
            "--idle-seconds",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    assert "<!-- other:start -->\nkept\n<!-- other:end -->" in text
    section = text.split("<!-- watch:start -->", 1)[1].split("<!-- watch:end -->", 1)[0]
    assert "| latency p95 |" in section and "| idle CPU, 10 files, 2 s |" in section
    assert "Load average" in section, "the run says how busy the machine was"
