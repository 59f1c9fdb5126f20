"""CLI startup: wall time of `--version`, `sessions`, `view` and `search` as a person runs them, in the same run as
the imports they cannot avoid and as ripgrep over the same JSONL.

    python bench/cli.py [--size-mb 200] [--runs 7] [--out bench/RESULTS.md]
    python bench/cli.py --quick              # ~20 MB store, 5 runs (smoke run)

The Claude Code transcript of bench/import_export.py (the shared transcripts repeated with fresh ids) is built
at --size-mb, imported into a fresh SQLite store and its search index caught up (none of this is timed). Then,
interleaved round by round so the machine's load falls on every subject alike, each is run as a new process:

- baseline: `python -c "import sqlalchemy.orm, typer, rich.table"`, the libraries every command needs;
- `sessionstore --version`, `sessionstore sessions`, `sessionstore view SESSION` (the newest session);
- `sessionstore search QUERY` for each of QUERIES, and `rg -F -i -- QUERY FILE | wc -l` over the JSONL.

Targets: `--version` and `sessions` p50 within 1.3x of the baseline's; `search` p50 below ripgrep's.
"""

from __future__ import annotations

import argparse
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import load_note, machine_info, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from bench.import_export import MB, build_transcript  # noqa: E402  (after the sys.path line above)

FULL_MB = 200
QUICK_MB = 20
RUNS = 7
QUICK_RUNS = 5
STARTUP_TARGET = 1.3
BASELINE = [sys.executable, "-c", "import sqlalchemy.orm, typer, rich.table"]
#: Queries a person types: a word, an identifier, a path, a phrase.
QUERIES = ["error", "localStorage", "lib/spotter_web/live/session_live.ex", '"Exit code 1"']


def sessionstore_command() -> list[str]:
    """The installed console script next to this interpreter (what a shell runs), else `python -m sessionstore`."""
    script = Path(sys.executable).with_name("sessionstore")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sessionstore"]


