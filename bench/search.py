"""Search: index build rate and size, query latency p50/p95, against ripgrep over the same JSONL, and append cost.

    python bench/search.py [--size-mb 200] [--scales 1,5] [--out bench/RESULTS.md]
    python bench/search.py --quick              # ~20 MB, one scale (smoke run)
    python bench/search.py --postgres --size-mb 200 --pg-runs 7   # PostgreSQL beside SQLite and rg

For each scale the Claude Code transcript of bench/import_export.py (the
shared transcripts repeated with fresh ids) is built at `size_mb x scale`,
imported into a fresh SQLite store (not timed here: bench/import_export.py
measures it), and then:

- index build: the catch-up a first search runs (`search.catch_up`), in MB
  of JSONL input per second, and the index's size (database growth after a
  checkpoint) against the UTF-8 bytes of text it indexes;
- query latency: 20 queries (words, phrases, paths, a CJK substring, rare and
  very common terms), each run 5 times through `store.search(q, limit=20)`
  after one warm-up; p50/p95 over the per-query medians;
- ripgrep: `rg -F -i -- PATTERN FILE | wc -l` over the same JSONL file (piped,
  since ripgrep stops at the first match when its output is /dev/null), 3
  runs each, median. Needs Debian's `ripgrep` (`make bench` installs it).

PostgreSQL (when `--pg-url` or SESSIONSTORE_TEST_PG_URL names a superuser URL): the same JSONL
is imported into a store owned by an ordinary role (bench/pgroles.py: row-level security applies,
as it does for every person on a shared store), its index built by the same catch-up, and the same
queries timed the same way, beside the ripgrep figures of the same run, with the server's CPU per
search (its backends' /proc times: what the machine's other jobs do not inflate). Targets: p50 <= 30 ms,
p95 <= 150 ms. `--postgres` runs one corpus that way (no scales, no word index, no appends) and writes
the search_postgres section of RESULTS.md only.

Appends: the same append code on a head store with the search tables
dropped and on one whose index holds the session so far, interleaved, so
the search index's cost to appends is measured directly (it is kept off
the append path: a search catches the index up first).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import load_note, machine_info, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from bench.import_export import MB, build_transcript  # noqa: E402  (after the sys.path line above)

FULL_MB = 200
QUICK_MB = 20
QUERY_RUNS = 5
RG_RUNS = 3
APPENDS = 3000
APPEND_ROUNDS = 7
TARGETS = {
    "p50_small_ms": 20.0,
    "p95_small_ms": 100.0,
    "p50_large_ms": 30.0,
    "build_mb_s": 20.0,
    "size_ratio": 4.0,
    "append_slowdown": 0.10,
}

#: (kind, query as typed, the fixed string given to ripgrep)
QUERIES: list[tuple[str, str, str]] = [
    ("common word", "the", "the"),
    ("common word", "error", "error"),
    ("common word", "comment", "comment"),
    ("word", "handle_event", "handle_event"),
    ("word", "localStorage", "localStorage"),
    ("word", "tailwind", "tailwind"),
    ("word", "PubSub", "PubSub"),
    ("two words", "useState localStorage", "useState"),
    ("two words", "mount socket", "mount"),
    ("phrase", '"def handle_event"', "def handle_event"),
    ("phrase", '"Exit code 1"', "Exit code 1"),
    ("phrase", '"mix compile --warnings-as-errors"', "mix compile --warnings-as-errors"),
    ("path", "lib/spotter_web/live/session_live.ex", "lib/spotter_web/live/session_live.ex"),
    ("path", "todo-app/src/app/page.tsx", "todo-app/src/app/page.tsx"),
    ("path", "project_review_live_test.exs", "project_review_live_test.exs"),
    ("identifier", "Ecto.Migration", "Ecto.Migration"),
    ("rare", "git worktree", "git worktree"),
    ("rare", "TypeError", "TypeError"),
    ("CJK substring", "東京都", "東京都"),
    ("absent", "zyxwvutsrq", "zyxwvutsrq"),
]


@dataclass
class ScaleResult:
    """Figures of one corpus size."""

    size_mb: float
    messages: int = 0
    build_s: float = 0.0
    build_cpu_s: float = 0.0
    text_bytes: int = 0
    index_bytes: int = 0
    ours_ms: list[float] = field(default_factory=list)
    ours_cpu_ms: list[float] = field(default_factory=list)
    rg_ms: list[float] = field(default_factory=list)
    rg_cpu_ms: list[float] = field(default_factory=list)
    hits: list[int] = field(default_factory=list)
    rg_lines: list[int] = field(default_factory=list)
    words: "WordIndexResult | None" = None
    #: PostgreSQL (empty when not measured): index build seconds, per-query medians (wall, CPU), hits.
    pg_build_s: float = 0.0
    pg_ms: list[float] = field(default_factory=list)
    pg_cpu_ms: list[float] = field(default_factory=list)
    pg_hits: list[int] = field(default_factory=list)
    #: PostgreSQL server CPU per query (the role's backends, from /proc; mean of the timed runs).
    pg_server_cpu_ms: list[float] = field(default_factory=list)
    pg_messages: int = 0

    @property
    def build_mb_s(self) -> float:
        return self.size_mb / self.build_s if self.build_s else 0.0

    @property
    def build_cpu_mb_s(self) -> float:
        return self.size_mb / self.build_cpu_s if self.build_cpu_s else 0.0

    @property
    def size_ratio(self) -> float:
        return self.index_bytes / self.text_bytes if self.text_bytes else 0.0


@dataclass
class WordIndexResult:
    """A second FTS5 index with a word tokenizer over the same text, and how its ranking compares."""

    build_s: float
    index_bytes: int
    #: (query, whole-word share of the trigram top 20, of the word top 20, overlap of the two top 20s)
    rows: list[tuple[str, float, float, int]]


WORD_QUERY_KINDS = ("common word", "word", "two words", "rare")
TOP = 20


def _whole_word_share(bodies: list[str], terms: list[str]) -> float:
    """The share of hits where every term stands as a whole word (not inside a longer one; `_` separates,
    as it does for the unicode61 tokenizer)."""
    import re

    if not bodies:
        return 0.0
    patterns = [re.compile(r"(?<![A-Za-z0-9])" + re.escape(t) + r"(?![A-Za-z0-9])", re.IGNORECASE) for t in terms]
    return sum(all(p.search(b) for p in patterns) for b in bodies) / len(bodies)


def compare_word_index(store: Any, tmp: Path) -> WordIndexResult:
    """Build a unicode61 FTS5 index of the same bodies in its own file and rank the word queries in both.

    The trigram index ranks with bm25 over trigrams, so a word inside a longer one (`comment` in
    `comments`) scores like the word itself; a word tokenizer would rank whole words first, at the
    cost of a second index. This measures both sides of that trade on the same corpus.
    """
    import sqlite3

    path = tmp / "words.db"
    words = sqlite3.connect(path)
    words.execute("PRAGMA journal_mode=WAL")
    words.execute("CREATE VIRTUAL TABLE w USING fts5(body, tokenize='unicode61', detail=full)")
    rows = store.db.conn.execute("SELECT rowid, body FROM search_fts").fetchall()
    start = time.perf_counter()
    with words:
        words.executemany("INSERT INTO w (rowid, body) VALUES (?, ?)", rows)
    with words:
        words.execute("INSERT INTO w(w) VALUES ('optimize')")
    build_s = time.perf_counter() - start
    words.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    bodies = dict(rows)
    del rows
    out = []
    for kind, query, _ in QUERIES:
        if kind not in WORD_QUERY_KINDS:
            continue
        terms = query.split()
        tri = [
            r[0]
            for r in store.db.conn.execute(
                "SELECT rowid FROM search_fts WHERE search_fts MATCH ? ORDER BY rank LIMIT ?",
                (" ".join(f'"{t}"' for t in terms), TOP),
            )
        ]
        word = [
            r[0]
            for r in words.execute(
                "SELECT rowid FROM w WHERE w MATCH ? ORDER BY rank LIMIT ?", (" ".join(f'"{t}"' for t in terms), TOP)
            )
        ]
        out.append(
            (
                query,
                _whole_word_share([bodies[i] for i in tri], terms),
                _whole_word_share([bodies[i] for i in word], terms),
                len(set(tri) & set(word)),
            )
        )
    words.close()
    path.unlink()
    return WordIndexResult(build_s, size, out)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of the values."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered) + 0.5))
    return ordered[min(rank, len(ordered)) - 1]


def db_bytes(store: Any, path: Path) -> int:
    """Bytes of the database's pages in use (free pages left by merges not counted), after a checkpoint."""
    conn = store.db.conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    return pages * conn.execute("PRAGMA page_size").fetchone()[0]


