"""API compaction benchmark: what recording the server's compaction costs the store.

Timings are the fastest of interleaved runs: the machines are shared, and a median of a handful of runs
moved by 50% from one run to the next under load.

1. Commit: the transaction that turns an on-demand compaction reply into a boundary
   (`commit_api_compaction`), against our own full compaction's commit of the same view
   (`commit_compaction`, nothing kept), for views of 500 and 2,000 entries; the API call and
   the summarizer are excluded. Target: the API boundary costs at most 1.2x ours.
2. Resume: a fresh process loading the view of a session after 100 API boundaries, against
   one after 10 (same view size at the end). Target: within 1.5x.

Run: python bench/api_compaction.py [--quick] [--out bench/RESULTS.md]; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, load_note, machine_info, machine_line, write_section  # noqa: E402
from bench.rewrite import RESUME_CHILD, child_seconds  # noqa: E402
from sessionstore import SessionStore  # noqa: E402
from sessionstore.compaction.commit import commit_compaction  # noqa: E402
from sessionstore.storage.write.apicompaction import commit_api_compaction  # noqa: E402
from tests.support.messages import conversation  # noqa: E402

RUNS = 11
RESUME_RUNS = 15
SUMMARY = "summary of the earlier work " * 50


def reply(n: int) -> dict[str, Any]:
    """An on-demand compaction reply as the API returns it."""
    return {
        "id": f"msg_bench_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-7",
        "stop_reason": "compaction",
        "content": [
            {"type": "compaction", "content": SUMMARY, "encrypted_content": "ZW5j" * 40, "signature": "c2ln" * 20}
        ],
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def commit_time(tmp: Path, size: int, run: int, api: bool) -> float:
    """Seconds for one boundary commit over a `size`-entry view (ours or the API's)."""
    url = f"sqlite:///{tmp / f'c-{size}-{run}-{int(api)}.db'}"
    with SessionStore.open(url) as store:
        s = store.create_session()
        s.append_many(conversation(size, seed=run))
        snap = s.snapshot()
        gc.collect()
        start = time.perf_counter()
        if api:
            commit_api_compaction(s, reply(run), sent=snap)
        else:
            commit_compaction(
                s,
                snap,
                summarized=snap.entries,
                kept=[],
                summary_text=SUMMARY,
                truncated=False,
                kind="full",
                trigger="manual",
                layout="suffix",
                summarizer="bench",
            )
        return time.perf_counter() - start


def _is_prompt(message: dict[str, Any]) -> bool:
    """A user message that answers no tool call: a place where a round may end."""
    content = message["content"]
    return message["role"] == "user" and (
        isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content)
    )


def build(url: str, boundaries: int, per_round: int, tail: int) -> str:
    """A session of `boundaries` API compactions, each after about `per_round` messages (cut before a prompt),
    then about `tail` messages."""
    source = list(conversation(boundaries * per_round * 2 + tail * 2, seed=3))
    with SessionStore.open(url) as store:
        s = store.create_session(title="api resume bench")
        at = 0
        for k in range(boundaries + 1):
            size = tail if k == boundaries else per_round
            end = at + size
            while end < len(source) and not _is_prompt(source[end]):
                end += 1
            s.append_many(source[at:end])
            at = end
            if k < boundaries:
                s.append(reply(k))
        return s.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    runs = 3 if args.quick else RUNS
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        commits: dict[int, tuple[float, float]] = {}
        medians: dict[int, tuple[float, float]] = {}
        for size in (500, 2000):
            # Interleaved, so a burst of load on the shared machine hits both subjects alike.
            pairs = [(commit_time(tmp, size, r, False), commit_time(tmp, size, r, True)) for r in range(runs)]
            ours, api = min(o for o, _ in pairs), min(a for _, a in pairs)
            commits[size] = (ours, api)
            medians[size] = (statistics.median(o for o, _ in pairs), statistics.median(a for _, a in pairs))
            print(f"commit {size:>5} entries: ours {ours * 1000:.1f} ms, API boundary {api * 1000:.1f} ms", flush=True)
        sids = {n: build(f"sqlite:///{tmp / f'r{n}.db'}", n, 40, 500) for n in (10, 100)}
        resume: dict[int, list[float]] = {10: [], 100: []}
        for _ in range(3 if args.quick else RESUME_RUNS):
            for n, sid in sids.items():
                resume[n].append(child_seconds(RESUME_CHILD, f"sqlite:///{tmp / f'r{n}.db'}", sid, "active_view")[0])
    med = {n: min(v) for n, v in resume.items()}
    print(f"resume after 10 API boundaries {med[10] * 1000:.1f} ms, after 100 {med[100] * 1000:.1f} ms", flush=True)
    ok_commit = all(api <= 1.2 * ours for ours, api in commits.values())
    ok_resume = med[100] <= 1.5 * med[10]
    text = "\n".join(
        [
            "## API compaction",
            "",
            f"`python bench/api_compaction.py{' --quick' if args.quick else ''}` — {info['date']}. "
            f"{machine_line(info)} {load_note()}",
            "",
            f"Boundary commit (the API call and the summarizer excluded), {runs} fresh sessions each, the two "
            "subjects interleaved; the fastest run of each (the least disturbed on a shared machine) is judged, "
            "the medians are shown beside it:",
            "",
            "| view entries | ours ms (fastest) | API ms (fastest) | ratio | ours ms (median) | API ms (median) |",
            "|---:|---:|---:|---:|---:|---:|",
            *[
                f"| {n:,} | {o * 1000:.1f} | {a * 1000:.1f} | {a / o:.2f} | {medians[n][0] * 1000:.1f} | "
                f"{medians[n][1] * 1000:.1f} |"
                for n, (o, a) in commits.items()
            ],
            "",
            f"Target: API boundary ≤ 1.2× ours — **{'met' if ok_commit else 'missed'}**.",
            "",
            "Resume in a fresh process (`active_view()`), 40 messages between boundaries and 500 after the last, "
            "fastest of the runs:",
            "",
            "| API boundaries | ms |",
            "|---:|---:|",
            *[f"| {n} | {t * 1000:.1f} |" for n, t in med.items()],
            "",
            f"Target: after 100 within 1.5× of after 10 — **{'met' if ok_resume else 'missed'}** "
            f"({med[100] / med[10]:.2f}×).",
        ]
    )
    write_section(args.out, "api-compaction", text)
    sys.exit(0 if ok_commit and ok_resume else 1)


if __name__ == "__main__":
    main()
