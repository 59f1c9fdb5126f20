"""Fork at the cost of the forked view: a 100,000-message session against a 1,000-message one.

Both sessions live in one SQLite store and are built the same way: cycles of ~250 appended
messages (whole tool-using turns), each followed by a compaction that keeps the newest ~100
entries behind a boundary and a summary, so the view before boundary K >= 2 holds the same
~350 entries whatever the session's length. The small session has 3 cycles (~1,000
messages), the large one 300 (~100,000); each is forked before a middle boundary
(`Session.fork(before_boundary=K)`, one transaction: read the past view, copy its messages,
write the lineage), interleaved, median of the runs. Bytes added are the fork's stored
message content plus its view rows, and the database file's growth per fork.

Target: the fork of the large session within 1.5x of the small one's, and the bytes a fork
adds in proportion to its view (the same in both), not to the parent's transcript.

Run: python bench/fork.py [--messages 100000] [--quick] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, load_note, machine_info, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from bench.cycles import CycleShape  # noqa: E402  (after the sys.path line above)
from bench.cycles import build as cycles_build  # noqa: E402  (after the sys.path line above)
from sessionstore import SessionStore  # noqa: E402  (after the sys.path line above)
from sessionstore.storage import history as hist  # noqa: E402  (after the sys.path line above)
from sessionstore.storage.write.session import Session  # noqa: E402  (after the sys.path line above)

CYCLE = 250
KEEP = 100
SMALL_CYCLES = 3
RUNS = 11
TARGET_RATIO = 1.5
SHAPE = CycleShape(messages=CYCLE, seeds=40, keep=KEEP)


def build(store: SessionStore, cycles: int, log: Callable[[str], None]) -> Session:
    """A session of `cycles` cycles (append ~CYCLE messages, compact keeping ~KEEP), then one more cycle appended."""
    return cycles_build(store, SHAPE, cycles, f"{cycles} cycles", log, log_every=50)


def db_bytes(store: SessionStore) -> int:
    """The SQLite file's used size (pages in use times page size)."""
    pages = store.db.one("PRAGMA page_count")[0] - store.db.one("PRAGMA freelist_count")[0]
    return int(pages) * int(store.db.one("PRAGMA page_size")[0])


def fork_bytes(store: SessionStore, fork_id: str) -> int:
    """What a fork stores: its messages' content and envelopes plus its view rows' replacement content."""
    row = store.db.one(
        "SELECT COALESCE(SUM(LENGTH(content_json) + LENGTH(uuid) + COALESCE(LENGTH(metadata_json), 0) "
        "+ COALESCE(LENGTH(usage_json), 0)), 0) FROM messages WHERE session_id = :id",
        {"id": fork_id},
    )
    view = store.db.one(
        "SELECT COALESCE(SUM(COALESCE(LENGTH(content_json), 0) + 24), 0) FROM view_entries WHERE session_id = :id",
        {"id": fork_id},
    )
    return int(row[0]) + int(view[0])


def transcript_bytes(store: SessionStore, session_id: str) -> int:
    return int(
        store.db.one(
            "SELECT COALESCE(SUM(LENGTH(content_json)), 0) FROM messages WHERE session_id = :id", {"id": session_id}
        )[0]
    )


def measure(store: SessionStore, sessions: dict[str, tuple[Session, int]], runs: int) -> dict[str, dict[str, Any]]:
    """Per session: median fork time (ms), view size, bytes the fork stores, file growth per fork."""
    times: dict[str, list[float]] = {label: [] for label in sessions}
    grown: dict[str, list[int]] = {label: [] for label in sessions}
    made: dict[str, str] = {}
    for _ in range(runs):
        for label, (session, k) in sessions.items():
            gc.collect()
            size = db_bytes(store)
            started = time.perf_counter()
            fork = session.fork(before_boundary=k)
            times[label].append((time.perf_counter() - started) * 1000)
            grown[label].append(db_bytes(store) - size)
            made[label] = fork.id
    out: dict[str, dict[str, Any]] = {}
    for label, (session, k) in sessions.items():
        out[label] = {
            "ms": statistics.median(times[label]),
            "entries": len(hist.view_before(session, k)),
            "messages": session.last_seq,
            "boundary": k,
            "fork_bytes": fork_bytes(store, made[label]),
            "file_growth": statistics.median(grown[label]),
            "transcript_bytes": transcript_bytes(store, session.id),
        }
    return out


def section(results: dict[str, dict[str, Any]], info: dict[str, str], runs: int) -> str:
    small, big = results["small"], results["large"]
    ratio = big["ms"] / small["ms"]
    per_entry = [r["ms"] / max(1, r["entries"]) * 1000 for r in (small, big)]
    lines = [
        "## Fork before a boundary (bench/fork.py)",
        "",
        machine_line(info),
        load_note(),
        "",
        f"`Session.fork(before_boundary=K)`, SQLite, median of {runs} interleaved runs; each fork is one transaction "
        "(read the view before K from the temporal rows, copy its messages, write the lineage).",
        "",
        "| session | messages | boundary K | view entries | fork ms | µs per entry | bytes the fork stores | "
        "file growth per fork | parent transcript bytes |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (label, r), per in zip((("small", small), ("large", big)), per_entry, strict=True):
        lines.append(
            f"| {label} | {r['messages']:,} | {r['boundary']} | {r['entries']:,} | {r['ms']:.1f} | "
            f"{per:.0f} | {r['fork_bytes']:,} | {r['file_growth']:,} | {r['transcript_bytes']:,} |"
        )
    bytes_ratio = big["fork_bytes"] / max(1, small["fork_bytes"])
    history_ratio = big["transcript_bytes"] / max(1, small["transcript_bytes"])
    lines += [
        "",
        f"- time: large / small = {ratio:.2f} (target <= {TARGET_RATIO}): {'met' if ratio <= TARGET_RATIO else 'NOT met'}",
        f"- bytes: the large session's fork stores {bytes_ratio:.2f}x the small one's for "
        f"{big['entries'] / max(1, small['entries']):.2f}x the entries, while its parent's transcript is "
        f"{history_ratio:.0f}x larger: {'met' if bytes_ratio <= 1.5 else 'NOT met'} (bytes follow the view)",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="size of the large session (default 100,000)")
    parser.add_argument("--quick", action="store_true", help="a 10,000-message large session, 5 runs")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    messages = 10_000 if args.quick else args.messages
    runs = 5 if args.quick else args.runs
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore.open(f"sqlite:///{tmp}/fork.db")
        try:
            print(f"building the small session ({SMALL_CYCLES} cycles)", file=sys.stderr)
            small = build(store, SMALL_CYCLES, lambda s: print(s, file=sys.stderr))
            cycles = max(SMALL_CYCLES, round(messages / (small.last_seq / (SMALL_CYCLES + 1))) - 1)
            print(f"building the large session ({cycles} cycles)", file=sys.stderr)
            large = build(store, cycles, lambda s: print(s, file=sys.stderr))
            sessions = {"small": (small, 2), "large": (large, max(2, cycles // 2))}
            results = measure(store, sessions, runs)
        finally:
            store.close()
    text = section(results, info, runs)
    print(text)
    write_section(args.out, "fork", text)
    ratio = results["large"]["ms"] / results["small"]["ms"]
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