def _timed_queries(
    store: Any, runs: int = QUERY_RUNS, server_cpu: Callable[[], float] | None = None
) -> tuple[list[float], list[float], list[int], list[float]]:
    """Per query: median wall ms and CPU ms of `runs` searches after a warm-up, the hits, and the
    database server's CPU ms per search (mean over the runs; empty without `server_cpu`)."""
    walls, cpus, hits, server = [], [], [], []
    for _, query, _ in QUERIES:
        hits.append(len(store.search(query, limit=20)))
        times, cpu_times = [], []
        s0 = server_cpu() if server_cpu else 0.0
        for _ in range(runs):
            t0, c0 = time.perf_counter(), time.process_time()
            store.search(query, limit=20)
            times.append((time.perf_counter() - t0) * 1000)
            cpu_times.append((time.process_time() - c0) * 1000)
        if server_cpu:
            server.append((server_cpu() - s0) / runs)
        walls.append(statistics.median(times))
        cpus.append(statistics.median(cpu_times))
    return walls, cpus, hits, server


def backend_cpu(store: Any) -> Callable[[], float]:
    """A reader of the CPU ms used so far by this role's PostgreSQL backends (a server on this machine:
    /proc/PID/stat), so the server's work is measured apart from the time spent waiting for a core."""
    pids = [int(r[0]) for r in store.db.all("SELECT pid FROM pg_stat_activity WHERE usename = current_user")]
    tick = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        total = 0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
        return total * 1000 / tick

    return read