def timed_run(argv: list[str] | str, *, shell: bool = False) -> tuple[float, float]:
    """(wall ms, CPU ms of the child processes) of one run, output discarded; a failing command stops the bench.

    CPU time is what the run costs whatever else the machine is doing; wall time is what a person waits.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, shell=shell
    )
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return elapsed, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def build_store(size_mb: float, tmp: Path) -> tuple[Path, str, str, int]:
    """(JSONL path, store URL, newest session id, messages) for a corpus of `size_mb`, indexed for search."""
    from sessionstore import SessionStore
    from sessionstore.interchange.importing import import_file
    from sessionstore.storage.derived.search import catch_up

    jsonl = tmp / "corpus.jsonl"
    build_transcript(jsonl, size_mb)
    url = f"sqlite:///{tmp / 'store.db'}"
    with SessionStore.open(url) as store:
        import_file(store, str(jsonl), source="claude-code")
        catch_up(store.db, max_chars=store.config.search_max_chars, batch_chars=store.config.search_batch_chars)
        newest = store.list(limit=1)[0]["id"]
        messages = int(store.db.one("SELECT COUNT(*) FROM messages")[0])
    return jsonl, url, newest, messages


def measure(jsonl: Path, url: str, session: str, runs: int) -> dict[str, list[tuple[float, float]]]:
    """(wall ms, CPU ms) per run of each subject, `runs` rounds, every subject once per round."""
    cli = sessionstore_command()
    subjects: dict[str, list[list[str]]] = {
        "baseline import": [BASELINE],
        "--version": [[*cli, "--version"]],
        "sessions": [[*cli, "sessions", "--db", url]],
        "view": [[*cli, "view", session, "--db", url]],
        "search": [[*cli, "search", q, "--db", url] for q in QUERIES],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in [*subjects, "ripgrep"]}
    for commands in subjects.values():  # one warm-up each: the page cache, not the code, is cold
        timed_run(commands[0])
    for _ in range(runs):
        for name, commands in subjects.items():
            times[name] += [timed_run(argv) for argv in commands]
        times["ripgrep"] += [
            timed_run(f"rg -F -i -- {shlex.quote(q)} {shlex.quote(str(jsonl))} | wc -l", shell=True) for q in QUERIES
        ]
    return times


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def section(times: dict[str, list[tuple[float, float]]], size_mb: float, messages: int, runs: int, cmd: str) -> str:
    """The RESULTS.md section: p50/p95 wall and p50 CPU per subject, ratios to the baseline import, the targets."""
    info = machine_info()
    wall = {name: statistics.median(w for w, _ in runs_) for name, runs_ in times.items()}
    cpu = {name: statistics.median(c for _, c in runs_) for name, runs_ in times.items()}
    base_wall, base_cpu = wall["baseline import"], cpu["baseline import"]
    lines = [
        "## CLI startup (bench/cli.py)",
        "",
        f"Run {info['date']} with `{cmd}`. {machine_line(info)} " + load_note(),
        "",
        f"Store: {size_mb:.0f} MB of Claude Code JSONL imported into SQLite ({messages:,} messages), search index "
        f"caught up. Each subject is a new process, {runs} rounds interleaved after one warm-up; `search` and "
        f"ripgrep run {len(QUERIES)} queries a round ({', '.join(f'`{q}`' for q in QUERIES)}). CPU time is the "
        "child processes' (user + system), the figure least moved by other work on the machine.",
        "",
        "| subject | p50 wall ms | p95 wall ms | p50 CPU ms | x baseline, wall | x baseline, CPU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, runs_ in times.items():
        ordered = sorted(w for w, _ in runs_)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        lines.append(
            f"| {name} | {wall[name]:.0f} | {p95:.0f} | {cpu[name]:.0f} | {wall[name] / base_wall:.2f} | "
            f"{cpu[name] / base_cpu:.2f} |"
        )
    lines += ["", "Targets (judged on wall time, CPU time in brackets):", ""]
    for name in ("--version", "sessions"):
        lines.append(
            f"- `{name}` within {STARTUP_TARGET}x of the baseline import: "
            f"{verdict(wall[name] <= STARTUP_TARGET * base_wall)} ({verdict(cpu[name] <= STARTUP_TARGET * base_cpu)}); "
            f"{wall[name] / base_wall:.2f}x ({cpu[name] / base_cpu:.2f}x)"
        )
    lines.append(
        f"- `search` p50 below ripgrep's on the same JSONL: {verdict(wall['search'] < wall['ripgrep'])} "
        f"({verdict(cpu['search'] < cpu['ripgrep'])}); {wall['search']:.0f} ms vs {wall['ripgrep']:.0f} ms "
        f"({cpu['search']:.0f} vs {cpu['ripgrep']:.0f} ms CPU)"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=FULL_MB, help="JSONL corpus size to import")
    parser.add_argument("--runs", type=int, default=RUNS, help="rounds over every subject")
    parser.add_argument("--quick", action="store_true", help=f"a ~{QUICK_MB} MB store, {QUICK_RUNS} rounds")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md", help="markdown file to update")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("rg") is None:
        sys.stderr.write("bench/cli.py needs ripgrep: apt-get install ripgrep (make bench does it)\n")
        return 2
    size_mb, runs = (QUICK_MB, QUICK_RUNS) if args.quick else (args.size_mb, args.runs)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        print(f"building and importing a {size_mb:g} MB store", file=sys.stderr, flush=True)
        jsonl, url, session, messages = build_store(size_mb, Path(tmp))
        actual_mb = jsonl.stat().st_size / MB
        print(f"timing {runs} rounds", file=sys.stderr, flush=True)
        times = measure(jsonl, url, session, runs)
    cmd = "python bench/cli.py" + (" --quick" if args.quick else f" --size-mb {args.size_mb:g} --runs {args.runs}")
    text = section(times, actual_mb, messages, runs, cmd)
    write_section(args.out, "cli", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
