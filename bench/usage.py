"""Usage reports on a large store: `usage --by day` over everything, and `sessions` with its cost column.

A store of 1,000 sessions and 1,000,000 messages (half of them assistant messages with usage,
a third of those a second streamed piece of the response before them, three models of which
one is not in the price table, over 90 days) is written with bulk Core inserts. The first
report counts every message into the usage tables (reported, once); then, interleaved:

- `usage --by day` over all of it (`usage_report`, what the command runs), p50 target <= 100 ms;
- `sessions` (the first page of 50, drawn at 120 columns) with the cost column against the same
  without it, median ratio target <= 1.2.

Run: python bench/usage.py [--quick] [--sessions N --messages N] [--url URL] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402  (after the sys.path line above)
from sqlalchemy import insert  # noqa: E402  (after the sys.path line above)
from sqlalchemy.engine import Engine  # noqa: E402  (after the sys.path line above)

from bench.common import RESULTS, load_note, machine_info, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from sessionstore import SessionStore  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.tables import sessions_table  # noqa: E402  (after the sys.path line above)
from sessionstore.storage.engine.models import MessageRow, SessionRow  # noqa: E402  (after the sys.path line above)
from sessionstore.usage import cost_text, session_usage, usage_report  # noqa: E402  (after the sys.path line above)

MODELS = ("claude-opus-4-6", "claude-sonnet-4-5-20250929", "acme-coder-9")
DAY = 86_400.0
START = 1_785_000_000.0  # 2026-07-25


def generate(store: SessionStore, sessions: int, messages: int, seed: int = 7) -> float:
    """Write the sessions and their messages with bulk Core inserts; returns the seconds it took."""
    rng = random.Random(seed)
    per = messages // sessions
    began = time.perf_counter()
    engine = store.db.engine
    with engine.begin() as conn:
        conn.execute(
            insert(SessionRow.__table__),
            [
                {
                    "id": f"s{i:05d}",
                    "title": f"bench session {i}",
                    "cwd": f"/work/project-{i % 25}",
                    "model": MODELS[i % len(MODELS)],
                    "context_window": 200_000,
                    "created_at": START + i * 7_000,
                    "updated_at": START + i * 7_000,
                    "last_seq": per,
                    "base_seq": per,
                    "metadata_json": "{}",
                }
                for i in range(sessions)
            ],
        )
    batch: list[dict[str, object]] = []
    for i in range(sessions):
        model = MODELS[i % len(MODELS)]
        t = START + i * 7_000
        api = ""
        for seq in range(1, per + 1):
            t += rng.uniform(1, 15)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".000Z"
            row: dict[str, object] = {
                "session_id": f"s{i:05d}",
                "seq": seq,
                "uuid": f"u{i}-{seq}",
                "parent_uuid": f"u{i}-{seq - 1}" if seq > 1 else None,
                "timestamp": stamp,
                "tokens": 12,
                "is_meta": False,
                "is_compact_summary": False,
                "api_message_id": None,
                "usage_json": None,
                "metadata_json": None,
            }
            if seq % 2:
                row.update(role="user", type="user", content_json='"run the tests please"')
            else:
                if seq % 6 != 4 or not api:
                    api = f"msg_{i}_{seq}"
                usage = {
                    "input_tokens": rng.randint(1, 50),
                    "output_tokens": rng.randint(5, 2_000),
                    "cache_creation_input_tokens": rng.randint(0, 20_000),
                    "cache_read_input_tokens": rng.randint(10_000, 260_000),
                }
                row.update(
                    role="assistant",
                    type="assistant",
                    api_message_id=api,
                    usage_json=json.dumps(usage),
                    metadata_json=json.dumps({"model": model}),
                    content_json='[{"type":"text","text":"All green."}]',
                )
            batch.append(row)
            if len(batch) >= 20_000:
                _flush(engine, batch)
    _flush(engine, batch)
    return time.perf_counter() - began


def _flush(engine: Engine, batch: list[dict[str, object]]) -> None:
    if not batch:
        return
    with engine.begin() as conn:
        conn.execute(insert(MessageRow.__table__), batch)
    batch.clear()


def sessions_page(store: SessionStore, with_cost: bool) -> tuple[float, float, float]:
    """Seconds for what `sessions` does at 120 columns: (reading one page and its costs, that plus drawing it,
    the CPU time of it all)."""
    began, cpu = time.perf_counter(), time.process_time()
    rows = store.list(limit=50)
    costs = None
    if with_cost:
        costs = {sid: cost_text(u) for sid, u in session_usage(store, [r["id"] for r in rows]).items()}
    read = time.perf_counter() - began
    Console(file=io.StringIO(), width=120).print(sessions_table(rows, 120, None, costs))
    return read, time.perf_counter() - began, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 sessions, 20,000 messages (smoke test)")
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--url", help="database URL (default: a SQLite file in a temporary folder)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.messages, args.runs = 100, 20_000, 7
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'usage.db'}"
        with SessionStore.open(url) as store:
            generated = generate(store, args.sessions, args.messages)
            began = time.perf_counter()
            first = usage_report(store, by="day")
            counted = time.perf_counter() - began
            report_ms, report_cpu, plain_ms, cost_ms, plain_read, cost_read = [], [], [], [], [], []
            plain_cpu, cost_cpu = [], []
            for run in range(args.runs):
                began, cpu = time.perf_counter(), time.process_time()
                report = usage_report(store, by="day")
                report_ms.append((time.perf_counter() - began) * 1000)
                report_cpu.append((time.process_time() - cpu) * 1000)
                # Which of the pair goes first alternates, so neither always gets the warmer caches.
                for with_cost in (False, True) if run % 2 == 0 else (True, False):
                    read, drawn, cpu = sessions_page(store, with_cost)
                    (cost_read if with_cost else plain_read).append(read * 1000)
                    (cost_ms if with_cost else plain_ms).append(drawn * 1000)
                    (cost_cpu if with_cost else plain_cpu).append(cpu * 1000)
            load_after = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
            assert report.total.responses == first.total.responses
            engine = store.db.dialect
    p50 = statistics.median(report_ms)
    ratio = statistics.median(c / p for c, p in zip(cost_ms, plain_ms, strict=True))
    read_ratio = statistics.median(c / p for c, p in zip(cost_read, plain_read, strict=True))
    cpu_ratio = statistics.median(c / p for c, p in zip(cost_cpu, plain_cpu, strict=True))
    text = "\n".join(
        [
            "## Usage reports",
            "",
            f"`python bench/usage.py{' --quick' if args.quick else ''}` — {info['date']}, {engine}. "
            f"{machine_line(info)} {load_note()}",
            "",
            f"Store: {args.sessions:,} sessions, {args.messages:,} messages ({first.total.responses:,} API responses "
            f"with usage over {len(first.rows)} days), written with bulk Core inserts in {generated:.1f} s. "
            f"The first report counted every message into the usage tables in {counted:.1f} s (once; later "
            "reports count only what was appended since).",
            "",
            "| what | p50 (ms) | p95 (ms) | target |",
            "|---|---:|---:|---|",
            f"| `usage --by day` over everything | {p50:.1f} (CPU {statistics.median(report_cpu):.1f}) | "
            f"{_p95(report_ms):.1f} | p50 <= 100 ms: {'met' if p50 <= 100 else 'missed'} |",
            f"| `sessions` (50 rows, 120 columns) without cost | {statistics.median(plain_ms):.1f} "
            f"(CPU {statistics.median(plain_cpu):.1f}) | {_p95(plain_ms):.1f} | |",
            f"| `sessions` with the cost column | {statistics.median(cost_ms):.1f} (CPU {statistics.median(cost_cpu):.1f}) "
            f"| {_p95(cost_ms):.1f} | median ratio {ratio:.2f}x (CPU {cpu_ratio:.2f}x) <= 1.2x: "
            f"{'met' if ratio <= 1.2 else 'missed'} ({'met' if cpu_ratio <= 1.2 else 'missed'}) |",
            "",
            f"{args.runs} interleaved runs each (the pair's order alternating); /proc/loadavg after them: "
            f"{' '.join(load_after) or 'unavailable'}. Reading alone (the page and its costs, before the table is drawn): "
            f"{statistics.median(plain_read):.1f} ms without cost, {statistics.median(cost_read):.1f} ms with it "
            f"({read_ratio:.2f}x); the rest of the gap is drawing one more column.",
        ]
    )
    write_section(args.out, "usage", text)
    print(text)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


if __name__ == "__main__":
    main()
