"""Import and export throughput, and the importing process's peak memory, on a big Claude Code transcript.

    python bench/import_export.py [--size-mb 200] [--out bench/RESULTS.md]
    python bench/import_export.py --quick          # ~20 MB, a smoke run

The transcript is built in a temporary folder by repeating the shared real
Claude Code transcripts (../shared/transcripts/claude-code, every file) with
fresh ids in each repetition: every uuid (uuid, parentUuid,
logicalParentUuid, sessionId, ...), every `msg_`/`req_` id and every
`toolu_` tool id is replaced consistently within a repetition, so the copies
chain like the originals and never collide.

Each stage runs (3 times by default, the median reported) in a fresh child
process on a SQLite store and times itself (imports and store opening
excluded); the child reports its peak RSS (VmHWM from /proc/self/status):

- import: `import_file(store, path, source="claude-code")`, MB/s of input;
- jsonl export: `export_jsonl` to a file, MB/s of output;
- html export: `export_html` to a file, MB/s of output.

When a target is missed, the stage is run again under cProfile on the first
~20 MB of the transcript (a quarter of it with --quick) and its top functions are reported. Results replace
the section between the `import_export` markers of the output markdown file.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import os
import platform
import pstats
import random
import re
import shutil
import sqlite3
import string
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import write_section  # noqa: E402  (after the sys.path line above)

TRANSCRIPTS = REPO.parent / "shared" / "transcripts" / "claude-code"
MB = 1_000_000
FULL_MB = 200
QUICK_MB = 20
PROFILE_MB = 20
PROFILE_LINES = 14
CHILD_TIMEOUT_S = 3600
TARGETS = {"import": 20.0, "export-jsonl": 50.0, "export-html": 50.0}
RSS_TARGET_MB = 200.0
ID_PATTERN = re.compile(
    rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?:msg|req|toolu)_[0-9A-Za-z]{8,}"
)
ALNUM = string.ascii_letters + string.digits


# --- the transcript --------------------------------------------------------------------------------


def fresh_id(old: bytes, rng: random.Random) -> bytes:
    """A new id of the same shape: a uuid4, or the same prefix with random characters."""
    if old[8:9] == b"-":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode("ascii")
    prefix, _, rest = old.partition(b"_")
    return prefix + b"_" + "".join(rng.choice(ALNUM) for _ in rest).encode("ascii")


def repetition(corpus: bytes, rng: random.Random) -> bytes:
    """The corpus with every id replaced by a fresh one, consistently within this copy."""
    renamed: dict[bytes, bytes] = {}

    def swap(match: re.Match[bytes]) -> bytes:
        old = match.group(0)
        new = renamed.get(old)
        if new is None:
            new = renamed[old] = fresh_id(old, rng)
        return new

    return ID_PATTERN.sub(swap, corpus)


def shared_corpus(root: Path) -> bytes:
    """Every shared Claude Code transcript, main files first, each ending with a newline."""
    files = sorted(root.rglob("*.jsonl"), key=lambda p: ("subagents" in p.parts, str(p)))
    if not files:
        raise SystemExit(f"no Claude Code transcripts under {root}")
    parts = []
    for path in files:
        data = path.read_bytes()
        parts.append(data if data.endswith(b"\n") else data + b"\n")
    return b"".join(parts)


def build_transcript(path: Path, size_mb: float, seed: int = 7) -> int:
    """Write a transcript of at least `size_mb` MB by repeating the shared ones; returns its bytes."""
    corpus = shared_corpus(TRANSCRIPTS)
    rng = random.Random(seed)
    written = 0
    with open(path, "wb") as out:
        while written < size_mb * MB:
            chunk = repetition(corpus, rng)
            out.write(chunk)
            written += len(chunk)
    return written


def head_of(path: Path, target: Path, size_mb: float) -> int:
    """Copy the first whole lines of `path` up to about `size_mb` MB; returns the bytes copied."""
    copied = 0
    with open(path, "rb") as src, open(target, "wb") as out:
        for line in src:
            if copied >= size_mb * MB:
                break
            out.write(line)
            copied += len(line)
    return copied


# --- child processes ----------------------------------------------------------------------------------


def peak_rss_kb() -> int:
    """VmHWM (peak resident set) of this process, in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def current_rss_kb() -> int:
    """VmRSS of this process, in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def stage(name: str, url: str, arg: str, out: str) -> Callable[[], dict[str, Any]]:
    """The body of one child stage, run after the store and modules are loaded."""
    from sessionstore import SessionStore
    from sessionstore.interchange.export import export_html, export_jsonl
    from sessionstore.interchange.importing import import_file

    store = SessionStore.open(url)

    def run_import() -> dict[str, Any]:
        result = import_file(store, arg, source="claude-code")
        return {
            "session": result.session_id,
            "messages": result.messages_added,
            "lines": result.lines_added,
            "boundaries": result.boundaries,
            "warnings": len(result.warnings),
        }

    def run_export() -> dict[str, Any]:
        writer = export_jsonl if name == "export-jsonl" else export_html
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            count = writer(store.get(arg), f)
        return {"messages": count, "bytes": os.path.getsize(out)}

    return run_import if name == "import" else run_export


def child_main(argv: list[str]) -> int:
    """`child STAGE URL ARG OUT [PROFILE]`: run one stage, print its figures as JSON."""
    name, url, arg, out = argv[:4]
    profile_to = argv[4] if len(argv) > 4 else None
    body = stage(name, url, arg, out)
    rss_before = current_rss_kb()
    profiler = cProfile.Profile() if profile_to else None
    start = time.perf_counter()
    if profiler is not None:
        report = profiler.runcall(body)
    else:
        report = body()
    report["seconds"] = time.perf_counter() - start
    report["rss_before_kb"] = rss_before
    report["peak_rss_kb"] = peak_rss_kb()
    if profiler is not None and profile_to:
        Path(profile_to).write_text(profile_text(profiler), encoding="utf-8")
    print(json.dumps(report))
    return 0


def profile_text(profiler: cProfile.Profile) -> str:
    """Top functions by own time, then by cumulative time."""
    parts = []
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        stats = pstats.Stats(profiler, stream=buf).strip_dirs().sort_stats(key)
        stats.print_stats(PROFILE_LINES)
        parts.append(f"sorted by {key}:\n" + _trim_stats(buf.getvalue()))
    return "\n".join(parts)


def _trim_stats(text: str) -> str:
    """The table part of pstats output (from the header line on)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    return "\n".join(line.rstrip() for line in lines[start:] if line.strip())