def measure_postgres(
    jsonl: Path, pg_url: str, result: ScaleResult, log: Callable[[str], None], runs: int = QUERY_RUNS
) -> None:
    """The same corpus on PostgreSQL, as an ordinary role (row-level security on): index build and queries."""
    from bench.pgroles import role_store
    from sessionstore import SessionStore
    from sessionstore.interchange.importing import import_file
    from sessionstore.storage.derived.search import catch_up

    with role_store(pg_url) as url, SessionStore.open(url) as store:
        log(f"{result.size_mb:.0f} MB: importing into PostgreSQL")
        import_file(store, str(jsonl), source="claude-code")
        result.pg_messages = int(store.db.one("SELECT COUNT(*) FROM messages")[0])
        log(f"{result.size_mb:.0f} MB: building the PostgreSQL index")
        start = time.perf_counter()
        catch_up(store.db, max_chars=store.config.search_max_chars, batch_chars=store.config.search_batch_chars)
        result.pg_build_s = time.perf_counter() - start
        store.db.execute("ANALYZE").close()
        log(f"{result.size_mb:.0f} MB: PostgreSQL queries")
        store.search("warm up", limit=20)
        result.pg_ms, result.pg_cpu_ms, result.pg_hits, result.pg_server_cpu_ms = _timed_queries(
            store, runs, backend_cpu(store)
        )


