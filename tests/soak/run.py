"""Concurrency soak: 4 writers, 1 compactor and 1 reader on one session for a while.

    python -m tests.soak.run URL [--seconds 30]

Prints a JSON report (appends/s, worst append latency, compactions, views checked,
errors); exits 1 if any error reached a caller or a message went missing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
import uuid
from typing import Any

from sessionstore import RewriteConflict, SessionStore


def writer(url: str, sid: str, tag: str, seconds: float, out: Any) -> None:
    """Append a user message, or an atomic tool round, as fast as it can; record latencies."""
    uuids, latencies, errors = [], [], []
    end = time.monotonic() + seconds
    with SessionStore.open(url) as store:
        s = store.get(sid)
        i = 0
        while time.monotonic() < end:
            i += 1
            tid = f"{tag}-{i}-{uuid.uuid4().hex[:6]}"
            if i % 3:
                batch = [{"role": "user", "content": f"{tag} says {i}", "uuid": str(uuid.uuid4())}]
            else:
                batch = [
                    {
                        "role": "assistant",
                        "uuid": str(uuid.uuid4()),
                        "api_message_id": f"m-{tid}",
                        "content": [{"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": "f"}}],
                    },
                    {
                        "role": "user",
                        "uuid": str(uuid.uuid4()),
                        "content": [{"type": "tool_result", "tool_use_id": tid, "content": "x" * 500}],
                    },
                ]
            t = time.perf_counter()
            try:
                s.append_many(batch)
            except Exception as exc:  # the soak's point: report anything that reaches a caller
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - t)
            uuids.extend(m["uuid"] for m in batch)
    out.put({"role": "writer", "uuids": uuids, "latencies": latencies, "errors": errors})


def compactor(url: str, sid: str, seconds: float, out: Any) -> None:
    """Compact over and over; an abandoned rewrite (another won) is counted, not an error."""
    from sessionstore.compaction.engine import compact
    from sessionstore.compaction.full import NothingToCompact

    done = conflicts = 0
    errors: list[str] = []
    end = time.monotonic() + seconds
    with SessionStore.open(url) as store:
        s = store.get(sid)
        while time.monotonic() < end:
            try:
                compact(s)
                done += 1
            except (RewriteConflict, NothingToCompact):
                conflicts += 1
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.2)
    out.put({"role": "compactor", "compactions": done, "abandoned": conflicts, "errors": errors})


def reader(url: str, sid: str, seconds: float, out: Any) -> None:
    """Read the active view in a loop; each must be a valid Messages-API request."""
    from tests.support.validity import check_messages

    views, errors = 0, []
    end = time.monotonic() + seconds
    with SessionStore.open(url) as store:
        s = store.get(sid)
        while time.monotonic() < end:
            try:
                problems = check_messages(s.active_view())
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            views += 1
            if problems:
                errors.append(f"invalid view: {problems[:3]}")
    out.put({"role": "reader", "views": views, "errors": errors})


def run(url: str, seconds: float) -> dict[str, Any]:
    """Run the soak and return its report."""
    with SessionStore.open(url) as store:
        s = store.create_session(title="soak")
        s.append({"role": "user", "content": "soak start"})
        sid = s.id
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=writer, args=(url, sid, f"w{i}", seconds, out)) for i in range(4)]
    procs += [
        ctx.Process(target=compactor, args=(url, sid, seconds, out)),
        ctx.Process(target=reader, args=(url, sid, seconds, out)),
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    writers = [r for r in results if r["role"] == "writer"]
    appended = [u for w in writers for u in w["uuids"]]
    latencies = [x for w in writers for x in w["latencies"]]
    with SessionStore.open(url) as store:
        recorded = {m.uuid for m in store.get(sid).transcript()}
    missing = [u for u in appended if u not in recorded]
    comp = next(r for r in results if r["role"] == "compactor")
    read = next(r for r in results if r["role"] == "reader")
    return {
        "seconds": seconds,
        "appends": len(latencies),
        "appends_per_s": round(len(latencies) / seconds, 1),
        "worst_append_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "median_append_ms": round(sorted(latencies)[len(latencies) // 2] * 1000, 2) if latencies else None,
        "compactions": comp["compactions"],
        "abandoned_rewrites": comp["abandoned"],
        "views_checked": read["views"],
        "missing_messages": len(missing),
        "errors": [e for r in results for e in r["errors"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    report = run(args.url, args.seconds)
    print(json.dumps(report, indent=2))
    sys.exit(1 if report["errors"] or report["missing_messages"] else 0)


if __name__ == "__main__":
    main()