def run_child(*args: str) -> dict[str, Any]:
    """Run `child ARGS` in a fresh interpreter with this working tree importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "child", *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {args[0]} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


# --- measuring ---------------------------------------------------------------------------------------


@dataclass
class Figures:
    """One stage's measurement."""

    stage: str
    megabytes: float
    seconds: float
    peak_rss_mb: float
    rss_before_mb: float
    detail: dict[str, Any]
    spread: tuple[float, float]

    @property
    def rate(self) -> float:
        return self.megabytes / self.seconds if self.seconds else 0.0


def measure(name: str, urls: list[str], arg: str, out: str, megabytes: float | None = None) -> Figures:
    """Run one stage once per url, each in a child: the median time, the highest peak RSS.

    MB is the input size for import, the output size for exports. `detail`
    is the first run's report (the store the exports then read).
    """
    reports = [run_child(name, url, arg, out) for url in urls]
    median = sorted(reports, key=lambda r: float(r["seconds"]))[len(reports) // 2]
    size = megabytes if megabytes is not None else median["bytes"] / MB
    peak = max(r["peak_rss_kb"] for r in reports) / 1000
    rates = [size / r["seconds"] for r in reports if r["seconds"]]
    spread = (min(rates), max(rates)) if rates else (0.0, 0.0)
    return Figures(name, size, median["seconds"], peak, median["rss_before_kb"] / 1000, reports[0], spread)


def profile(name: str, tmp: Path, transcript: Path, size_mb: float, log: Callable[[str], None]) -> str:
    """cProfile of one stage on the first `size_mb` MB of the transcript, in a fresh store."""
    small = tmp / "profile.jsonl"
    head_of(transcript, small, size_mb)
    url = f"sqlite:///{tmp / f'profile-{name}.db'}"
    log(f"profiling {name} on {small.stat().st_size / MB:.0f} MB")
    report = run_child("import", url, str(small), "", *([str(tmp / "profile-import.txt")] if name == "import" else []))
    if name != "import":
        run_child(name, url, report["session"], str(tmp / "profile.out"), str(tmp / f"profile-{name}.txt"))
    return (tmp / f"profile-{name}.txt").read_text(encoding="utf-8")


def fresh_stores(tmp: Path, runs: int) -> list[str]:
    """One empty SQLite URL per import run (a second import of the same file would add nothing)."""
    return [f"sqlite:///{tmp / f'bench-{k}.db'}" for k in range(runs)]


def run(
    size_mb: float, runs: int, tmp: Path, log: Callable[[str], None], profile_all: bool = False
) -> tuple[list[Figures], dict[str, str], dict[str, Any]]:
    """Build the transcript, measure every stage `runs` times, profile what misses its target (or all)."""
    transcript = tmp / "big.jsonl"
    started = time.perf_counter()
    size = build_transcript(transcript, size_mb)
    log(f"built {size / MB:.1f} MB in {time.perf_counter() - started:.1f}s")
    urls = fresh_stores(tmp, runs)
    imported = measure("import", urls, str(transcript), "", size / MB)
    log(f"import: {imported.rate:.1f} MB/s, peak RSS {imported.peak_rss_mb:.0f} MB")
    db = tmp / "bench-0.db"
    for k in range(1, runs):
        for path in tmp.glob(f"bench-{k}.db*"):
            path.unlink()
    session = imported.detail["session"]
    figures = [imported]
    for name, suffix in (("export-jsonl", "jsonl"), ("export-html", "html")):
        done = measure(name, urls[:1] * runs, session, str(tmp / f"export.{suffix}"))
        log(f"{name}: {done.rate:.1f} MB/s")
        figures.append(done)
    facts = {
        "input_mb": size / MB,
        "lines": imported.detail["lines"],
        "messages": imported.detail["messages"],
        "boundaries": imported.detail["boundaries"],
        "db_mb": db.stat().st_size / MB,
        "runs": runs,
    }
    head = min(PROFILE_MB, size_mb / 4)
    facts["profile_mb"] = head
    profiles = {
        f.stage: profile(f.stage, tmp, transcript, head, log)
        for f in figures
        if profile_all or f.rate < TARGETS[f.stage]
    }
    if imported.peak_rss_mb >= RSS_TARGET_MB and "import" not in profiles:
        profiles["import"] = profile("import", tmp, transcript, head, log)
    return figures, profiles, facts


# --- reporting ---------------------------------------------------------------------------------------


def machine_info() -> str:
    """CPU count and model, Python, SQLite, OS."""
    model = ""
    try:
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "",
        )
    except OSError:
        pass
    return (
        f"cpus {os.cpu_count()}{f' ({model})' if model else ''}; python {platform.python_version()} "
        f"({platform.python_implementation()}); sqlite {sqlite3.sqlite_version}; os {platform.platform()}"
    )


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def table(figures: list[Figures]) -> list[str]:
    """The results table: rate, target, time, size and memory per stage."""
    rows = [
        "| stage | MB/s | target | seconds | MB | peak RSS MB (at start) | target met | runs' MB/s |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    labels = {
        "import": "import (MB of input)",
        "export-jsonl": "export jsonl (MB of output)",
        "export-html": "export html (MB of output)",
    }
    for f in figures:
        rows.append(
            f"| {labels[f.stage]} | {f.rate:,.1f} | ≥ {TARGETS[f.stage]:.0f} | {f.seconds:,.1f} | "
            f"{f.megabytes:,.1f} | {f.peak_rss_mb:,.0f} ({f.rss_before_mb:,.0f}) | "
            f"{verdict(f.rate >= TARGETS[f.stage])} | {f.spread[0]:,.1f}–{f.spread[1]:,.1f} |"
        )
    imported = figures[0]
    rows.append(
        f"| import peak RSS | – | < {RSS_TARGET_MB:.0f} MB | – | – | {imported.peak_rss_mb:,.0f} | "
        f"{verdict(imported.peak_rss_mb < RSS_TARGET_MB)} | – |"
    )
    return rows


