"""History at the cost of one boundary: a session with thousands of boundaries against one with 20.

Both sessions live in one SQLite store and are built the same way: cycles of ~30 appended
messages (whole tool-using turns) then a compaction that keeps the newest ~25 entries
verbatim behind a boundary and a ~2,000-character summary, so each view before a boundary
holds ~60 entries and kept rows outlive several versions. For a boundary in the middle of
each session, in-process and interleaved (median of the runs):

* `view_before(K)`, `summarized_messages(K)`;
* `sessionstore history S --boundary K` (--json and table) and the first page of
  `sessionstore history S` (text and --json): the command's function in this process,
  store open and output included; typer's own dispatch is shown once, for scale;
* for scale, the past-view query without the floor (every row valid at v, the old scan) and
  `boundaries()` of the whole session with full summaries.

Run: python bench/history.py [--boundaries 3000] [--quick] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, machine_info, load_note, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from bench.cycles import CycleShape  # noqa: E402  (after the sys.path line above)
from bench.cycles import build as cycles_build  # noqa: E402  (after the sys.path line above)
from sessionstore import SessionStore  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.app import main as cli_main  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.compactcmd import HISTORY_PAGE, history_cmd  # noqa: E402  (after the sys.path line above)
from sessionstore.storage import history as hist  # noqa: E402  (after the sys.path line above)
from sessionstore.storage.write.session import Session  # noqa: E402  (after the sys.path line above)

SMALL = 20
KEEP = 25
RUNS = 21
TARGET_RATIO = 1.5
TARGET_MS = 20.0
TARGET_PAGE_MS = 100.0
SHAPE = CycleShape(messages=34, seeds=50, keep=KEEP)


def build(store: SessionStore, boundaries: int, log: Callable[[str], None]) -> Session:
    """A session with `boundaries` compactions, each after ~30 appended messages."""
    return cycles_build(store, SHAPE, boundaries, f"{boundaries} boundaries", log, log_every=500)


def run_cli(args: list[str]) -> None:
    """`sessionstore ARGS` through the CLI's main in this process (typer dispatch included), output discarded."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_main(args)
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise RuntimeError(f"sessionstore {' '.join(args)} exited {exc.code}") from None


def run_history(url: str, session_id: str, **options: Any) -> None:
    """The `history` command's function in this process (store open and output included), output discarded."""
    options = {"boundary": None, "summary": False, "limit": HISTORY_PAGE, "offset": 0, "json_out": False, **options}
    with contextlib.redirect_stdout(io.StringIO()):
        history_cmd(session_id, db=url, **options)


def unfloored_view(session: Session, version: int) -> int:
    """The past-view query without a floor (every row valid at `version`): the old scan, for scale."""
    rows = session.db.all(
        "SELECT seq, content_json, tokens FROM view_entries WHERE session_id = :id AND valid_from <= :v "
        "AND (valid_to IS NULL OR valid_to > :v) ORDER BY key",
        {"id": session.id, "v": version},
    )
    return len(rows)


def subjects(url: str, session: Session, k: int) -> dict[str, Callable[[], Any]]:
    """What is timed for boundary `k` of `session`."""
    version = hist.boundary(session, k).replaced_version
    return {
        "view_before(K)": lambda: hist.view_before(session, k),
        "summarized_messages(K)": lambda: hist.summarized_messages(session, k),
        "history --boundary K --json": lambda: run_history(url, session.id, boundary=k, json_out=True),
        "history --boundary K (table)": lambda: run_history(url, session.id, boundary=k),
        "history (first page)": lambda: run_history(url, session.id),
        "history --json (first page)": lambda: run_history(url, session.id, json_out=True),
        "for scale: `sessionstore history S` through typer (its dispatch builds every command)": lambda: run_cli(
            ["history", session.id, "--db", url]
        ),
        "past-view query without the floor (old scan)": lambda: unfloored_view(session, version),
        "boundaries(), all, full summaries": lambda: hist.boundaries(session),
    }


