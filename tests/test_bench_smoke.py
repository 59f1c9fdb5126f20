"""Smoke test of bench/append_resume.py: it runs and writes its markdown section.

No timing assertions: the figures depend on the machine and its load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "append_resume.py"


def test_quick_run_writes_its_section(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    other = "<!-- other:start -->\n## Another benchmark\nkept as is\n<!-- other:end -->\n"
    out.write_text("# Benchmark results\n\n" + other, encoding="utf-8")

    # A fast first run (two subjects), then a full quick run that must replace its section.
    for extra in (["--subjects", "raw-sqlite3,jsonl"], []):
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), "--quick", "--out", str(out), *extra],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]

    text = out.read_text(encoding="utf-8")
    assert other in text
    assert text.count("<!-- append_resume:start -->") == 1
    assert text.count("<!-- append_resume:end -->") == 1
    section = text.split("<!-- append_resume:start -->", 1)[1].split("<!-- append_resume:end -->", 1)[0]
    assert "### N = 1,000" in section
    assert "| subject | appends/s | × raw-sqlite3 | resume ms (median) | × raw-sqlite3 |" in section
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")}
    for name in ("raw-sqlite3", "jsonl", "sessionstore"):
        assert name in rows, f"no {name} row in:\n{section}"
        cells = [c.strip() for c in rows[name].strip("|").split("|")]
        assert float(cells[1].replace(",", "")) > 0, rows[name]  # appends/s
        assert float(cells[3].replace(",", "")) > 0, rows[name]  # resume ms
        assert cells[5] == "1000", rows[name]  # every message came back
    assert "openai-agents SQLiteSession" in rows  # measured, or "not installed"
    # sessionstore is the subject of the bench: measured for real, every message back, never a note instead.
    assert "python" in section and "sqlite" in section
