"""Rewrite and resume benchmark.

1. The rewrite transaction alone (summarizer excluded) for views of 500, 2,000
   and 10,000 entries: a full compaction's plan committed with commit_rewrite.
2. Resume of a session with 100,000 recorded messages and 20 boundaries whose
   view holds about 5,000 entries, in a fresh process, against a raw-sqlite3
   range scan of the same 5,000 rows and a raw full load of all 100,000.

Run: python bench/rewrite.py [--quick] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, machine_info, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from sessionstore.compaction.commit import commit_compaction  # noqa: E402  (after the sys.path line above)
from sessionstore.compaction.rounds import adjust_split  # noqa: E402  (after the sys.path line above)
from sessionstore import SessionStore  # noqa: E402  (after the sys.path line above)
from tests.support.messages import conversation  # noqa: E402  (after the sys.path line above)

RUNS = 5
#: Fresh processes per resume subject: each is short and the machine noisy.
RESUME_RUNS = 9


def rewrite_time(tmp: Path, size: int, run: int) -> float:
    """Seconds for the rewrite transaction of a full compaction over a `size`-entry view."""
    url = f"sqlite:///{tmp / f'rw-{size}-{run}.db'}"
    with SessionStore.open(url) as store:
        s = store.create_session()
        s.append_many(conversation(size, seed=run))
        snap = s.snapshot()
        cut = adjust_split(snap.entries, len(snap.entries) - 4, direction="earlier")
        # A garbage collection first (as bench/prepare.py does): otherwise whether a full collection
        # falls inside the timed commit depends on what the earlier, smaller runs left in the heap.
        gc.collect()
        start = time.perf_counter()
        commit_compaction(
            s,
            snap,
            summarized=snap.entries[:cut],
            kept=snap.entries[cut:],
            summary_text="summary " * 200,
            truncated=False,
            kind="full",
            trigger="manual",
            layout="suffix",
            summarizer="bench",
        )
        return time.perf_counter() - start


def build_big_session(url: str, total: int, boundaries: int, keep: int) -> str:
    """`total` messages in `boundaries` rounds, each ending in an up_to compaction keeping ~`keep` entries."""
    per_round = total // boundaries
    with SessionStore.open(url) as store:
        s = store.create_session(title="resume bench")
        source = conversation(total, seed=7)
        for _ in range(boundaries):
            batch = [next(source) for _ in range(per_round)]
            s.append_many(batch)
            snap = s.snapshot()
            # At least half the view is summarized, so every compaction shrinks it (one that would not is declined).
            cut = adjust_split(snap.entries, max(len(snap.entries) - keep, len(snap.entries) // 2), direction="earlier")
            commit_compaction(
                s,
                snap,
                summarized=snap.entries[:cut],
                kept=snap.entries[cut:],
                summary_text="summary of the earlier work " * 50,
                truncated=False,
                kind="partial-up_to",
                trigger="manual",
                layout="suffix",
                summarizer="bench",
            )
        return s.id


RESUME_CHILD = """
import sys, time
t = time.perf_counter()
from sessionstore import SessionStore
t = time.perf_counter()
with SessionStore.open(sys.argv[1]) as store:
    view = getattr(store.get(sys.argv[2]), sys.argv[3])()
    elapsed = time.perf_counter() - t
print(elapsed, len(view))
"""

RAW_CHILD = """
import json, sqlite3, sys, time
t = time.perf_counter()
conn = sqlite3.connect(sys.argv[1])
rows = conn.execute("SELECT json FROM raw WHERE session_id = ? AND seq > ? ORDER BY seq", (sys.argv[2], int(sys.argv[3]))).fetchall()
loaded = [json.loads(r[0]) for r in rows]
print(time.perf_counter() - t, len(loaded))
"""


def child_seconds(code: str, *args: str) -> tuple[float, int]:
    """Run `code` in a fresh interpreter; it prints elapsed seconds and a count."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout.split()
    return float(out[0]), int(out[1])