def measure_scale(
    size_mb: float,
    tmp: Path,
    log: Callable[[str], None],
    word_index: bool = False,
    pg_url: str | None = None,
    pg_runs: int = QUERY_RUNS,
) -> ScaleResult:
    """Build, import, index, query and rg one corpus size."""
    from sessionstore import SessionStore
    from sessionstore.interchange.importing import import_file
    from sessionstore.storage.derived.search import catch_up

    jsonl = tmp / f"corpus-{int(size_mb)}.jsonl"
    written = build_transcript(jsonl, size_mb)
    result = ScaleResult(size_mb=written / MB)
    db_path = tmp / f"store-{int(size_mb)}.db"
    store = SessionStore.open(f"sqlite:///{db_path}")
    try:
        log(f"{result.size_mb:.0f} MB: importing")
        import_file(store, str(jsonl), source="claude-code")
        result.messages = int(store.db.one("SELECT COUNT(*) FROM messages")[0])
        before = db_bytes(store, db_path)
        log(f"{result.size_mb:.0f} MB: building the index over {result.messages:,} messages")
        start, cpu = time.perf_counter(), time.process_time()
        catch_up(store.db, max_chars=store.config.search_max_chars, batch_chars=store.config.search_batch_chars)
        result.build_s = time.perf_counter() - start
        result.build_cpu_s = time.process_time() - cpu
        result.index_bytes = db_bytes(store, db_path) - before
        result.text_bytes = int(store.db.one("SELECT COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) FROM search_fts")[0])
        log(f"{result.size_mb:.0f} MB: queries")
        for _, query, pattern in QUERIES:
            hits = store.search(query, limit=20)
            times, cpu_times = [], []
            for _ in range(QUERY_RUNS):
                t0, c0 = time.perf_counter(), time.process_time()
                store.search(query, limit=20)
                times.append((time.perf_counter() - t0) * 1000)
                cpu_times.append((time.process_time() - c0) * 1000)
            result.ours_ms.append(statistics.median(times))
            result.ours_cpu_ms.append(statistics.median(cpu_times))
            result.hits.append(len(hits))
            lines, rg_ms, rg_cpu_ms = ripgrep(pattern, jsonl)
            result.rg_ms.append(rg_ms)
            result.rg_cpu_ms.append(rg_cpu_ms)
            result.rg_lines.append(lines)
        if word_index:
            log(f"{result.size_mb:.0f} MB: a word-tokenizer index beside the trigram one")
            result.words = compare_word_index(store, tmp)
    finally:
        store.close()
    if pg_url:
        measure_postgres(jsonl, pg_url, result, log, pg_runs)
    jsonl.unlink(missing_ok=True)
    return result


