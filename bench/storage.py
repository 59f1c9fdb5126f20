"""Store size against the JSONL it was imported from, per table, without and with the search index.

    python bench/storage.py [--size-mb 20] [--rounds 3] [--resume-messages 100000] [--baseline-code DIR]
                            [--out bench/RESULTS.md] [--no-write]

Corpus: every shared transcript (../shared/transcripts, Claude Code and Codex),
plus a generated Claude Code folder of about `--size-mb` MB: repetitions of the
shared Claude Code transcripts with fresh ids, and for every second repetition
a resumed session (a new file holding its predecessor's lines under a new
sessionId, then lines of its own), as real folders have them.

Each code tree (this one, and `--baseline-code` when given: the same script run
in a child with that tree first on sys.path) imports the corpus into a fresh
SQLite store, then reports: file bytes and bytes per table (dbstat, indexes
counted with their table) after import and after the search index is built,
each over the JSONL bytes; and the hot paths in the same run: import MB/s,
`export --format claude-code` MB/s, active-view read (resume), one-message read
and `view_before` medians, search p50/p95, and on a session of `--resume-messages`
messages appended through the API (a store of its own) the append and the
fresh-process resume. Each tree is measured `--rounds` times, alternating; timed
figures are medians. Results replace the `storage` section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "transcripts"
MB = 1_000_000
QUERIES = ("error", "import", "function", "the file", "test", "README", "def ", "json", "commit", "zzqx")


def build_corpus(folder: Path, size_mb: float, seed: int = 11) -> list[tuple[Path, str]]:
    """The shared transcripts plus a generated Claude Code folder; returns (path, source) pairs."""
    sys.path.insert(0, str(REPO))
    from bench.import_export import repetition, shared_corpus

    files: list[tuple[Path, str]] = []
    for path in sorted(SHARED.rglob("*.jsonl")):
        files.append((path, "codex" if "codex" in path.parts else "claude-code"))
    corpus = shared_corpus(SHARED / "claude-code")
    rng = random.Random(seed)
    gen = folder / "generated"
    gen.mkdir(parents=True, exist_ok=True)
    written, n = 0, 0
    while written < size_mb * MB:
        chunk = repetition(corpus, rng)
        first = gen / f"s{n:04d}.jsonl"
        first.write_bytes(chunk)
        files.append((first, "claude-code"))
        written += len(chunk)
        if n % 2 == 0 and written < size_mb * MB:
            old_id = json.loads(chunk.split(b"\n", 1)[0]).get("sessionId", "")
            new_id = f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
            resumed = chunk.replace(old_id.encode(), new_id.encode()) if old_id else chunk
            own = repetition(corpus[: len(corpus) // 4], rng).split(b"\n")
            tail = b"\n".join(own[: max(1, len(own) - 1)]) + b"\n"
            path = gen / f"s{n:04d}-resumed.jsonl"
            path.write_bytes(resumed + tail)
            files.append((path, "claude-code"))
            written += len(resumed) + len(tail)
        n += 1
    return files


def table_sizes(db_path: str) -> dict[str, int]:
    """Bytes per table (its indexes and FTS shadow tables folded in), from dbstat."""
    con = sqlite3.connect(db_path)
    try:
        owner = dict(con.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table','index')").fetchall())
        sizes: dict[str, int] = {}
        for name, size in con.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + int(size)
        return sizes
    finally:
        con.close()


def file_bytes(db_path: str) -> int:
    """The database file's bytes after a WAL checkpoint (what the store costs on disk)."""
    con = sqlite3.connect(db_path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return os.path.getsize(db_path)


def ms_quantile(samples: list[float], q: float) -> float:
    """The q-quantile of `samples` (seconds) in milliseconds."""
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(files: list[tuple[Path, str]], workdir: Path, resume_messages: int) -> dict[str, Any]:
    """Import `files` into a fresh store and measure sizes and hot paths with the code on sys.path."""
    from sessionstore import SessionStore
    from sessionstore.interchange.export import export_claude_code
    from sessionstore.interchange.importing import import_file
    from sessionstore.storage.derived import search as search_mod

    db_path = str(workdir / "store.db")
    url = f"sqlite:///{db_path}"
    jsonl = sum(p.stat().st_size for p, _ in files)
    store = SessionStore.open(url)
    start = time.perf_counter()
    sessions: list[tuple[str, str]] = []
    for path, source in files:
        result = import_file(store, str(path), source=source)
        sessions.append((result.session_id, source))
    import_s = time.perf_counter() - start
    store.close()
    report: dict[str, Any] = {"jsonl": jsonl, "import_mb_s": jsonl / MB / import_s}
    report["plain"] = {"file": file_bytes(db_path), "tables": table_sizes(db_path)}

    store = SessionStore.open(url)
    cc = [sid for sid, source in sessions if source == "claude-code"]
    out = workdir / "export.jsonl"
    start, exported = time.perf_counter(), 0
    for sid in cc:
        with open(out, "wb") as f:
            export_claude_code(store.get(sid), f)
        exported += out.stat().st_size
    report["export_mb_s"] = exported / MB / (time.perf_counter() - start)

    resume, one = [], []
    for sid in cc[:20]:
        t0 = time.perf_counter()
        session = store.get(sid)
        session.active_view()
        resume.append(time.perf_counter() - t0)
        uuids = [m.uuid for m in itertools.islice(session.transcript(), 20)]
        for uuid in uuids:
            t0 = time.perf_counter()
            session.message(uuid)
            one.append(time.perf_counter() - t0)
    report["resume_ms"] = 1000 * statistics.median(resume)
    report["one_message_ms"] = 1000 * statistics.median(one) if one else 0.0

    start = time.perf_counter()
    search_mod.catch_up(store.index_db)
    report["index_s"] = time.perf_counter() - start
    samples = []
    for _ in range(5):
        for query in QUERIES:
            t0 = time.perf_counter()
            store.search(query, limit=20)
            samples.append(time.perf_counter() - t0)
    report["search_p50_ms"] = ms_quantile(samples, 0.5)
    report["search_p95_ms"] = ms_quantile(samples, 0.95)
    report["view_before_ms"] = view_before_ms(store, cc)
    store.close()
    report["indexed"] = {"file": file_bytes(db_path), "tables": table_sizes(db_path)}
    report.update(long_session(workdir / "long.db", resume_messages))
    return report


def view_before_ms(store: Any, session_ids: list[str], limit: int = 40) -> float:
    """Median ms of `history.view_before` (what the model saw before a boundary) over the imported boundaries."""
    from sessionstore.storage.read import history

    samples = []
    for sid in session_ids:
        session = store.get(sid)
        for index in range(1, len(history.boundaries(session)) + 1):
            t0 = time.perf_counter()
            history.view_before(session, index)
            samples.append(time.perf_counter() - t0)
            if len(samples) >= limit:
                return 1000 * statistics.median(samples)
    return 1000 * statistics.median(samples) if samples else 0.0


def pack_as_vacuum_does(store: Any) -> None:
    """Train and pack the texts of a store of appends, as `db vacuum` does (revision 0016 on): the appends and
    the resume then run against packed contents, the state of a store that ever imported or was vacuumed.
    A tree before that has nothing to pack."""
    try:
        from sessionstore.storage.codecs import textpack
    except ImportError:
        return
    if hasattr(textpack, "repack"):
        for column in textpack.COLUMNS:
            textpack.repack(store.db, column)


def long_session(db_path: Path, messages: int, appends: int = 2000) -> dict[str, float]:
    """Append (one message per transaction, median us) and resume of a `messages`-message session (median ms of
    3 fresh opens reading its active view), in a store of its own so the size figures stay the corpus's."""
    from bench.append_resume import make_messages
    from sessionstore import SessionStore

    msgs = make_messages(messages)
    url = f"sqlite:///{db_path}"
    store = SessionStore.open(url)
    session = store.create_session()
    for start in range(0, max(0, messages - appends), 1000):
        session.append_many(msgs[start : min(start + 1000, messages - appends)])
    pack_as_vacuum_does(store)
    one = []
    for msg in msgs[max(0, messages - appends) :]:
        t0 = time.perf_counter()
        session.append(msg)
        one.append(time.perf_counter() - t0)
    sid = session.id
    store.close()
    resume = []
    for _ in range(3):
        t0 = time.perf_counter()
        store = SessionStore.open(url)
        view = store.get(sid).active_view()
        resume.append(time.perf_counter() - t0)
        store.close()
    return {
        "long_messages": float(messages),
        "append_us": 1e6 * statistics.median(one),
        "resume_long_ms": 1000 * statistics.median(resume),
        "resume_long_view": float(len(view)),
    }


def child_main(argv: list[str]) -> int:
    """`child CODE FILES_JSON WORKDIR`: measure with CODE first on sys.path, print the report as JSON."""
    code, files_json, workdir, resume_messages = argv
    sys.path.insert(0, code)
    files = [(Path(p), s) for p, s in json.loads(Path(files_json).read_text())]
    print(json.dumps(measure(files, Path(workdir), int(resume_messages))))
    return 0


def run_child(code: Path, files_json: Path, workdir: Path, resume_messages: int) -> dict[str, Any]:
    """Run `measure` in a fresh interpreter with `code` first on sys.path (its store deleted after)."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SESSIONSTORE_DB_URL": f"sqlite:///{workdir / 'store.db'}"}
    proc = subprocess.run(
        [sys.executable, __file__, "child", str(code), str(files_json), str(workdir), str(resume_messages)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child for {code} failed:\n{proc.stderr[-4000:]}")
    shutil.rmtree(workdir, ignore_errors=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: Figures that are times or rates: the report gives their median over the rounds (sizes are the same each round).
TIMED = (
    "import_mb_s",
    "export_mb_s",
    "resume_ms",
    "one_message_ms",
    "index_s",
    "search_p50_ms",
    "search_p95_ms",
    "view_before_ms",
    "append_us",
    "resume_long_ms",
)


def run_rounds(codes: dict[str, Path], files_json: Path, root: Path, rounds: int, messages: int) -> dict[str, Any]:
    """Each code tree measured `rounds` times, the trees alternating, in fresh children; timed figures are the
    medians of the rounds (the machine is shared: interleaving spreads its load over both trees alike)."""
    reports: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
    for i in range(rounds):
        order = list(codes) if i % 2 == 0 else list(reversed(codes))
        for name in order:
            reports[name].append(run_child(codes[name], files_json, root / f"{name}-{i}", messages))
    runs = {}
    for name, got in reports.items():
        merged = dict(got[0])
        for key in TIMED:
            merged[key] = statistics.median(r[key] for r in got)
        merged["rounds"] = len(got)
        runs[name] = merged
    return runs


def ratio(n: int, jsonl: int) -> str:
    return f"{n / MB:.2f} MB ({n / jsonl:.2f}x)"


def section(runs: dict[str, dict[str, Any]], size_mb: float, count: int) -> str:
    """The RESULTS.md section: sizes, per-table sizes and hot paths, one column per code tree."""
    from bench.common import load_note, machine_info, machine_line

    names = list(runs)
    jsonl = next(iter(runs.values()))["jsonl"]
    lines = [
        "## Storage: store bytes / JSONL bytes (bench/storage.py)",
        "",
        f"{machine_info()['date']}. {machine_line(machine_info())} {load_note()}",
        "",
        f"Corpus: the shared transcripts plus a generated Claude Code folder of ~{size_mb:g} MB "
        f"(forked/resumed sessions included); {count} files, {jsonl / MB:.2f} MB of JSONL.",
        "",
        "| figure | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    rows = [
        ("store without search index", lambda r: ratio(r["plain"]["file"], r["jsonl"])),
        ("store with search index", lambda r: ratio(r["indexed"]["file"], r["jsonl"])),
        ("import MB/s", lambda r: f"{r['import_mb_s']:.2f}"),
        ("export claude-code MB/s", lambda r: f"{r['export_mb_s']:.2f}"),
        ("resume (active view) median ms", lambda r: f"{r['resume_ms']:.2f}"),
        ("one message median ms", lambda r: f"{r['one_message_ms']:.3f}"),
        ("view_before median ms", lambda r: f"{r['view_before_ms']:.2f}"),
        ("append one message median us", lambda r: f"{r['append_us']:.1f}"),
        (
            "resume of a long session median ms",
            lambda r: f"{r['resume_long_ms']:.1f} ({r['resume_long_view']:,.0f} in view)",
        ),
        ("search index build s", lambda r: f"{r['index_s']:.2f}"),
        ("search p50 ms", lambda r: f"{r['search_p50_ms']:.2f}"),
        ("search p95 ms", lambda r: f"{r['search_p95_ms']:.2f}"),
    ]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(runs[n]) for n in names) + " |")
    rounds = next(iter(runs.values())).get("rounds", 1)
    lines += [
        "",
        f"Timed figures are medians of {rounds} rounds, the trees alternating, each round a fresh process and"
        " store (sizes are the same every round). Resume: the active view of each of the first 20 imported"
        " Claude Code sessions; one message: read by uuid; view_before: what the model saw before each imported"
        " boundary (up to 40); append: one message per transaction (a durable commit) at the end of a session"
        f" of {int(next(iter(runs.values())).get('long_messages', 0)):,} messages appended through the API,"
        " median of its last 2,000, its texts packed first as `db vacuum` packs them (a tree that packs);"
        " long resume: a fresh open reading that session's active view.",
    ]
    for state, title in (("plain", "without the search index"), ("indexed", "with the search index built")):
        lines += ["", f"Per table {title} (bytes / JSONL bytes; indexes with their table):", ""]
        lines += _table_rows(runs, state, jsonl)
    return "\n".join(lines)


def _table_rows(runs: dict[str, dict[str, Any]], state: str, jsonl: int) -> list[str]:
    """One markdown row per table of at least 0.1% of the JSONL, biggest first, one column per code tree."""
    names = list(runs)
    tables = sorted(
        {t for r in runs.values() for t in r[state]["tables"]},
        key=lambda t: -max(r[state]["tables"].get(t, 0) for r in runs.values()),
    )
    lines = ["| table | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for table in tables:
        sizes = [r[state]["tables"].get(table, 0) for r in runs.values()]
        if max(sizes) < 0.001 * jsonl:
            continue
        lines.append(f"| {table} | " + " | ".join(ratio(s, jsonl) for s in sizes) + " |")
    return lines


def main(argv: list[str]) -> int:
    if argv[:1] == ["child"]:
        return child_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=20.0)
    parser.add_argument("--baseline-code", type=Path, default=None, help="a checkout of the code before the change")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each tree, alternating")
    parser.add_argument("--resume-messages", type=int, default=100_000, help="the long session's messages")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
        root = Path(tmp)
        files = build_corpus(root / "corpus", args.size_mb)
        files_json = root / "files.json"
        files_json.write_text(json.dumps([(str(p), s) for p, s in files]))
        codes = {"before": args.baseline_code.resolve()} if args.baseline_code is not None else {}
        codes["after" if args.baseline_code else "this tree"] = REPO
        runs = run_rounds(codes, files_json, root, args.rounds, args.resume_messages)
        text = section(runs, args.size_mb, len(files))
    print(text)
    if not args.no_write:
        sys.path.insert(0, str(REPO))
        from bench.common import write_section

        write_section(args.out, "storage", text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