def measure(url: str, sessions: dict[str, tuple[Session, int]], runs: int) -> dict[str, dict[str, float]]:
    """Median ms per subject per session, all calls interleaved."""
    fns = {(label, name): fn for label, (s, k) in sessions.items() for name, fn in subjects(url, s, k).items()}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in fns}
    for _ in range(runs):
        for key, fn in fns.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    out: dict[str, dict[str, float]] = {}
    for (label, name), values in times.items():
        out.setdefault(name, {})[label] = statistics.median(values) * 1000
    return out


def section(
    results: dict[str, dict[str, float]], big: int, facts: dict[str, str], info: dict[str, str], cmd: str
) -> str:
    small_label, big_label = f"{SMALL} boundaries", f"{big:,} boundaries"
    lines = [
        "## History at the cost of one boundary",
        "",
        f"`{cmd}` — {info['date']}.",
        "",
        machine_line(info) + " " + load_note(),
        "",
        f"Two sessions in one SQLite store, built alike: {facts['big']}; {facts['small']}. Each boundary "
        f"keeps the newest ~{KEEP} entries, so views before a boundary hold ~60 entries and kept rows outlive "
        f"several versions. Boundary K is the middle one of each session ({facts['ks']}). In-process, "
        f"interleaved, median of {facts['runs']} runs, ms. The `history` rows call the command's function in "
        "this process (opening the store and writing the output included; typer's dispatch, which builds every "
        "command of the app, is the last row's extra).",
        "",
        f"| subject | {small_label} | {big_label} | × | target |",
        "|---|---:|---:|---:|---|",
    ]
    verdicts = []
    for name, by in results.items():
        small, large = by[small_label], by[big_label]
        ratio = large / small if small else float("inf")
        target = ""
        if name in (
            "view_before(K)",
            "summarized_messages(K)",
            "history --boundary K --json",
            "history --boundary K (table)",
        ):
            met = ratio <= TARGET_RATIO and large <= TARGET_MS
            target = f"≤ {TARGET_RATIO}× and ≤ {TARGET_MS:.0f} ms: **{'met' if met else 'missed'}**"
            verdicts.append(met)
        elif name.startswith("history") and "first page" in name:
            met = large <= TARGET_PAGE_MS
            target = f"≤ {TARGET_PAGE_MS:.0f} ms: **{'met' if met else 'missed'}**"
            verdicts.append(met)
        lines.append(f"| {name} | {small:.2f} | {large:.2f} | {ratio:.2f}× | {target} |")
    lines += ["", f"Targets met: {sum(verdicts)} of {len(verdicts)}."]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boundaries", type=int, default=3000, help="boundaries of the large session")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--quick", action="store_true", help="300 boundaries, 5 runs (smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown file to update")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    big = 300 if args.quick else args.boundaries
    runs = 5 if args.quick else args.runs

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    info = machine_info()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'history.db'}"
        with SessionStore.open(url) as store:
            log(f"building a session with {SMALL} boundaries and one with {big:,}")
            small = build(store, SMALL, log)
            large = build(store, big, log)
            facts = {}
            for label, s, n in (("small", small, SMALL), ("big", large, big)):
                count = store.db.one("SELECT COUNT(*) FROM messages WHERE session_id = :id", {"id": s.id})[0]
                rows = store.db.one("SELECT COUNT(*) FROM view_entries WHERE session_id = :id", {"id": s.id})[0]
                facts[label] = f"{n:,} boundaries, {count:,} messages, {rows:,} view rows"
            ks = {f"{SMALL} boundaries": (small, SMALL // 2), f"{big:,} boundaries": (large, big // 2)}
            facts["ks"] = f"K = {SMALL // 2} and {big // 2}"
            facts["runs"] = str(runs)
            sizes = {label: len(hist.view_before(s, k)) for label, (s, k) in ks.items()}
            log(f"views before K: {sizes}; timing {runs} runs")
            results = measure(url, ks, runs)
    cmd = "python bench/history.py" + (" --quick" if args.quick else f" --boundaries {big}")
    text = section(results, big, facts, info, cmd)
    print(text)
    write_section(args.out, "history", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
