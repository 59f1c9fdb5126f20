"""CLI startup: wall time of `--version`, `sessions`, `view` and `search` as a person runs them from the installed
wheel, each paired with the imports it cannot avoid (or, for `search`, with ripgrep over the same JSONL).

    python bench/cli.py [--size-mb 200] [--runs 15] [--out bench/RESULTS.md]
    python bench/cli.py --quick              # a ~22 MB store, 9 rounds (smoke run)

The wheel is built from a copy of the checkout and installed with its dependencies into a fresh venv (pip's own
index settings), so what is timed is what a user runs: that venv's `sessionstore` console script, never the
editable install. The Claude Code transcript of bench/import_export.py (the shared transcripts repeated with
fresh ids, in whole repetitions: `--size-mb 20` gives about 22 MB) is built at --size-mb, imported into a fresh
SQLite store and its search index caught up (none of this is timed). Then each round runs, as new processes:

- `sessionstore --version`, `sessionstore sessions`, `sessionstore view SESSION` (the newest session), each
  back to back with the baseline, `python -c "import sqlalchemy.orm, typer, rich.table"` in the same venv (the
  libraries every command needs);
- `sessionstore search QUERY` for each of QUERIES, back to back with `rg -F -i -- QUERY FILE | wc -l`.

Each pair runs in the other order the next round, so neither side always finds the caches warmer. A pair gives
one ratio (subject / reference); the figure is the median of those ratios, which load that comes and goes
between pairs moves far less than it moves a median of separate times.

Targets: `--version` and `sessions` within 1.3x of the baseline (median paired ratio); `search` below ripgrep.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import load_note, machine_info, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from bench.import_export import MB, build_transcript  # noqa: E402  (after the sys.path line above)

FULL_MB = 200
QUICK_MB = 20
RUNS = 15
QUICK_RUNS = 9
STARTUP_TARGET = 1.3
BASELINE_CODE = "import sqlalchemy.orm, typer, rich.table"
#: Queries a person types: a word, an identifier, a path, a phrase.
QUERIES = ["error", "localStorage", "lib/spotter_web/live/session_live.ex", '"Exit code 1"']
#: What the copy of the checkout the wheel is built from leaves out.
NOT_SOURCES = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "demo-output")

#: A command: an argv list, or a shell line (the ripgrep pipeline).
Command = list[str] | str
#: (wall ms, CPU ms) of one run.
Sample = tuple[float, float]


@dataclass(frozen=True)
class Installed:
    """A fresh venv holding the built wheel and its dependencies: its python and its `sessionstore` script."""

    python: Path
    script: Path


@dataclass
class Pairs:
    """The paired runs of one subject against its reference: (subject, reference) samples, one pair a round."""

    reference: str
    runs: list[tuple[Sample, Sample]] = field(default_factory=list)

    def ratio(self, part: int) -> float:
        """The median over pairs of subject / reference, of wall time (part 0) or CPU time (part 1)."""
        return statistics.median(s[part] / r[part] for s, r in self.runs)


def checked(argv: list[str], what: str, cwd: Path) -> None:
    """Run a setup step, its output kept; a failure stops the bench with the step's last words."""
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}")


def install_wheel(tmp: Path) -> Installed:
    """Build the wheel from a copy of the checkout (setuptools writes build/ beside the sources it builds) and
    install it, dependencies and all, into a new venv: the package as a user gets it."""
    source, dist, venv = tmp / "source", tmp / "dist", tmp / "venv"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    checked([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)], "pip wheel", tmp)
    wheel = next(dist.glob("sessionstore-*.whl"))
    checked([sys.executable, "-m", "venv", str(venv)], "python -m venv", tmp)
    checked([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], "pip install (the wheel)", tmp)
    shutil.rmtree(source)
    return Installed(python=venv / "bin" / "python", script=venv / "bin" / "sessionstore")


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a timed run: nothing pointing back into the checkout or at another store."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "SESSIONSTORE_DB_URL"}}
    env["XDG_DATA_HOME"] = str(home / "data")
    return env


