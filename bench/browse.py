"""Browse benchmark: time until the session screen is ready, big session vs small, and opening a boundary.

Subjects: a session of 100,000 recorded messages and 20 boundaries (each an
up_to compaction keeping about 5,000 entries, as in bench/rewrite.py) and a
session of 100 messages. "Ready" means the app was started on the session
(`sessionstore browse SESSION`: store opened and the session screen mounted;
the sessions screen is built only when the user goes back to it) and the
message list has drawn its first rows; Python and Textual imports are
excluded (the same for both). Opening a boundary is
from pushing its screen until the view before it has drawn its first rows.
Runs are interleaved, headless at 120x40.

Run: python bench/browse.py [--quick] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RESULTS, machine_info, load_note, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from bench.rewrite import build_big_session  # noqa: E402  (after the sys.path line above)
from sessionstore import SessionStore  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.browse.app import make_app  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.browse.boundary import BoundaryScreen  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.browse.session import SessionScreen  # noqa: E402  (after the sys.path line above)
from sessionstore.cli.browse.viewlist import ViewList  # noqa: E402  (after the sys.path line above)
from tests.support.messages import conversation  # noqa: E402  (after the sys.path line above)

RUNS = 9
SIZE = (120, 40)


async def until(condition: Any, limit: float = 30.0) -> None:
    """Yield to the app until `condition()` holds."""
    deadline = time.perf_counter() + limit
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("the screen never became ready")
        await asyncio.sleep(0)


def drawn(app: Any, screen_type: type, list_id: str) -> bool:
    """The top screen is of `screen_type` and its list has fetched the rows it drew."""
    screen = app.screen
    if not isinstance(screen, screen_type) or not getattr(screen, "ready", False):
        return False
    listing = screen.query_one(list_id, ViewList)
    return listing.total == 0 or bool(listing._pages)


Timing = tuple[float, float]


async def ready_seconds(url: str, session_id: str) -> Timing:
    """(wall, CPU) seconds from starting the app on the session to its message list drawn."""
    start, cpu = time.perf_counter(), time.process_time()
    app = make_app(url, session_id=session_id)
    try:
        async with app.run_test(size=SIZE):
            await until(lambda: drawn(app, SessionScreen, "#messages"))
            return time.perf_counter() - start, time.process_time() - cpu
    finally:
        app.store.close()


async def boundary_seconds(url: str, session_id: str, indexes: list[int]) -> list[Timing]:
    """(wall, CPU) seconds to open each boundary in `indexes` from the session screen (then back)."""
    app = make_app(url, session_id=session_id)
    out = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: drawn(app, SessionScreen, "#messages"))
            screen = app.screen
            for index in indexes:
                start, cpu = time.perf_counter(), time.process_time()
                app.push_screen(BoundaryScreen(screen.session, index, total=len(screen.found)))
                await until(lambda: drawn(app, BoundaryScreen, "#before-list"))
                out.append((time.perf_counter() - start, time.process_time() - cpu))
                app.pop_screen()
                await pilot.pause()
    finally:
        app.store.close()
    return out


def build_small(url: str, size: int) -> str:
    with SessionStore.open(url) as store:
        s = store.create_session(title="small")
        s.append_many(list(conversation(size, seed=3)))
        return s.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    total, bounds, keep = (10_000, 4, 1_000) if args.quick else (100_000, 20, 5_000)
    small_size = 100
    runs = 3 if args.quick else RUNS
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmpdir:
        url = f"sqlite:///{Path(tmpdir) / 'browse.db'}"
        t = time.perf_counter()
        big = build_big_session(url, total, bounds, keep)
        small = build_small(url, small_size)
        print(f"built the sessions in {time.perf_counter() - t:.0f} s", flush=True)
        asyncio.run(ready_seconds(url, small))  # warm-up: first-use costs of Textual and the driver
        ready: dict[str, list[Timing]] = {"big": [], "small": []}
        for _ in range(runs):
            ready["big"].append(asyncio.run(ready_seconds(url, big)))
            ready["small"].append(asyncio.run(ready_seconds(url, small)))
        picks = [1, bounds // 2, bounds] * (runs // 3 + 1)
        opened = asyncio.run(boundary_seconds(url, big, picks[: max(runs, 3)]))
        with SessionStore.open(url) as store:
            view_entries = store.db.one(
                "SELECT explicit_count + last_seq - base_seq FROM sessions WHERE id = :id", {"id": big}
            )[0]
    wall = {k: statistics.median(w for w, _ in v) for k, v in ready.items()} | {
        "open": statistics.median(w for w, _ in opened)
    }
    cpu = {k: statistics.median(c for _, c in v) for k, v in ready.items()} | {
        "open": statistics.median(c for _, c in opened)
    }
    print(
        f"ready: big {wall['big'] * 1000:.0f} ms (CPU {cpu['big'] * 1000:.0f}), small {wall['small'] * 1000:.0f} "
        f"ms (CPU {cpu['small'] * 1000:.0f}); boundary open {wall['open'] * 1000:.0f} ms "
        f"(CPU {cpu['open'] * 1000:.0f})",
        flush=True,
    )

    def verdict(figures: dict[str, float]) -> str:
        ratio = figures["big"] / figures["small"]
        return (
            f"ready ≤ 300 ms — **{'met' if figures['big'] <= 0.300 else 'missed'}** ({figures['big'] * 1000:.0f} "
            f"ms); ≤ 1.5× the small session — **{'met' if ratio <= 1.5 else 'missed'}** ({ratio:.2f}×); "
            f"boundary ≤ 100 ms — **{'met' if figures['open'] <= 0.100 else 'missed'}** "
            f"({figures['open'] * 1000:.0f} ms)"
        )

    text = "\n".join(
        [
            "## Browse",
            "",
            f"`python bench/browse.py{' --quick' if args.quick else ''}` — {info['date']}. {machine_line(info)} "
            + load_note()
            + " Wall-clock figures wait for the CPU; the CPU time the browser itself used is shown "
            "beside them.",
            "",
            f"Time from starting `sessionstore browse SESSION` (store opened, session screen mounted, headless "
            f"{SIZE[0]}x{SIZE[1]}, imports excluded) until the message list has drawn its first rows, median of "
            f"{runs} interleaved runs; then opening a boundary screen until the view before it has drawn its first "
            f"rows (boundaries 1, {bounds // 2} and {bounds}; median of {len(opened)} opens):",
            "",
            "| subject | wall ms | CPU ms |",
            "|---|---:|---:|",
            f"| session screen ready, {total:,} messages, {bounds} boundaries, view of {view_entries:,} entries | "
            f"{wall['big'] * 1000:.0f} | {cpu['big'] * 1000:.0f} |",
            f"| session screen ready, {small_size} messages, no boundary | {wall['small'] * 1000:.0f} | "
            f"{cpu['small'] * 1000:.0f} |",
            f"| open a boundary of the big session | {wall['open'] * 1000:.0f} | {cpu['open'] * 1000:.0f} |",
            "",
            f"Targets, wall clock: {verdict(wall)}. CPU time: {verdict(cpu)}.",
        ]
    )
    write_section(args.out, "browse", text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