def section(figures: list[Figures], profiles: dict[str, str], facts: dict[str, Any], cmd: str) -> str:
    """The markdown section, between its markers."""
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "## Import and export throughput",
        "",
        f"`{cmd}` — {date}.",
        "",
        f"Machine: {machine_info()}; load average {facts['load'][0]:.1f} at the start, {facts['load'][1]:.1f} "
        "at the end (other work on the machine slows every figure).",
        "",
        f"Input: a {facts['input_mb']:,.1f} MB Claude Code transcript ({facts['lines']:,} lines, "
        f"{facts['messages']:,} messages, {facts['boundaries']:,} boundaries) made of the shared real "
        "transcripts repeated with fresh ids; SQLite store (WAL), "
        f"{facts['db_mb']:,.0f} MB on disk after the import. Each stage runs {facts['runs']} time(s), each in a "
        "fresh process that times itself (module loading and store opening excluded); the median time is "
        "shown, and the highest peak RSS (VmHWM) of those processes, with the RSS before the stage in "
        "parentheses.",
        "",
        *table(figures),
    ]
    for name, text in profiles.items():
        parts += ["", f"### Profile: {name} (cProfile, first {facts['profile_mb']:g} MB)", "", "```", text, "```"]
    return "\n".join(parts)


# --- main ----------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=FULL_MB, help="size of the built transcript")
    parser.add_argument("--quick", action="store_true", help=f"a ~{QUICK_MB} MB transcript (smoke run)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md", help="markdown file to update")
    parser.add_argument(
        "--runs", type=int, default=None, help="runs per stage, the median reported (default 3, 1 with --quick)"
    )
    parser.add_argument("--profile", action="store_true", help="profile every stage, not only those that miss")
    parser.add_argument("--keep", type=Path, default=None, help="keep the transcript and store in this folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["child"]:
        return child_main(argv[1:])
    args = parse_args(argv)
    size_mb = QUICK_MB if args.quick else args.size_mb
    runs = args.runs or (1 if args.quick else 3)
    load_before = os.getloadavg()[0]

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="sessionstore-bench-")) if args.keep is None else args.keep
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        figures, profiles, facts = run(size_mb, runs, tmp, log, profile_all=args.profile)
        facts["load"] = (load_before, os.getloadavg()[0])
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    cmd = " ".join(["python bench/import_export.py", *argv]).strip()
    text = section(figures, profiles, facts, cmd)
    write_section(args.out, "import_export", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