def ripgrep(pattern: str, path: Path) -> tuple[int, float, float]:
    """(matching lines, median wall ms, median CPU ms of the children) of `rg -F -i -- PATTERN FILE | wc -l`."""
    times, cpu_times, lines = [], [], 0
    for _ in range(RG_RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["bash", "-c", 'rg -F -i -- "$1" "$2" | wc -l', "rg", pattern, str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        times.append((time.perf_counter() - t0) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_times.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
        lines = int(proc.stdout.strip() or 0)
    return lines, statistics.median(times), statistics.median(cpu_times)


def append_rates(tmp: Path, n: int, rounds: int) -> dict[str, float]:
    """Median appends/s of the same code on a head store without the search tables and on one whose
    index holds the session so far, interleaved; and the median of the rounds' paired slowdowns."""
    from sessionstore import SessionStore
    from sessionstore.storage.derived.search import catch_up

    def message(i: int) -> dict[str, Any]:
        return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "some words of text " * 20}

    rates: dict[str, list[float]] = {"bare": [], "indexed": []}
    for r in range(rounds):
        for label in ("bare", "indexed"):
            url = f"sqlite:///{tmp / f'append-{label}-{r}.db'}"
            with SessionStore.open(url) as store:
                if label == "bare":
                    store.db.run_write(_drop_search_tables)
                s = store.create_session(title="append")
                for i in range(n // 2):
                    s.append(message(i))
                if label == "indexed":
                    catch_up(store.db)
                t0 = time.perf_counter()
                for i in range(n // 2, n // 2 + n):
                    s.append(message(i))
                rates[label].append(n / (time.perf_counter() - t0))
            for p in tmp.glob(f"append-{label}-{r}.db*"):
                p.unlink()
    out = {label: statistics.median(values) for label, values in rates.items()}
    out["slowdown"] = statistics.median(1 - h / o for o, h in zip(rates["bare"], rates["indexed"], strict=True))
    return out


def _drop_search_tables(db: Any) -> None:
    """The schema as it would be without search: no index tables, no trigger."""
    for statement in (
        "DROP TRIGGER IF EXISTS search_rows_ad",
        "DROP TRIGGER IF EXISTS search_texts_ad",
        "DROP TABLE IF EXISTS search_fts",
        "DROP VIEW IF EXISTS search_text",
        "DROP TABLE IF EXISTS search_rows",
        "DROP TABLE IF EXISTS search_texts",
        "DROP TABLE IF EXISTS search_marks",
    ):
        db.execute(statement).close()


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def section(results: list[ScaleResult], appends: dict[str, float], cmd: str) -> str:
    """The RESULTS.md section."""
    info = machine_info()
    lines = [
        "## Search (bench/search.py)",
        "",
        f"Run {info['date']} with `{cmd}`. {machine_line(info)} " + load_note(),
        "",
        "Wall time is what a person waits; CPU time (this process, or ripgrep's children) is what the work "
        "costs, and is much less sensitive to the other jobs on the machine.",
        "",
        "| corpus | messages | index build, wall (CPU) | index size / text indexed | p50 wall (CPU) | "
        "p95 wall (CPU) | ripgrep p50 wall (CPU) | ripgrep p95 wall (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.size_mb:.0f} MB | {r.messages:,} | {r.build_mb_s:.1f} MB/s ({r.build_cpu_mb_s:.1f} MB/s; "
            f"{r.build_s:.0f} s) | {r.index_bytes / MB:.0f} MB / {r.text_bytes / MB:.0f} MB = {r.size_ratio:.2f}x | "
            f"{percentile(r.ours_ms, 50):.1f} ({percentile(r.ours_cpu_ms, 50):.1f}) ms | "
            f"{percentile(r.ours_ms, 95):.1f} ({percentile(r.ours_cpu_ms, 95):.1f}) ms | "
            f"{percentile(r.rg_ms, 50):.0f} ({percentile(r.rg_cpu_ms, 50):.0f}) ms | "
            f"{percentile(r.rg_ms, 95):.0f} ({percentile(r.rg_cpu_ms, 95):.0f}) ms |"
        )
    lines += [
        "",
        "Per query, wall ms (CPU ms), median of 5 runs after a warm-up (ripgrep: 3 runs); hits capped at "
        "the limit of 20; ripgrep counts matching JSONL lines, case-insensitive fixed string:",
        "",
    ]
    header = "| kind | query | " + " | ".join(f"{r.size_mb:.0f} MB ours | rg | hits / rg lines" for r in results) + " |"
    lines += [header, "|---|---|" + "---|---|---|" * len(results)]
    for i, (kind, query, _) in enumerate(QUERIES):
        cells = [
            f"{r.ours_ms[i]:.2f} ({r.ours_cpu_ms[i]:.2f}) | {r.rg_ms[i]:.0f} ({r.rg_cpu_ms[i]:.0f}) | "
            f"{r.hits[i]} / {r.rg_lines[i]:,}"
            for r in results
        ]
        lines.append(f"| {kind} | `{query}` | " + " | ".join(cells) + " |")
    lines += ["", "Targets (judged on wall time, CPU time in brackets):", ""]
    small, large = results[0], results[-1]
    lines.append(
        f"- at {small.size_mb:.0f} MB p50 <= 20 ms: {verdict(percentile(small.ours_ms, 50) <= 20)} "
        f"({verdict(percentile(small.ours_cpu_ms, 50) <= 20)}); p95 <= 100 ms: "
        f"{verdict(percentile(small.ours_ms, 95) <= 100)} ({verdict(percentile(small.ours_cpu_ms, 95) <= 100)})"
    )
    if len(results) > 1:
        lines.append(
            f"- at {large.size_mb:.0f} MB p50 <= 30 ms: {verdict(percentile(large.ours_ms, 50) <= 30)} "
            f"({verdict(percentile(large.ours_cpu_ms, 50) <= 30)}); below ripgrep's p50: "
            f"{verdict(percentile(large.ours_ms, 50) < percentile(large.rg_ms, 50))} "
            f"({verdict(percentile(large.ours_cpu_ms, 50) < percentile(large.rg_cpu_ms, 50))})"
        )
    lines.append(
        f"- index build >= 20 MB/s of input: "
        f"{verdict(all(r.build_mb_s >= TARGETS['build_mb_s'] for r in results))} "
        f"({verdict(all(r.build_cpu_mb_s >= TARGETS['build_mb_s'] for r in results))})"
    )
    lines.append(
        f"- index <= 4x the text it indexes: {verdict(all(r.size_ratio <= TARGETS['size_ratio'] for r in results))}"
    )
    if small.words is not None:
        lines += _word_index_lines(small)
    if any(r.pg_ms for r in results):
        lines += _postgres_lines(results)
    slowdown = appends["slowdown"]
    lines.append(
        f"- appends ({APPENDS:,} per round, {APPEND_ROUNDS} rounds interleaved, same code): median "
        f"{appends['bare']:,.0f}/s with the search tables dropped, {appends['indexed']:,.0f}/s with the "
        f"session indexed so far; median paired "
        f"slowdown {slowdown:+.1%} (negative: faster), target <= 10%: "
        f"{verdict(slowdown <= TARGETS['append_slowdown'])}"
    )
    return "\n".join(lines)


def _postgres_lines(results: list[ScaleResult]) -> list[str]:
    """The PostgreSQL table: same corpus, same queries, ripgrep from the same run; its targets."""
    lines = [
        "",
        "PostgreSQL, the same corpus imported as an ordinary role (row-level security on), the same "
        "queries (median of 5 after a warm-up), ripgrep from the same run:",
        "",
        "| corpus | index build | p50 wall (CPU) | p95 wall (CPU) | ripgrep p50 | target p50 <= 30 ms, p95 <= 150 ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if not r.pg_ms:
            continue
        p50, p95 = percentile(r.pg_ms, 50), percentile(r.pg_ms, 95)
        lines.append(
            f"| {r.size_mb:.0f} MB | {r.size_mb / r.pg_build_s:.1f} MB/s ({r.pg_build_s:.0f} s) | "
            f"{p50:.1f} ({percentile(r.pg_cpu_ms, 50):.1f}) ms | {p95:.1f} ({percentile(r.pg_cpu_ms, 95):.1f}) "
            f"ms | {percentile(r.rg_ms, 50):.0f} ms | p50 {verdict(p50 <= 30)}, p95 {verdict(p95 <= 150)} |"
        )
    lines += [
        "",
        "| kind | query | " + " | ".join(f"{r.size_mb:.0f} MB PostgreSQL | hits" for r in results if r.pg_ms) + " |",
        "|---|---|" + "---|---|" * sum(1 for r in results if r.pg_ms),
    ]
    for i, (kind, query, _) in enumerate(QUERIES):
        cells = [f"{r.pg_ms[i]:.2f} ({r.pg_cpu_ms[i]:.2f}) | {r.pg_hits[i]}" for r in results if r.pg_ms]
        lines.append(f"| {kind} | `{query}` | " + " | ".join(cells) + " |")
    return lines + [""]


def postgres_section(r: ScaleResult, cmd: str, runs: int, load_end: float) -> str:
    """The `search_postgres` section: PostgreSQL beside SQLite and ripgrep on one corpus, one run."""
    info = machine_info()
    p50, p95 = percentile(r.pg_ms, 50), percentile(r.pg_ms, 95)
    lines = [
        "## Search on PostgreSQL (bench/search.py --postgres)",
        "",
        f"Run {info['date']} with `{cmd}`. {machine_line(info)} "
        + load_note()
        + f" Load average {load_end:.1f} when it ended.",
        "",
        f"One {r.size_mb:.0f} MB Claude Code transcript ({r.pg_messages:,} messages) imported into a SQLite store "
        "and into a PostgreSQL store owned by an ordinary role (row-level security on, as for every person on a "
        "shared store); each index built by the same catch-up; the same 20 queries through `store.search(q, "
        f"limit=20)`, median of {runs} after a warm-up (SQLite: of {QUERY_RUNS}); ripgrep over the same JSONL in "
        "the same run (`rg -F -i PATTERN FILE | wc -l`, median of 3). Wall time is what a person waits; on a "
        "machine shared with other jobs it includes waiting for a core, so the CPU the PostgreSQL server spent "
        "per search (its backends' /proc times, mean of the runs, 10 ms clock ticks) is shown beside it.",
        "",
        "| corpus | PostgreSQL index build | PostgreSQL p50 wall | p95 wall | p50 / p95 server CPU | "
        "SQLite p50 / p95 | ripgrep p50 / p95 | target p50 <= 30 ms, p95 <= 150 ms (wall) |",
        "|---|---|---|---|---|---|---|---|",
        f"| {r.size_mb:.0f} MB | {r.size_mb / r.pg_build_s:.1f} MB/s ({r.pg_build_s:.0f} s) | {p50:.1f} ms | "
        f"{p95:.1f} ms | {percentile(r.pg_server_cpu_ms, 50):.1f} / {percentile(r.pg_server_cpu_ms, 95):.1f} ms | "
        f"{percentile(r.ours_ms, 50):.1f} / {percentile(r.ours_ms, 95):.1f} ms | "
        f"{percentile(r.rg_ms, 50):.0f} / {percentile(r.rg_ms, 95):.0f} ms | "
        f"p50 {verdict(p50 <= 30)}, p95 {verdict(p95 <= 150)} |",
        "",
        "p95 of 20 queries is the slowest one (nearest rank). Per query, ms:",
        "",
        "| kind | query | PostgreSQL wall | server CPU | client CPU | hits | SQLite wall | hits | ripgrep wall | "
        "rg lines |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, (kind, query, _) in enumerate(QUERIES):
        lines.append(
            f"| {kind} | `{query}` | {r.pg_ms[i]:.1f} | {r.pg_server_cpu_ms[i]:.1f} | {r.pg_cpu_ms[i]:.1f} | "
            f"{r.pg_hits[i]} | {r.ours_ms[i]:.1f} | {r.hits[i]} | {r.rg_ms[i]:.0f} | {r.rg_lines[i]:,} |"
        )
    return "\n".join(lines)


def _word_index_lines(r: ScaleResult) -> list[str]:
    """The word-tokenizer comparison, under the targets (it is a design question, not a target)."""
    w = r.words
    assert w is not None
    lines = [
        f"- a second, word-tokenizer index (FTS5 unicode61, detail=full) over the same {r.text_bytes / MB:.0f} MB "
        f"of text: {w.index_bytes / MB:.0f} MB more ({w.index_bytes / r.text_bytes:.2f}x the text) and "
        f"{w.build_s:.1f} s more to build. What it would change in the top {TOP} of the word queries "
        "(share of hits where every term stands as a whole word; hits both rankings share):",
        "",
        f"  | query | trigram bm25 | word bm25 | shared of {TOP} |",
        "  |---|---:|---:|---:|",
    ]
    for query, tri, word, shared in w.rows:
        lines.append(f"  | `{query}` | {tri:.0%} | {word:.0%} | {shared} |")
    tri_mean = statistics.mean(t for _, t, _, _ in w.rows)
    word_mean = statistics.mean(x for _, _, x, _ in w.rows)
    lines += [
        "",
        f"  Mean whole-word share: {tri_mean:.0%} with the trigram ranking alone, {word_mean:.0%} with a word index.",
    ]
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=FULL_MB, help="size of the smallest corpus")
    parser.add_argument("--scales", default="1,5", help="comma-separated multiples of --size-mb")
    parser.add_argument("--quick", action="store_true", help=f"one ~{QUICK_MB} MB corpus (smoke run)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md", help="markdown file to update")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("SESSIONSTORE_TEST_PG_URL"),
        help="PostgreSQL superuser URL for the PostgreSQL section (default SESSIONSTORE_TEST_PG_URL)",
    )
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="one corpus (--size-mb), PostgreSQL beside SQLite and ripgrep: writes the search_postgres section only",
    )
    parser.add_argument("--pg-runs", type=int, default=QUERY_RUNS, help="timed runs of each PostgreSQL query")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("rg") is None:
        sys.stderr.write("bench/search.py needs ripgrep: apt-get install ripgrep (make bench does it)\n")
        return 2
    sizes = [QUICK_MB] if args.quick else [args.size_mb * float(s) for s in args.scales.split(",")]
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    if args.postgres:
        if not args.pg_url:
            sys.stderr.write("--postgres needs a PostgreSQL superuser URL: --pg-url or SESSIONSTORE_TEST_PG_URL\n")
            return 2
        with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
            result = measure_scale(sizes[0], Path(tmp), log, pg_url=args.pg_url, pg_runs=args.pg_runs)
        cmd = f"python bench/search.py --postgres --size-mb {sizes[0]:g} --pg-runs {args.pg_runs}"
        text = postgres_section(result, cmd, args.pg_runs, os.getloadavg()[0])
        write_section(args.out, "search_postgres", text)
        print(text)
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        for i, size in enumerate(sizes):
            results.append(
                measure_scale(size, Path(tmp), log, word_index=i == 0, pg_url=None if args.no_pg else args.pg_url)
            )
        log("appends without and with the search tables")
        appends = append_rates(Path(tmp), APPENDS, APPEND_ROUNDS)
    cmd = "python bench/search.py" + (
        " --quick" if args.quick else f" --size-mb {args.size_mb:g} --scales {args.scales}"
    )
    text = section(results, appends, cmd)
    write_section(args.out, "search", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
