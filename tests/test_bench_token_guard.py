"""Smoke test of bench/token_guard.py: it runs, writes its section, and shows the guard fixing the issue's examples."""

from __future__ import annotations

from pathlib import Path

from bench import token_guard


def test_quick_run_writes_its_section(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    assert token_guard.main(["--messages", "40", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.count("<!-- token_guard:start -->") == 1 and "<!-- token_guard:end -->" in text
    assert "Load average" in text, "the run says how busy the machine was"
    row = next(line for line in text.splitlines() if line.startswith("| 120,000 ACGT"))
    assert row.rstrip(" |").endswith("1.00"), row