def timed_run(command: Command, cwd: Path, env: dict[str, str]) -> Sample:
    """(wall ms, CPU ms of the child processes) of one run, output discarded; a failing command stops the bench.

    CPU time is what the run costs whatever else the machine is doing; wall time is what a person waits.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        shell=isinstance(command, str),
        cwd=cwd,
        env=env,
    )
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{command} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return elapsed, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def run_pair(
    subject: Command, reference: Command, subject_first: bool, cwd: Path, env: dict[str, str]
) -> tuple[Sample, Sample]:
    """The subject and its reference back to back, in the order given: (subject sample, reference sample)."""
    if subject_first:
        ran = timed_run(subject, cwd, env)
        return ran, timed_run(reference, cwd, env)
    against = timed_run(reference, cwd, env)
    return timed_run(subject, cwd, env), against


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


def measure(installed: Installed, jsonl: Path, url: str, session: str, runs: int, home: Path) -> dict[str, Pairs]:
    """`runs` rounds; each round pairs every subject with its reference once, the order flipping every round."""
    env = clean_env(home)
    cli = str(installed.script)
    baseline: Command = [str(installed.python), "-c", BASELINE_CODE]
    startup: dict[str, Command] = {
        "--version": [cli, "--version"],
        "sessions": [cli, "sessions", "--db", url],
        "view": [cli, "view", session, "--db", url],
    }
    searches = [
        ([cli, "search", q, "--db", url], f"rg -F -i -- {shlex.quote(q)} {shlex.quote(str(jsonl))} | wc -l")
        for q in QUERIES
    ]
    pairs = {name: Pairs("baseline import") for name in startup} | {"search": Pairs("ripgrep")}
    for command in [baseline, *startup.values(), *(c for pair in searches for c in pair)]:
        timed_run(command, home, env)  # one warm-up each: the page cache, not the code, is cold
    for round_ in range(runs):
        subject_first = round_ % 2 == 0
        for name, command in startup.items():
            pairs[name].runs.append(run_pair(command, baseline, subject_first, home, env))
        for command, grep in searches:
            pairs["search"].runs.append(run_pair(command, grep, subject_first, home, env))
    return pairs


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def percentiles(samples: list[Sample]) -> tuple[float, float, float]:
    """(p50 wall, p95 wall, p50 CPU) of some runs."""
    ordered = sorted(w for w, _ in samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95, statistics.median(c for _, c in samples)


def table_rows(pairs: dict[str, Pairs]) -> list[str]:
    """One row per subject (its paired ratios) and per reference (every run it was paired in)."""
    rows = []
    references: dict[str, list[Sample]] = {}
    for name, found in pairs.items():
        references.setdefault(found.reference, []).extend(r for _, r in found.runs)
        p50, p95, cpu = percentiles([s for s, _ in found.runs])
        rows.append(
            f"| {name} | {found.reference} | {p50:.0f} | {p95:.0f} | {cpu:.0f} | {found.ratio(0):.2f} | "
            f"{found.ratio(1):.2f} | {len(found.runs)} |"
        )
    for name, samples in references.items():
        p50, p95, cpu = percentiles(samples)
        rows.append(f"| {name} | (reference) | {p50:.0f} | {p95:.0f} | {cpu:.0f} | | | {len(samples)} |")
    return rows


def targets(pairs: dict[str, Pairs]) -> list[str]:
    """The three targets, judged on the median paired wall-time ratio (CPU time's in brackets)."""
    lines = []
    for name in ("--version", "sessions"):
        wall, cpu = pairs[name].ratio(0), pairs[name].ratio(1)
        lines.append(
            f"- `{name}` within {STARTUP_TARGET}x of the baseline import: {verdict(wall <= STARTUP_TARGET)} "
            f"({verdict(cpu <= STARTUP_TARGET)}); {wall:.2f}x ({cpu:.2f}x)"
        )
    wall, cpu = pairs["search"].ratio(0), pairs["search"].ratio(1)
    lines.append(
        f"- `search` below ripgrep on the same JSONL: {verdict(wall < 1)} ({verdict(cpu < 1)}); {wall:.2f}x ({cpu:.2f}x)"
    )
    return lines


def section(pairs: dict[str, Pairs], size_mb: float, messages: int, runs: int, cmd: str) -> str:
    """The RESULTS.md section: per subject its times and median paired ratios, per reference its times, the targets."""
    info = machine_info()
    return "\n".join(
        [
            "## CLI startup (bench/cli.py)",
            "",
            f"Run {info['date']} with `{cmd}`. {machine_line(info)} " + load_note(),
            "",
            f"Timed from the installed wheel: built from the checkout and installed with its dependencies into a "
            f'fresh venv, whose `sessionstore` script and python (for the baseline `python -c "{BASELINE_CODE}"`) '
            f"are run. Store: {size_mb:.0f} MB of Claude Code JSONL imported into SQLite ({messages:,} messages), "
            f"search index caught up. Each run is a new process; {runs} rounds after one warm-up, each running every "
            "subject back to back with its reference, the order flipping every round; `search` and ripgrep pair "
            f"once per query ({', '.join(f'`{q}`' for q in QUERIES)}). A ratio is the median over pairs of subject / "
            "reference. CPU time is the child processes' (user + system), the figure least moved by other work on "
            "the machine.",
            "",
            "| subject | paired with | p50 wall ms | p95 wall ms | p50 CPU ms | x reference, wall | x reference, CPU | runs |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
            *table_rows(pairs),
            "",
            "Targets (median paired ratio of wall time, of CPU time in brackets):",
            "",
            *targets(pairs),
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=FULL_MB, help="JSONL corpus size to import")
    parser.add_argument("--runs", type=int, default=RUNS, help="rounds, each pairing every subject once")
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
        print("building the wheel and installing it into a fresh venv", file=sys.stderr, flush=True)
        installed = install_wheel(Path(tmp))
        print(f"building and importing a {size_mb:g} MB store", file=sys.stderr, flush=True)
        jsonl, url, session, messages = build_store(size_mb, Path(tmp))
        actual_mb = jsonl.stat().st_size / MB
        print(f"timing {runs} rounds of pairs", file=sys.stderr, flush=True)
        pairs = measure(installed, jsonl, url, session, runs, Path(tmp))
    cmd = "python bench/cli.py" + (" --quick" if args.quick else f" --size-mb {args.size_mb:g} --runs {args.runs}")
    text = section(pairs, actual_mb, messages, runs, cmd)
    write_section(args.out, "cli", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
