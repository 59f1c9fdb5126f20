"""Shared pieces of the benchmark scripts: machine facts, medians, RESULTS.md sections."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sqlite3
import statistics
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "RESULTS.md"


def machine_info() -> dict[str, str]:
    """CPU count and model, Python, SQLite, OS and the date: the context every figure needs."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": f"{os.cpu_count()}" + (f" ({model})" if model else ""),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "os": platform.platform(),
    }


def machine_line(info: dict[str, str]) -> str:
    """One markdown line describing the machine."""
    return "Machine: " + "; ".join(f"{k} {v}" for k, v in info.items() if k != "date") + "."


#: The 1-minute load average when this bench process started (read at import, before the work).
LOAD_AT_START = os.getloadavg()[0]


def load_note() -> str:
    """One sentence on how busy the machine was, measured rather than assumed."""
    load, cpus = LOAD_AT_START, os.cpu_count() or 1
    if load < 0.75 * cpus:
        return f"Load average {load:.1f} on {cpus} cores when the run started (a quiet machine)."
    return (
        f"Load average {load:.1f} on {cpus} cores when the run started: the machine was shared with other "
        "work, so absolute times are noisy (ratios and medians within the run are the figures to read)."
    )


def median_of(runs: int, fn: Callable[[], float]) -> float:
    """The median of `runs` measurements (the machines are noisy)."""
    return statistics.median(fn() for _ in range(runs))


def write_section(out: Path, name: str, text: str) -> None:
    """Replace the section between `<!-- name:start -->` and `<!-- name:end -->`, keeping the rest."""
    start_mark, end_mark = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    body = f"{start_mark}\n{text.rstrip()}\n{end_mark}"
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    start, end = old.find(start_mark), old.find(end_mark)
    if start != -1 and end > start:
        new = old[:start] + body + old[end + len(end_mark) :]
    elif old.strip():
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    else:
        new = "# Benchmark results\n\n" + body + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(new, encoding="utf-8")
