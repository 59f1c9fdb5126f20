"""Smoke test of bench/import_export.py: a quick run writes its section and keeps the others.

No timing assertions: the figures depend on the machine and its load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "import_export.py"
START, END = "<!-- import_export:start -->", "<!-- import_export:end -->"


def test_quick_run_writes_its_section(tmp_path: Path, transcripts_dir: Path) -> None:
    out = tmp_path / "RESULTS.md"
    other = "<!-- other:start -->\n## Another benchmark\nkept as is\n<!-- other:end -->\n"
    out.write_text("# Benchmark results\n\n" + START + "\nstale\n" + END + "\n\n" + other, encoding="utf-8")

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
    assert other in text and "stale" not in text
    assert text.count(START) == 1 and text.count(END) == 1
    section = text.split(START, 1)[1].split(END, 1)[0]
    rows = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| stage")
    }
    for stage in ("import (MB of input)", "export jsonl (MB of output)", "export html (MB of output)"):
        assert stage in rows, section
        assert float(rows[stage][1].replace(",", "")) > 0, rows[stage]
        assert rows[stage][6] in ("met", "**missed**")
    assert float(rows["import peak RSS"][5].replace(",", "")) > 0
    assert "Input: a 2" in section and "messages" in section, "about 20 MB of input"
    missed = {stage for stage, cells in rows.items() if cells[6] == "**missed**" and stage != "import peak RSS"}
    for stage in missed:
        assert f"### Profile: {stage.split(' (')[0].replace(' ', '-')}" in section, f"no profile for {stage}"