def raw_baseline(db_path: Path, url_db: Path, session_id: str) -> tuple[int, int]:
    """Copy every message's content into a raw (session_id, seq, json) table; returns (total, view start seq)."""
    src = sqlite3.connect(url_db)
    view_len = src.execute(
        "SELECT explicit_count + last_seq - base_seq FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()[0]
    total = src.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    dst = sqlite3.connect(db_path)
    dst.execute("PRAGMA journal_mode=WAL")
    dst.execute("CREATE TABLE raw (session_id TEXT, seq INTEGER, json TEXT, PRIMARY KEY (session_id, seq))")
    dst.executemany(
        "INSERT INTO raw VALUES (?, ?, ?)",
        src.execute("SELECT session_id, seq, content_json FROM messages WHERE session_id = ?", (session_id,)),
    )
    dst.commit()
    return total, total - view_len


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sizes = [500, 2000] if args.quick else [500, 2000, 10000]
    total, bounds, keep = (10_000, 4, 1_000) if args.quick else (100_000, 20, 5_000)
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        rewrite = {n: statistics.median(rewrite_time(tmp, n, r) for r in range(RUNS)) for n in sizes}
        for n, t in rewrite.items():
            print(f"rewrite {n:>6} entries: {t * 1000:.1f} ms", flush=True)
        db = tmp / "big.db"
        sid = build_big_session(f"sqlite:///{db}", total, bounds, keep)
        n_total, view_start = raw_baseline(tmp / "raw.db", db, sid)
        ours, entries, scan, full = [], [], [], []
        for _ in range(RESUME_RUNS):
            ours.append(child_seconds(RESUME_CHILD, f"sqlite:///{db}", sid, "active_view"))
            entries.append(child_seconds(RESUME_CHILD, f"sqlite:///{db}", sid, "active_entries"))
            scan.append(child_seconds(RAW_CHILD, str(tmp / "raw.db"), sid, str(view_start)))
            full.append(child_seconds(RAW_CHILD, str(tmp / "raw.db"), sid, "0"))
    med = {
        name: statistics.median(t for t, _ in runs)
        for name, runs in (("sessionstore", ours), ("entries", entries), ("scan", scan), ("full", full))
    }
    view_entries = scan[0][1]
    print(
        f"resume: sessionstore {med['sessionstore'] * 1000:.1f} ms, raw range scan {med['scan'] * 1000:.1f} ms, "
        f"raw full load {med['full'] * 1000:.1f} ms",
        flush=True,
    )
    ok_rw = rewrite[2000] <= 0.050
    ok_scan = med["sessionstore"] <= 2 * med["scan"]
    ok_full = med["full"] >= 20 * med["sessionstore"]
    text = "\n".join(
        [
            "## Rewrite and resume",
            "",
            f"`python bench/rewrite.py{' --quick' if args.quick else ''}` — {info['date']}. {machine_line(info)}",
            "",
            f"Rewrite transaction (commit of a full compaction's plan, summarizer excluded; the view is all "
            f"implicit entries, the worst case: every entry is materialized), median of {RUNS} fresh sessions:",
            "",
            "| view entries | rewrite ms |",
            "|---:|---:|",
            *[f"| {n:,} | {t * 1000:.1f} |" for n, t in rewrite.items()],
            "",
            f"Target: rewrite of a 2,000-entry view ≤ 50 ms — **{'met' if ok_rw else 'missed'}** "
            f"({rewrite[2000] * 1000:.1f} ms).",
            "",
            "Resume in a fresh process (open the store, load the view; imports excluded; interleaved "
            "runs). `active_view()` on a fresh handle reads each view row's role and content JSON in one "
            "join and decodes it straight into the request; the full entries (envelopes, positions) are "
            "loaded only when compaction asks for them, shown for comparison. Session of "
            f"{n_total:,} recorded messages and {bounds} boundaries, view of {view_entries:,} entries, "
            f"median of {RESUME_RUNS}:",
            "",
            "| subject | ms | × raw range scan |",
            "|---|---:|---:|",
            f"| sessionstore `active_view()` | {med['sessionstore'] * 1000:.1f} | "
            f"{med['sessionstore'] / med['scan']:.2f}× |",
            f"| sessionstore `active_entries()` (full entries, what compaction reads) | "
            f"{med['entries'] * 1000:.1f} | {med['entries'] / med['scan']:.2f}× |",
            f"| raw sqlite3 range scan of the same {view_entries:,} rows | {med['scan'] * 1000:.1f} | 1.00× |",
            f"| raw sqlite3 full load of all {n_total:,} rows | {med['full'] * 1000:.1f} | "
            f"{med['full'] / med['scan']:.2f}× |",
            "",
            f"Targets: resume ≤ 2× the raw range scan — **{'met' if ok_scan else 'missed'}** "
            f"({med['sessionstore'] / med['scan']:.2f}×); at least 20× faster than the full load — "
            f"**{'met' if ok_full else 'missed'}** ({med['full'] / med['sessionstore']:.1f}×).",
        ]
    )
    write_section(args.out, "rewrite", text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
