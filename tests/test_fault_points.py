"""Fault injection at every named point of every write path, on each engine.

For each point of `sessionstore.storage.core.faults.POINTS` a forked child runs the
operation with that point armed and SIGKILLs itself there. The parent recorded
the state before the operation (the view as the API request and as view rows,
the transcript with each message's stored content, the spill decisions and
their blobs, the session counters); a reference child ran the same operation
unharmed on a session set up alike. After the kill the state must be exactly
the old one (any point before COMMIT) or exactly the reference (after COMMIT),
and `doctor` must find the store as it found it before. A point the child
never reaches fails its case.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import pytest
import zstandard
from sqlalchemy import inspect

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.importing import import_file
from sessionstore.storage.upkeep import doctor
from sessionstore.storage.core import faults
from sessionstore.storage.codecs import textpack
from sessionstore.storage.codecs.linepack import BLOCK, SPLICE_OF, session_lines
from sessionstore.storage.codecs.blobs import get_blob
from sessionstore.storage.engine.migrate import head_revision
from sessionstore.storage.engine.models import Base
from sessionstore.storage.records.state import load_state
from sessionstore.storage.upkeep.vacuum import vacuum
from tests.conftest import PG_URL
from tests.support.cli import run_cli
from tests.support.faultcases import (
    CASES,
    case_for,
    child_name,
    child_url,
    run_import,
    write_import_files,
)
from tests.support.layers import at
from tests.support.newstore import new_store_url
from tests.support.revisions import use_test_revisions
from tests.support.validity import check_messages
from tests.support.wholestate import session_rows

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "sessionstore", ROOT / "compaction"]


def _points(case: str) -> list[str]:
    return [p for p in faults.POINTS if case_for(p) == case]


# ------------------------------------------------------------------ children


def _fork(url: str, point: str | None, body: Callable[[SessionStore], None]) -> int:
    """Run `body` on a fresh store in a forked child armed at `point`; returns its wait status."""
    name = child_name()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            faults.TARGET = point
            with SessionStore.open(child_url(url, name)) as store:
                body(store)
            code = 0
        except BaseException:  # report anything to the parent through the exit code and stderr
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    _wait_for_backend(url, name)
    return status


def _wait_for_backend(url: str, name: str, timeout: float = 5.0) -> None:
    """On PostgreSQL, wait until the killed child's server backend is gone (a sent COMMIT may still land)."""
    if not url.startswith("postgresql"):
        return
    import psycopg

    plain = PG_URL.replace("postgresql+psycopg://", "postgresql://") if PG_URL else url
    deadline = time.monotonic() + timeout
    with psycopg.connect(plain, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
            if row[0] == 0:
                return
            time.sleep(0.02)
    raise AssertionError(f"the killed child's backend {name} is still there after {timeout}s")


#: (engine, point) of every kill this run saw land; the terminal summary (tests/conftest.py) counts them.
KILLS: set[tuple[str, str]] = set()


def _assert_killed_at(status: int, point: str, url: str) -> None:
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        assert code != 0, f"fault point {point} was never reached: the operation finished"
        raise AssertionError(f"the operation failed before reaching {point} (exit {code}; see stderr)")
    assert os.WTERMSIG(status) == signal.SIGKILL, f"{point}: killed by signal {os.WTERMSIG(status)}"
    KILLS.add((url.split(":", 1)[0].split("+", 1)[0], point))


# ------------------------------------------------------------------ states


def session_state(store: SessionStore, sid: str) -> dict[str, Any]:
    """Everything an operation on a session may change, with generated uuids left out."""
    s = store.get(sid)
    entries = s.active_entries()
    db = store.db
    state = load_state(db, sid)
    counters = (state.last_seq, state.base_seq, state.view_version, state.view_tokens, state.explicit_count)
    decisions = db.all(
        "SELECT tool_use_id, kind, blob_sha256, original_size, replacement FROM replacements "
        "WHERE session_id = :id ORDER BY tool_use_id",
        {"id": sid},
    )
    blobs = {sha: len(get_blob(db, sha)) for _, _, sha, _, _ in decisions if sha}
    return {
        "request": s.active_view(),
        "view_rows": [
            (e.seq, e.role, e.message.type, e.message.subtype, e.content, e.tokens, e.replaced) for e in entries
        ],
        "transcript": [
            tuple(r)
            for r in db.all(
                "SELECT seq, role, type, subtype, content_json, tokens FROM messages WHERE session_id = :id "
                "ORDER BY seq",
                {"id": sid},
            )
        ],
        "counters": tuple(int(v) for v in counters),
        "compactions": [
            tuple(r)
            for r in db.all(
                "SELECT kind, trigger, replaced_version, pre_tokens, post_tokens, messages_summarized, "
                "summarized_seqs_json FROM compactions WHERE session_id = :id ORDER BY boundary_seq",
                {"id": sid},
            )
        ],
        "decisions": [tuple(r) for r in decisions],
        "blobs": blobs,
        "rows": session_rows(store, sid),
    }


def _problems(store: SessionStore, sid: str) -> list[str]:
    return sorted(p.code for p in doctor.check(store, sid).problems)


def _diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    keys = [key for key in a if a[key] != b[key]]
    if "rows" in keys:
        keys += [f"rows.{table}" for table in a["rows"] if a["rows"][table] != b["rows"].get(table)]
    return keys


# ------------------------------------------------------------------ session cases


@pytest.mark.parametrize("case", list(CASES))
def test_every_point_of_a_session_write_leaves_the_old_or_the_new_state(store_url: str, case: str) -> None:
    spec = CASES[case]
    points = _points(case)
    assert points, f"no fault point for {case}"
    with SessionStore.open(store_url) as store:
        ref_sid = spec.setup(store)
        old_ref = session_state(store, ref_sid)
        old_problems = _problems(store, ref_sid)
        assert old_problems == (["view_tokens"] if case == "doctor.repair" else []), old_problems
    status = _fork(store_url, None, lambda st: spec.run(st, ref_sid))
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the unharmed {case} failed"
    with SessionStore.open(store_url) as store:
        new = session_state(store, ref_sid)
        assert new != old_ref, f"the unharmed {case} changed nothing"
        assert check_messages(new["request"]) == []
        assert _problems(store, ref_sid) == []
    for point in points:
        with SessionStore.open(store_url) as store:
            sid = spec.setup(store)
            old = session_state(store, sid)
        assert old == old_ref, f"{case}: the setup is not deterministic: {_diff(old, old_ref)}"
        _assert_killed_at(_fork(store_url, point, lambda st, sid=sid: spec.run(st, sid)), point, store_url)
        committed = point.endswith(".after_commit")
        with SessionStore.open(store_url) as store:
            after = session_state(store, sid)
            expected = new if committed else old
            assert after == expected, (
                f"{point}: not exactly the {'new' if committed else 'old'} state; differs in {_diff(after, expected)}"
            )
            assert _problems(store, sid) == ([] if committed else old_problems), f"doctor after {point}"
            assert doctor.check_database(store) == [], f"database checks after {point}"
    print(f"\n{case}: {len(points)} fault points reached on {store_url.split(':')[0]}")


def test_every_point_of_a_fork_leaves_no_fork_or_a_whole_one(store_url: str) -> None:
    """Killed before COMMIT: no session, message, view row or lineage of a fork; after: the whole fork."""
    points = _points("fork")
    assert points
    tables = ("sessions", "messages", "view_entries", "replacements", "session_forks", "compactions")

    def counts(store: SessionStore) -> dict[str, int]:
        return {t: int(store.db.one(f"SELECT COUNT(*) FROM {t}")[0]) for t in tables}

    for point in points:
        with SessionStore.open(store_url) as store:
            sid = CASES["rewrite.microcompact"].setup(store)
            CASES["rewrite.microcompact"].run(store, sid)
            parent = session_state(store, sid)
            before = counts(store)
            expected = [(e.uuid, e.content, e.tokens, e.replaced) for e in store.get(sid).active_entries()]
        _assert_killed_at(_fork(store_url, point, lambda st, sid=sid: st.get(sid).fork()), point, store_url)
        with SessionStore.open(store_url) as store:
            assert session_state(store, sid) == parent, point
            forks = [
                r[0] for r in store.db.all("SELECT session_id FROM session_forks WHERE parent_id = :p", {"p": sid})
            ]
            if point.endswith(".after_commit"):
                assert len(forks) == 1, point
                made = store.get(forks[0])
                assert [(e.uuid, e.content, e.tokens, e.replaced) for e in made.active_entries()] == expected
            else:
                assert forks == [] and counts(store) == before, point
            assert doctor.check(store).problems == [], point
            store.delete(sid)
            for fork_id in forks:
                store.delete(fork_id)


# ------------------------------------------------------------------ import


def _imports_state(
    store: SessionStore, paths: list[str], rows: dict[str, Any] | None = None
) -> dict[str, tuple[int, int, int]]:
    """path -> (lines recorded, messages stored, view entries) for each imported file among `paths`.

    Each imported file's source lines must be the file's lines, byte for byte; with `rows`, every
    row of its session is also collected there (path -> whole rows) for comparison.
    """
    out = {}
    for path in paths:
        row = store.db.one("SELECT session_id, lines_done FROM imports WHERE path = :p", {"p": path})
        if row is None:
            continue
        s = store.get(row[0])
        out[path] = (int(row[1]), s.last_seq, len(s.active_entries()))
        assert doctor.check(store, s.id).problems == []
        assert check_messages(s.active_view()) == []
        recorded = [raw for _, raw in session_lines(store.db, s.id)]
        assert recorded == Path(path).read_bytes().splitlines(keepends=True)[: int(row[1])], f"{path}: source lines"
        if rows is not None:
            rows[path] = session_rows(store, s.id)
    return out


def _sessions_without_import(store: SessionStore) -> int:
    return int(store.db.one("SELECT COUNT(*) FROM sessions WHERE id NOT IN (SELECT session_id FROM imports)")[0])


def test_every_point_of_an_import_leaves_each_file_whole_or_absent(store_url: str, tmp_path: Path) -> None:
    # import.after_tail_block is reached by a growth import only (killed in the growth test below).
    points = [p for p in _points("import") if p != "import.after_tail_block"]
    assert "import.mid_file" in points and "import.after_blocks" in points
    for n, point in enumerate(points):
        folder = tmp_path / f"import-{n}"
        counts = write_import_files(folder, f"imp{n}")
        paths = list(counts)
        _assert_killed_at(_fork(store_url, point, lambda st, f=str(folder): run_import(st, f)), point, store_url)
        killed_rows: dict[str, Any] = {}
        with SessionStore.open(store_url) as store:
            state = _imports_state(store, paths, killed_rows)
            # Files are imported in order, one transaction each: the kill after the first COMMIT leaves it whole.
            expected = {paths[0]: (counts[paths[0]],) * 3} if point.endswith(".after_commit") else {}
            assert state == expected, f"{point}: {state}"
            assert _sessions_without_import(store) == 0, f"{point}: a session without its imports row"
            orphans = store.db.one("SELECT COUNT(*) FROM messages WHERE session_id NOT IN (SELECT id FROM sessions)")
            assert int(orphans[0]) == 0
            assert doctor.check_database(store) == []
        with SessionStore.open(store_url) as store:  # and the same files import completely afterwards
            run_import(store, str(folder))
            done_rows: dict[str, Any] = {}
            assert _imports_state(store, paths, done_rows) == {p: (c, c, c) for p, c in counts.items()}
            for path, whole in killed_rows.items():  # a file kept whole by the kill is exactly a full import
                assert whole == done_rows[path], f"{point}: {path} differs from its complete import"


#: The points a growth import reaches (a session with a dictionary: no `after_dictionary`), the tail block first.
GROWTH_POINTS = ("import.after_tail_block", "import.after_blocks", "import.before_commit", "import.after_commit")


def test_every_point_of_a_growth_import_rewriting_the_last_block_keeps_the_old_lines_or_all(
    store_url: str, tmp_path: Path
) -> None:
    """A grown file's import takes the session's last, partial block back (deleted, stored again with the new
    lines): killed before COMMIT the session is exactly as it was, after it the file is whole; the next import
    completes it either way."""
    from tests.test_line_blocks import BLOCK_LINES, _export, _transcript

    lines = _transcript(BLOCK_LINES + 20)
    for n, point in enumerate(GROWTH_POINTS):
        path = tmp_path / f"grow-{n}.jsonl"
        path.write_bytes(b"".join(lines[:-5]).replace(b'"blocks"', f'"grow{n:02d}"'.encode()))
        with SessionStore.open(store_url) as store:
            sid = import_file(store, str(path), source="claude-code").session_id
            before = session_rows(store, sid)
        path.write_bytes(b"".join(lines).replace(b'"blocks"', f'"grow{n:02d}"'.encode()))

        def grow(st: SessionStore, grown: str = str(path)) -> None:
            import_file(st, grown, source="claude-code")

        _assert_killed_at(_fork(store_url, point, grow), point, store_url)
        with SessionStore.open(store_url) as store:
            if point.endswith(".after_commit"):
                assert _export(store, sid) == path.read_bytes(), point
            else:
                assert session_rows(store, sid) == before, point
            assert doctor.check(store, sid).problems == [], point
            import_file(store, str(path), source="claude-code")
            assert _export(store, sid) == path.read_bytes(), point


# ------------------------------------------------------------------ migration


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_every_point_of_a_migration_leaves_no_schema_or_all_of_it(engine: str, tmp_path: Path) -> None:
    for n, point in enumerate(_points("migration")):
        with new_store_url(engine, tmp_path / f"migrate-{n}.db") as url:
            _assert_killed_at(_fork(url, point, lambda st: None), point, url)
            from sqlalchemy import create_engine

            eng = create_engine(url)
            try:
                tables = set(inspect(eng).get_table_names())
            finally:
                eng.dispose()
            if point.endswith(".after_commit"):
                assert set(Base.metadata.tables) <= tables and "alembic_version" in tables, point
                with SessionStore.open(url, upgrade=False) as store:
                    assert store.db.one("SELECT version_num FROM alembic_version")[0] == head_revision()
                    assert doctor.check_database(store) == []
            else:
                assert tables == set(), f"{point}: a killed migration left {sorted(tables)}"
            with SessionStore.open(url) as store:  # the next open finishes the job
                assert doctor.check(store).problems == []


GROWN = "tgrow_new_table"


@pytest.fixture
def grown_head(monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped revisions plus tests/migrations_ok/tgrow_new_table.py on top; returns the shipped head."""
    return use_test_revisions(monkeypatch, "migrations_ok", GROWN)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_every_point_of_an_upgrade_of_a_filled_database_keeps_every_row(
    engine: str, grown_head: str, tmp_path: Path
) -> None:
    """A filled database at the shipped head, upgraded by a test revision: killed before COMMIT it is
    exactly as it was; after COMMIT it is at the new revision with every old row; the backup is there."""
    from tests.test_migration_safety import _assert_backup, _build, _snapshot

    for n, point in enumerate(_points("migration")):
        with new_store_url(engine, tmp_path / f"migrate-{n}.db") as url:
            before = _build(url, grown_head)
            _assert_killed_at(_fork(url, point, lambda st: None), point, url)
            with SessionStore.open(url, upgrade=False) as store:
                revision = store.db.one("SELECT version_num FROM alembic_version")[0]
                assert revision == (GROWN if point.endswith(".after_commit") else grown_head), point
                assert _snapshot(store.db.engine) == before, f"{point}: an old row changed"
                tables = set(inspect(store.db.engine).get_table_names())
                assert ("t_grow" in tables) == point.endswith(".after_commit"), point
            if url.startswith("sqlite"):
                _assert_backup(url, grown_head, before)
            with SessionStore.open(url) as store:  # the next open finishes the job
                assert store.db.one("SELECT version_num FROM alembic_version")[0] == GROWN
                assert _snapshot(store.db.engine) == before
                assert doctor.check(store).problems == []


#: The revision that splices message lines (0012) and the one before it.
BEFORE_SPLICING = "0011"


def _every_point_of_an_upgrade(
    engine: str, tmp_path: Path, start: str, converted: Callable[[SessionStore, str], bool], spliced: bool
) -> None:
    """A database filled at `start` (tests.test_migration_safety) upgraded to head, killed at each migration point:
    before COMMIT it is exactly as it was; after COMMIT `converted` holds for its session A; either way the next
    open finishes the job and every line exports as written."""
    from tests.test_migration_safety import A, _assert_backup, _assert_source_exports, _build, _snapshot

    for n, point in enumerate(_points("migration")):
        with new_store_url(engine, tmp_path / f"migrate-{n}.db") as url:
            before = _build(url, start)
            _assert_killed_at(_fork(url, point, lambda st: None), point, url)
            committed = point.endswith(".after_commit")
            with SessionStore.open(url, upgrade=False) as store:
                revision = store.db.one("SELECT version_num FROM alembic_version")[0]
                assert revision == (head_revision() if committed else start), point
                assert converted(store, A) == committed, point
                if not committed:
                    assert _snapshot(store.db.engine) == before, f"{point}: a row changed"
            if url.startswith("sqlite"):
                _assert_backup(url, start, before)
            with SessionStore.open(url) as store:  # the next open finishes the job
                assert store.db.one("SELECT version_num FROM alembic_version")[0] == head_revision()
                _assert_source_exports(store, trained=False, spliced=spliced)
                assert doctor.check(store).problems == []


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_every_point_of_the_splicing_upgrade_keeps_every_line(engine: str, tmp_path: Path) -> None:
    """From 0011 through 0012 (which rewrites message lines): after COMMIT the message line is spliced."""
    line = "SELECT raw FROM source_lines WHERE session_id = :id AND line_no > 0 ORDER BY line_no DESC LIMIT 1"

    def spliced(store: SessionStore, sid: str) -> bool:
        codec = bytes(store.db.one(line, {"id": sid})[0])[0]
        return codec in SPLICE_OF or codec == BLOCK

    _every_point_of_an_upgrade(engine, tmp_path, BEFORE_SPLICING, spliced, spliced=True)


#: The revision before the one that packs source lines in blocks (0015).
BEFORE_BLOCKS = "0013"


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_every_point_of_the_block_upgrade_keeps_every_line(engine: str, tmp_path: Path) -> None:
    """From 0013 through 0015 (which packs every session's lines in blocks): after COMMIT its lines are blocks
    (filled at 0013, so unspliced)."""
    kinds = "SELECT DISTINCT kind FROM source_lines WHERE session_id = :id AND line_no > 0"

    def in_blocks(store: SessionStore, sid: str) -> bool:
        return [r[0] for r in store.db.all(kinds, {"id": sid})] == ["block"]

    _every_point_of_an_upgrade(engine, tmp_path, BEFORE_BLOCKS, in_blocks, spliced=False)


# ------------------------------------------------------------------ vacuum (SQLite: repacking message texts)


#: Messages of the store `db vacuum` repacks: every column trainable, several batches each (REPACK_BATCH below).
VACUUM_MESSAGES = 800
VACUUM_BATCH = 300


def _appended(n: int) -> list[dict[str, Any]]:
    """`n` messages with fixed uuids and timestamps: long contents, user metadata, assistant usage."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        text = f"step {i}: ran the suite, {i % 9} failures, fixed {i % 7} " * 3
        if i % 2:
            usage = {"input_tokens": 1000 + i, "output_tokens": 50 + i % 17, "cache_read_input_tokens": 12000 + i}
            extra: dict[str, Any] = {"role": "assistant", "usage": usage, "metadata": {"model": "claude"}}
        else:
            extra = {
                "role": "user",
                "metadata": {"cwd": "/home/someone/projects/store", "gitBranch": f"feature/{i % 13}", "version": "2.1"},
            }
        out.append({**extra, "content": [{"type": "text", "text": text}], "uuid": f"v-{i:05d}", "timestamp": at(i)})
    return out


def _stored_texts(store: SessionStore) -> dict[str, dict[int, Any]]:
    """Each packed column's stored values (JSON text or packed bytes) by seq, in rowid order (repack's), no NULLs."""
    select = "SELECT seq, {c} FROM messages WHERE {c} IS NOT NULL ORDER BY rowid"
    return {c: {int(q): v for q, v in store.db.all(select.format(c=c))} for c in textpack.COLUMNS}


def _vacuum(store: SessionStore) -> None:
    vacuum(store)


def _dictionaries(store: SessionStore) -> dict[str, int]:
    """Column -> id of the store's dictionaries (the stores here train each column once)."""
    return {c: int(i) for c, i in store.db.all("SELECT column_name, id FROM text_dictionaries")}


def _readable(store: SessionStore, sid: str) -> tuple[list[Any], bytes]:
    """The whole transcript and its export (session id left out), after checking that every frame names a
    dictionary the store holds."""
    held = set(_dictionaries(store).values()) | {0}
    for values in _stored_texts(store).values():
        ids = {zstandard.get_frame_parameters(bytes(v)[1:]).dict_id for v in values.values() if isinstance(v, bytes)}
        assert ids <= held, f"frames need dictionaries {sorted(ids - held)} the store does not hold"
    out = io.BytesIO()
    export_claude_code(store.get(sid), out)
    return list(store.get(sid).transcript()), out.getvalue().replace(sid.encode(), b"<session>")


def _repacked_first_batch(before: dict[str, dict[int, Any]], done: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """The stored texts once the first column's first batch is repacked: its rows as a whole run left them."""
    first = next(iter(textpack.COLUMNS))
    batch = list(before[first])[:VACUUM_BATCH]
    return {**before, first: {q: done[first][q] if q in batch else v for q, v in before[first].items()}}


def test_every_point_of_the_vacuum_repack_keeps_every_text_and_the_next_vacuum_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store of appends (no dictionary, contents TEXT) killed at each point of `db vacuum`'s repacking: its
    training write and each batch write leave the rows exactly as they were (before COMMIT) or with exactly that
    write done (after it); every message reads and exports as appended, doctor finds nothing, and the next
    `db vacuum` ends where an unharmed one does."""
    points = _points("vacuum")
    assert points == [f"vacuum.{w}.{g}" for w in ("train", "repack") for g in faults.COMMIT_GROUPS]
    monkeypatch.setattr(textpack, "REPACK_BATCH", VACUUM_BATCH)
    messages = _appended(VACUUM_MESSAGES)
    first = next(iter(textpack.COLUMNS))

    def filled(name: str) -> tuple[str, str]:
        url = f"sqlite:///{tmp_path / name}"
        with SessionStore.open(url) as store:
            session = store.create_session(title="appends")
            session.append_many(messages)
            return url, session.id

    url, sid = filled("reference.db")
    with SessionStore.open(url) as store:
        before, texts = _stored_texts(store), _readable(store, sid)
        assert _dictionaries(store) == {} and all(isinstance(v, str) for v in before["content_json"].values())
        assert [(m.uuid, m.content, m.usage, m.metadata) for m in texts[0]] == [
            (m["uuid"], m["content"], m.get("usage"), m["metadata"]) for m in messages
        ]
        vacuum(store)
        done, trained = _stored_texts(store), _dictionaries(store)
        assert _readable(store, sid) == texts
    assert sorted(trained) == sorted(textpack.COLUMNS) and _repacked_first_batch(before, done) != before
    for n, point in enumerate(points):
        url, sid = filled(f"vacuum-{n}.db")
        _assert_killed_at(_fork(url, point, _vacuum), point, url)
        committed, repacking = point.endswith(".after_commit"), point.startswith("vacuum.repack.")
        with SessionStore.open(url) as store:
            expected = _repacked_first_batch(before, done) if committed and repacking else before
            assert _stored_texts(store) == expected, f"{point}: not exactly the rows that write leaves"
            kept = {first: trained[first]} if committed or repacking else {}
            assert _dictionaries(store) == kept, point
            assert _readable(store, sid) == texts, point
            assert doctor.check(store).problems == [] and doctor.check_database(store) == [], point
        again = run_cli(capsys, "db", "vacuum", "--db", url)
        assert again.code == 0, f"{point}: {again.err}"
        with SessionStore.open(url) as store:
            assert (_stored_texts(store), _dictionaries(store)) == (done, trained), point
            assert _readable(store, sid) == texts, point
            assert doctor.check(store).problems == [] and doctor.check_database(store) == [], point


# ------------------------------------------------------------------ the list itself


def test_the_point_list_names_every_fault_call_in_the_source() -> None:
    """A fault() call with a literal name must be in POINTS, and every POINTS group must exist in the code."""
    import re

    text = "\n".join(p.read_text() for folder in SOURCES for p in folder.rglob("*.py"))
    literal = set(re.findall(r'\bfault\("([^"]+)"\)', text))
    groups = set(re.findall(r'\bfault_in\([^,]+, "([^"]+)"\)', text))
    assert literal <= set(faults.POINTS)
    listed_groups = {p.rsplit(".", 1)[1] for p in faults.POINTS if not p.startswith("migration.")}
    assert listed_groups == groups | {"begin", "before_commit", "after_commit"}
    assert len(faults.POINTS) == len(set(faults.POINTS))


def test_the_environment_variable_arms_a_point_in_a_real_process(store_url: str, tmp_path: Path) -> None:
    """SESSIONSTORE_FAULT set for a CLI append kills it just before COMMIT; nothing of the batch is stored."""
    with SessionStore.open(store_url) as store:
        sid = store.create_session().id
    batch = tmp_path / "batch.jsonl"
    batch.write_text('{"role": "user", "content": "one"}\n{"role": "assistant", "content": "two"}\n')
    env = {**os.environ, faults.ENV: "append_many.before_commit"}
    proc = subprocess.run(
        [sys.executable, "-m", "sessionstore", "append", sid, str(batch), "--db", store_url],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert b"fault point append_many.before_commit" in proc.stderr
    with SessionStore.open(store_url) as store:
        assert store.get(sid).last_seq == 0 and list(store.get(sid).transcript()) == []
