"""Cost of `Pipeline.prepare()` before a model call, against `session.active_view()` alone.

For views of 500, 2,000 and 10,000 entries (realistic tool-heavy agent turns,
SQLite, one process):

* active_view(): the baseline, what any caller pays to get the messages;
* prepare(), nothing acts: repeated calls on an unchanged session (the
  pipeline's per-session state is warm);
* prepare() after an append: one message appended (untimed) before each
  timed call, alternating user and assistant text: the real per-turn cost;
* prepare(), first call: a new Pipeline (as after a restart) on a session
  where nothing needs doing; the layers resume from the state the last
  pipeline saved in the store (`pipeline_states`) instead of rescanning the
  view. Target: at most 1.5x active_view();
* prepare(), microcompact acts: the pipeline has seen 11 registered results
  and the 12th arrives, so the call clears 9 and commits one rewrite (the
  reload of the new view included), each run on a fresh copy of the session;
* backlog: the first call of a new pipeline on a session whose old results
  were never cleared, so one rewrite clears hundreds.

Run: python bench/prepare.py [--quick] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, machine_info, load_note, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from sessionstore.compaction.pipeline import Pipeline  # noqa: E402  (after the sys.path line above)
from sessionstore import SessionStore  # noqa: E402  (after the sys.path line above)
from tests.support.messages import conversation  # noqa: E402  (after the sys.path line above)

SIZES = (500, 2_000, 10_000)
STEADY_RUNS = 31
ACT_RUNS = 5
TARGET_MS = 5.0
TARGET_SIZE = 2_000
FIRST_CALL_RATIO = 1.5


def clean_messages(size: int, seed: int) -> list[dict[str, Any]]:
    """The longest prefix of at most `size` conversation messages that ends after a final answer."""
    messages = list(conversation(size, seed=seed))
    cut = len(messages)
    while cut > 1 and not _ends_clean(messages[cut - 1]):
        cut -= 1
    return messages[:cut]


def _ends_clean(last: dict[str, Any]) -> bool:
    """A final assistant answer (text), after which any message may follow."""
    return last["role"] == "assistant" and last["content"][0]["type"] == "text"


def timed(fn: Callable[[], Any]) -> float:
    """Wall time of one call in seconds, after an untimed garbage collection."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def medians_ms(
    runs: int, fns: dict[str, Callable[[], Any]], setup: Callable[[], Any] | None = None
) -> dict[str, float]:
    """Median wall time of each function in ms, calls interleaved so load spikes hit all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            if setup is not None:
                setup()
            times[name].append(timed(fn))
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def build(path: Path, size: int) -> str:
    """A store file with one session of about `size` entries; returns the session id."""
    with SessionStore.open(f"sqlite:///{path}") as store:
        # A window large enough that auto-compact never acts: the point is the cost of a no-op prepare.
        s = store.create_session(title=f"bench {size}", context_window=10_000_000)
        s.append_many(clean_messages(size, seed=size))
        return s.id


def measure_steady(path: Path, session_id: str) -> dict[str, float]:
    """Baseline, steady no-op, after-append and first-call figures on one session."""
    with SessionStore.open(f"sqlite:///{path}") as store:
        s = store.get(session_id)
        Pipeline(store).prepare(s)
        pipe = Pipeline(store)
        pipe.prepare(s)
        entries = len(s.active_entries())
        out = {"entries": float(entries)}
        out.update(medians_ms(STEADY_RUNS, {"active_view": s.active_view, "steady": lambda: _checked(pipe.prepare(s))}))
        cold = medians_ms(
            STEADY_RUNS, {"active_view_cold_pair": s.active_view, "cold": lambda: _checked(Pipeline(store).prepare(s))}
        )
        out["cold"] = cold["cold"]
        out["cold_ratio"] = cold["cold"] / cold["active_view_cold_pair"]
        turn = iter(range(10**9))

        def append_one() -> None:
            n = next(turn)
            if n % 2 == 0:
                s.append({"role": "user", "content": f"Follow-up question {n}: what about the tests?"})
            else:
                s.append({"role": "assistant", "content": [{"type": "text", "text": f"Answer {n}: they pass."}]})

        out.update(medians_ms(STEADY_RUNS, {"after_append": lambda: _checked(pipe.prepare(s))}, setup=append_one))
        return out


def _checked(prepared: Any) -> None:
    if prepared.acted:
        raise RuntimeError("a layer acted during a no-op measurement")


def read_round(s: Any, i: int) -> None:
    """One Read call and its result."""
    tid = f"toolu_more_{i}"
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": f"src/m{i}.py"}}],
        }
    )
    s.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"def f{i}():\n    return {i}\n" * 40}],
        }
    )


def with_new_results(base: Path, path: Path, session_id: str) -> None:
    """A copy of `base` prepared once (backlog cleared, 3 kept), then 8 new Read results: 11 registered."""
    shutil.copyfile(base, path)
    with SessionStore.open(f"sqlite:///{path}") as store:
        s = store.get(session_id)
        Pipeline(store).prepare(s)
        s.append({"role": "user", "content": "Read the remaining modules."})
        for i in range(8):
            read_round(s, i)


def measure_acting(path: Path, session_id: str, tmp: Path, *, warm: bool) -> float:
    """Median time of a prepare() in which microcompact clears results, each run on a fresh copy.

    Warm: the pipeline has seen the session (11 registered), then the 12th result arrives.
    Cold: the first call of a new pipeline on the session as it is.
    """
    times = []
    for run in range(ACT_RUNS):
        copy = tmp / f"act-{run}-{path.name}"
        shutil.copyfile(path, copy)
        with SessionStore.open(f"sqlite:///{copy}") as store:
            s = store.get(session_id)
            pipe = Pipeline(store)
            if warm:
                _checked(pipe.prepare(s))
                read_round(s, 8)
            outcome: list[Any] = []
            times.append(timed(lambda: outcome.append(pipe.prepare(s))))
            if not outcome[0].report["microcompact"].acted:
                raise RuntimeError("microcompact did not act")
        copy.unlink()
    return statistics.median(times) * 1000


def section(rows: list[dict[str, float]], cmd: str) -> str:
    info = machine_info()
    lines = [
        "## prepare(): the pipeline before each model call",
        "",
        f"`{cmd}` — {info['date']}.",
        "",
        machine_line(info),
        "",
        "Median wall time in ms, SQLite, one process, a garbage collection before each timed call, baseline "
        "and prepare() calls interleaved. *active_view()* is the baseline (read the session row, "
        "bring the cached view up to date, build the API messages). *nothing acts*: repeated prepare() on an "
        "unchanged session. *after an append*: one message appended (untimed) before each prepare(). "
        "*first call*: a new Pipeline, as after a restart (nothing acts): the layers resume from the state the "
        "previous pipeline saved in the store instead of scanning the whole view; it also reads that state and "
        "the replacement decisions of the entries it has not looked at. "
        "*microcompact acts*: the pipeline has seen 11 registered results, the 12th arrives, prepare() clears 9 "
        "and commits one rewrite (reload of the new view included; each run on a fresh copy of the session). "
        "*backlog*: the first call of a new pipeline on a session whose old results were never cleared "
        "(hundreds cleared in one rewrite). "
        f"Targets: nothing acts ≤ {TARGET_MS:g} ms at {TARGET_SIZE:,} entries; first call ≤ {FIRST_CALL_RATIO:g}× "
        "active_view() at 2,000 and 10,000 entries. " + load_note() + " Baseline and prepare() calls are "
        "interleaved so load hits both alike.",
        "",
        "| view entries | active_view() | prepare(), nothing acts | × active_view | prepare() after an append | "
        "prepare(), first call | first call × active_view | prepare(), microcompact acts | backlog |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    verdicts = [
        f"{int(r['entries']):,} entries: {r['cold_ratio']:.2f}× "
        f"({'met' if r['cold_ratio'] <= FIRST_CALL_RATIO else 'missed'})"
        for r in rows
        if r["entries"] >= 1_000
    ]
    for r in rows:
        lines.append(
            f"| {int(r['entries']):,} | {r['active_view']:.2f} | {r['steady']:.2f} | "
            f"{r['steady'] / r['active_view']:.2f} | {r['after_append']:.2f} | {r['cold']:.2f} | "
            f"{r['cold_ratio']:.2f} | "
            f"{r['acting']:.1f} | {r['backlog']:.0f} |"
        )
    lines += [
        "",
        "First call against active_view() (the ratio of medians measured side by side): " + "; ".join(verdicts) + ".",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown file to update")
    parser.add_argument("--quick", action="store_true", help="500 and 2,000 entries only")
    args = parser.parse_args(argv)
    sizes = SIZES[:2] if args.quick else SIZES
    rows = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for size in sizes:
            print(f"{size:,} entries", file=sys.stderr, flush=True)
            path = tmp / f"prepare-{size}.db"
            session_id = build(path, size)
            backlog = measure_acting(path, session_id, tmp, warm=False)
            fresh = tmp / f"fresh-{size}.db"
            with_new_results(path, fresh, session_id)
            acting = measure_acting(fresh, session_id, tmp, warm=True)
            row = measure_steady(path, session_id)
            row["acting"] = acting
            row["backlog"] = backlog
            rows.append(row)
            print(f"  {row}", file=sys.stderr, flush=True)
    cmd = "python bench/prepare.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_section(args.out, "prepare", section(rows, cmd.strip()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
