"""Row-level security's cost on PostgreSQL: append and resume with RLS forced, against the same store without it.

    python bench/rls.py [--pg-url URL] [--messages 2000] [--rounds 5] [--out bench/RESULTS.md]
    python bench/rls.py --quick                    # 500 messages, 3 rounds (smoke run)

One store in its own schema owned by its own ordinary role (a superuser would bypass row-level
security), connected as that owner. Rounds alternate between RLS forced (as revision 0009 leaves
it: policies by owner and share bind the owner too) and not forced (the owner is not held to the
policies: same schema, rows, statistics and code), toggling FORCE between them; each side:

- append: `Session.append` of the same realistic messages (bench/append_resume.py), one per
  transaction, messages/s;
- resume: a new `SessionStore.open`, `get` and `active_view()` of a session holding the messages
  appended so far, median of 5, ms.

The figure is the median of the rounds' paired slowdowns (RLS against none); target: within 10%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.append_resume import make_messages  # noqa: E402
from bench.common import load_note, machine_info, machine_line, write_section  # noqa: E402
from bench.pgroles import role_store  # noqa: E402

TARGET = 0.10
RESUMES = 5


def _append_rate(url: str, msgs: list[Any]) -> tuple[float, str]:
    """Messages/s of appending `msgs` to a new session; returns it with the session id."""
    from sessionstore import SessionStore

    with SessionStore.open(url) as store:
        session = store.create_session(title="rls bench")
        start = time.perf_counter()
        for msg in msgs:
            session.append(msg)
        return len(msgs) / (time.perf_counter() - start), session.id


def _resume_ms(url: str, session_id: str) -> float:
    """Median ms of opening the store and loading the session's active view."""
    from sessionstore import SessionStore

    times = []
    for _ in range(RESUMES):
        start = time.perf_counter()
        with SessionStore.open(url) as store:
            view = store.get(session_id).active_view()
        times.append((time.perf_counter() - start) * 1000)
        assert view
    return statistics.median(times)


def _force(url: str, on: bool) -> None:
    """Force row-level security on the store's tables (as revision 0009 leaves them), or lift it."""
    import psycopg

    from bench.pgroles import libpq

    with psycopg.connect(libpq(url), autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
                "AND relkind = 'r' AND relrowsecurity"
            )
        ]
        for table in tables:
            if table not in UNFORCED:
                conn.execute(f'ALTER TABLE "{table}" {"" if on else "NO "}FORCE ROW LEVEL SECURITY')


#: Tables revision 0009 leaves unforced (sessionstore_search_window() reads them as their owner).
UNFORCED = ("search_docs", "session_shares")


def measure(pg_url: str, n: int, rounds: int) -> dict[str, Any]:
    """One store, its owner connected: each round appends and resumes with RLS forced and without, in
    alternating order, toggling FORCE between them, so both sides share the rows, their statistics and
    the server's caches (two stores differed in those too, by more than the policies cost)."""
    msgs = make_messages(n)
    out: dict[str, Any] = {"append": {"rls": [], "none": []}, "resume": {"rls": [], "none": []}}
    with role_store(pg_url, forced=True) as url:
        for r in range(rounds):
            order = ("rls", "none") if r % 2 == 0 else ("none", "rls")
            for label in order:
                _force(url, label == "rls")
                rate, sid = _append_rate(url, msgs)
                out["append"][label].append(rate)
                out["resume"][label].append(_resume_ms(url, sid))
                print(
                    f"round {r + 1} {label}: {rate:,.0f} appends/s, resume {out['resume'][label][-1]:.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        _force(url, True)
    out["append_slowdown"] = statistics.median(
        1 - w / o for o, w in zip(out["append"]["none"], out["append"]["rls"], strict=True)
    )
    out["resume_slowdown"] = statistics.median(
        w / o - 1 for o, w in zip(out["resume"]["none"], out["resume"]["rls"], strict=True)
    )
    return out


def section(res: dict[str, Any], n: int, rounds: int, cmd: str) -> str:
    info = machine_info()
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    a, r = res["append"], res["resume"]
    return "\n".join(
        [
            "## Row-level security on PostgreSQL (bench/rls.py)",
            "",
            f"Run {info['date']} with `{cmd}`. {machine_line(info)} " + load_note(),
            "",
            f"{n:,} messages appended one per transaction, then the session resumed ({RESUMES} times, median), "
            f"{rounds} rounds alternating, on one store as its owner (an ordinary role), between row-level security "
            "forced (revision 0009) and not forced (FORCE toggled between them: same rows, statistics and caches):",
            "",
            "| | RLS forced | without | median paired slowdown | target |",
            "|---|---:|---:|---:|---|",
            f"| append | {statistics.median(a['rls']):,.0f}/s | {statistics.median(a['none']):,.0f}/s | "
            f"{res['append_slowdown']:+.1%} | <= 10%: {verdict(res['append_slowdown'] <= TARGET)} |",
            f"| resume (open + active view) | {statistics.median(r['rls']):.1f} ms | "
            f"{statistics.median(r['none']):.1f} ms | {res['resume_slowdown']:+.1%} | "
            f"<= 10%: {verdict(res['resume_slowdown'] <= TARGET)} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("SESSIONSTORE_TEST_PG_URL"),
        help="a PostgreSQL superuser URL (to create the roles); default SESSIONSTORE_TEST_PG_URL",
    )
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="500 messages, 3 rounds")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md")
    args = parser.parse_args(argv)
    if not args.pg_url:
        sys.stderr.write("bench/rls.py needs a PostgreSQL superuser URL: --pg-url or SESSIONSTORE_TEST_PG_URL\n")
        return 2
    n, rounds = (500, 3) if args.quick else (args.messages, args.rounds)
    res = measure(args.pg_url, n, rounds)
    cmd = "python bench/rls.py" + (" --quick" if args.quick else f" --messages {n} --rounds {rounds}")
    text = section(res, n, rounds, cmd)
    write_section(args.out, "rls", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
