"""Smoke test of bench/browse.py: a quick run writes its section and keeps the others.

No timing assertions: the figures depend on the machine and its load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "browse.py"


@pytest.mark.slow
def test_quick_run_writes_its_section(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    other = "<!-- other:start -->\n## Another benchmark\nkept as is\n<!-- other:end -->\n"
    out.write_text("# Benchmark results\n\n" + other, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    assert other in text and text.count("<!-- browse:start -->") == 1
    section = text.split("<!-- browse:start -->", 1)[1].split("<!-- browse:end -->", 1)[0]
    rows = [
        line
        for line in section.splitlines()
        if line.startswith("| session screen ready") or line.startswith("| open a boundary")
    ]
    assert len(rows) == 3
    for row in rows:
        wall, cpu = (float(c) for c in row.strip("|").split("|")[1:3])
        assert wall > 0 and cpu > 0
    assert "Targets, wall clock:" in section and "CPU time:" in section
