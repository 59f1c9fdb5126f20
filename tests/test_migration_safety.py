"""Upgrades keep every row: a database built at each shipped revision opens at head intact.

Rows are written with raw SQL against the schema of the revision under test,
so later revisions are covered automatically. A synthetic extra revision on
top of the shipped head exercises the pre-upgrade backup and the rollback of
a failing upgrade on a database that is already at head.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import sqlite3
import stat
import zlib
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine, make_url

from sessionstore import MigrationError, SessionStore
from sessionstore.storage.read import history as hist
from sessionstore.storage.engine import migrate
from sessionstore.storage import store as store_module
from sessionstore.storage.engine.db import make_engine
from sessionstore.interchange.export import _copy_source_lines
from sessionstore.storage.upkeep.doctor import check
from sessionstore.storage.codecs.linepack import BLOCK, DICT_LINE, LinePacker, block_columns, session_packer
from sessionstore.storage.engine.migrate import alembic_config, current_revision, head_revision, upgrade
from tests.support.validity import check_messages

REVISIONS = [r.revision for r in reversed(list(ScriptDirectory.from_config(alembic_config()).walk_revisions()))]
A, B = "0f0e0d0c-0000-4000-8000-00000000000a", "0f0e0d0c-0000-4000-8000-00000000000b"
BLOB = ("spilled output line\n" * 2000).encode()
SHA = sha256(BLOB).hexdigest()
RAW_LINE = b'{"type":"user","message":"\xc3\xa9"}\x00\xff\n'
#: Message 4's line: its content_json occurs in it verbatim, so revision 0012 stores it without that content.
FIXED = [{"type": "text", "text": "fixed"}]
MESSAGE_LINE = (
    '{"type":"assistant","message":{"role":"assistant","content":' + json.dumps(FIXED, ensure_ascii=False) + "}}\n"
).encode()
#: Enough lines for the upgrade to train session B a dictionary (revision 0010), the last one without a newline.
LONG_SOURCE = [
    *(
        f'{{"type":"progress","uuid":"{n:08d}-aaaa","cwd":"/w/project","text":"step {n} of the build"}}\n'.encode()
        for n in range(300)
    ),
    b"x",
    b'{"partial":',
]
ORDER = {
    "sessions": "id",
    "messages": "session_id, seq",
    "view_entries": "session_id, valid_from, key",
    "compactions": "id",
    "blobs": "sha256",
    "replacements": "session_id, tool_use_id",
    "session_memory": "session_id",
    "source_lines": "session_id, line_no",
    "imports": "session_id",
}

EXTRA_REVISION = '''"""A no-op revision on top of head (test only)."""
revision = "ffff_test_extra"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
'''


def _message(seq: int, role: str, content: Any, tokens: int, **extra: Any) -> dict[str, Any]:
    row = {
        "session_id": A,
        "seq": seq,
        "uuid": f"u-{seq}",
        "parent_uuid": f"u-{seq - 1}" if seq > 1 else None,
        "role": role,
        "type": role,
        "subtype": None,
        "timestamp": f"2026-01-0{seq}T00:00:00.000Z",
        "api_message_id": None,
        "usage_json": None,
        "is_meta": False,
        "is_compact_summary": False,
        "metadata_json": None,
        "content_json": json.dumps(content, ensure_ascii=False),
        "tokens": tokens,
    }
    row.update(extra)
    return row


def _rows() -> dict[str, list[dict[str, Any]]]:
    """A compacted session with a spill, session memory and an imported source, plus a child session."""
    tool_use = [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}]
    messages = [
        _message(1, "user", "Please fix the flaky test é ✓", 11),
        _message(2, "assistant", tool_use, 20, api_message_id="m1", usage_json='{"input_tokens": 900}'),
        _message(3, "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}], 12),
        _message(4, "assistant", FIXED, 6, api_message_id="m2"),
        _message(
            5, "system", "Conversation compacted", 5, subtype="compact_boundary", metadata_json='{"trigger": "manual"}'
        ),
        _message(6, "user", "Summary: the flaky test was fixed.", 9, is_compact_summary=True),
        _message(7, "user", "next request \u0000 with a NUL", 8),
        {**_message(1, "user", "child", 3), "session_id": B},
        {**_message(2, "assistant", "ok", 3), "session_id": B},
    ]
    session = {
        "title": "compacted",
        "cwd": "/w",
        "model": "claude-sonnet-4-5",
        "context_window": 200000,
        "created_at": 1.5,
        "updated_at": 2.5,
        "metadata_json": '{"k": 1}',
        "compact_failures": 1,
    }
    return {
        "sessions": [
            {
                **session,
                "id": A,
                "parent_id": None,
                "last_seq": 7,
                "base_seq": 6,
                "view_version": 1,
                "view_tokens": 22,
                "explicit_count": 2,
                "tail_state": '{"r":"user","a":null,"t":[],"d":[]}',
            },
            {
                **session,
                "id": B,
                "parent_id": A,
                "last_seq": 2,
                "base_seq": 0,
                "view_version": 0,
                "view_tokens": 6,
                "explicit_count": 0,
                "tail_state": '{"r":"assistant","a":null,"t":[],"d":[]}',
            },
        ],
        "messages": messages,
        "view_entries": [
            *(
                {
                    "session_id": A,
                    "valid_from": 0,
                    "key": seq * 65536,
                    "seq": seq,
                    "valid_to": 1,
                    "content_json": None,
                    "tokens": tokens,
                }
                for seq, tokens in ((1, 11), (2, 20), (3, 12), (4, 6))
            ),
            {
                "session_id": A,
                "valid_from": 1,
                "key": 100,
                "seq": 5,
                "valid_to": None,
                "content_json": None,
                "tokens": 5,
            },
            {
                "session_id": A,
                "valid_from": 1,
                "key": 200,
                "seq": 6,
                "valid_to": None,
                "content_json": None,
                "tokens": 9,
            },
        ],
        "compactions": [
            {
                "id": 1,
                "session_id": A,
                "boundary_seq": 5,
                "summary_seq": 6,
                "replaced_version": 0,
                "kind": "full",
                "trigger": "manual",
                "pre_tokens": 49,
                "post_tokens": 14,
                "messages_summarized": 4,
                "summarized_seqs_json": "[1,2,3,4]",
                "head_uuid": "u-4",
                "anchor_uuid": "u-6",
                "tail_uuid": "u-4",
                "custom_instructions": "keep the API",
                "summarizer": "extractive",
                "created_at": 3.5,
                "metadata_json": "{}",
            }
        ],
        "blobs": [
            {"sha256": SHA, "size": len(BLOB), "compression": "zlib", "data": zlib.compress(BLOB), "created_at": 3.0}
        ],
        "replacements": [
            {
                "session_id": A,
                "tool_use_id": "t1",
                "kind": "spilled",
                "replacement": "preview…",
                "blob_sha256": SHA,
                "original_size": len(BLOB),
                "created_at": 3.0,
            }
        ],
        "session_memory": [
            {
                "session_id": A,
                "notes": "# notes",
                "covers_seq": 4,
                "covers_uuid": "u-4",
                "tokens_at_update": 40,
                "tool_calls_at_update": 1,
                "updated_at": 3.0,
            }
        ],
        "source_lines": [
            {"session_id": A, "line_no": 1, "kind": "message", "entry_type": "user", "message_seq": 1, "raw": RAW_LINE},
            {
                "session_id": A,
                "line_no": 2,
                "kind": "message",
                "entry_type": "assistant",
                "message_seq": 4,
                "raw": MESSAGE_LINE,
            },
            *(
                {"session_id": B, "line_no": n, "kind": "side", "entry_type": "x", "message_seq": None, "raw": raw}
                for n, raw in enumerate(LONG_SOURCE, 1)
            ),
        ],
        "imports": [
            {
                "session_id": A,
                "source": "claude-code",
                "source_key": "abc",
                "path": "/x/abc.jsonl",
                "bytes_done": len(RAW_LINE) + len(MESSAGE_LINE),
                "lines_done": 2,
                "prefix_sha256": "0" * 64,
                "updated_at": 3.0,
            }
        ],
    }


#: Columns later revisions add, with the value a row written at that revision carries.
ADDED_COLUMNS = {"compactions": {"ordinal": 1, "view_floor": 0}}


#: From this revision on a stored source line carries its codec byte (written packed, without a dictionary).
PACKED_FROM = "0010"
#: From this revision on a message line is stored without the content its message holds.
SPLICED_FROM = "0012"


def _fill(engine: Engine, revision: str) -> None:
    with engine.begin() as conn:
        for table, rows in _rows().items():
            if table == "source_lines" and revision >= PACKED_FROM:
                rows = [{**row, "raw": LinePacker().pack(row["raw"])} for row in rows]
            present = {c["name"] for c in inspect(conn).get_columns(table)}
            added = {k: v for k, v in ADDED_COLUMNS.get(table, {}).items() if k in present}
            for row in rows:
                row = {**row, **added}
                cols = ", ".join(row)
                conn.execute(text(f"INSERT INTO {table} ({cols}) VALUES ({', '.join(':' + c for c in row)})"), row)


def _snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every column of every filled table, rows in key order (bytes normalized)."""
    with engine.connect() as conn:
        out = {}
        for table, order in ORDER.items():
            cols = [c["name"] for c in inspect(conn).get_columns(table)]
            rows = conn.execute(text(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {order}")).all()
            out[table] = [
                tuple((c, bytes(v) if isinstance(v, memoryview) else v) for c, v in zip(cols, row, strict=True))
                for row in rows
            ]
    return out


def _as_before(
    after: dict[str, list[tuple[Any, ...]]], before: dict[str, list[tuple[Any, ...]]]
) -> dict[str, list[tuple[Any, ...]]]:
    """`after` limited to the columns `before` had: an upgrade may add columns, never change old ones."""
    out = {}
    for table, rows in after.items():
        old = {c for row in before.get(table, []) for c, _ in row}
        out[table] = [tuple((c, v) for c, v in row if c in old) for row in rows]
    return out


def _build(url: str, revision: str) -> dict[str, list[tuple[Any, ...]]]:
    """A database at `revision` holding `_rows()`; returns its snapshot."""
    engine = make_engine(url)
    try:
        upgrade(engine, revision)
        _fill(engine, revision)
        return _snapshot(engine)
    finally:
        engine.dispose()


def _db_path(url: str) -> Path:
    return Path(make_url(url).database or "")


def _backups(url: str) -> list[Path]:
    path = _db_path(url)
    return sorted(path.parent.glob(path.name + ".bak-*"))


def _assert_backup(url: str, revision: str, before: dict[str, list[tuple[Any, ...]]]) -> None:
    """One owner-only backup of the old database, named after its revision, holding the old rows."""
    backups = _backups(url)
    assert len(backups) == 1, backups
    backup = backups[0]
    assert backup.name.startswith(f"{_db_path(url).name}.bak-{revision}-")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    with sqlite3.connect(backup) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(revision,)]
    engine = make_engine(f"sqlite:///{backup}")
    try:
        assert _snapshot(engine) == before
    finally:
        engine.dispose()


def _assert_readable(store: SessionStore, before: dict[str, list[tuple[Any, ...]]]) -> None:
    """The upgraded store serves the old rows through the API and passes doctor."""
    s = store.get(A)
    contents = [json.loads(r["content_json"]) for r in _rows()["messages"] if r["session_id"] == A]
    assert [m.content for m in s.transcript()] == contents
    assert [e.seq for e in s.active_entries()] == [5, 6, 7]
    assert s.view_tokens == 22 and check_messages(s.active_view()) == []
    assert hist.boundary(s, 1).boundary_seq == 5, "the boundary is numbered (ordinal backfilled)"
    assert [e.seq for e in hist.view_before(s, 1)] == [1, 2, 3, 4], "the past view is found from its floor"
    report = check(store)
    assert report.ok, [str(p) for p in report.problems]


def _unpacked(url: str, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """source_lines rows as they were before revision 0010 packed them: raw lines, one a row (a block of lines,
    revision 0015, as its lines' rows), no dictionary rows."""
    with SessionStore.open(url) as store:
        packers = {sid: session_packer(store.db, sid) for sid in (A, B)}
        columns = {sid: block_columns(store.db, sid, 0, 1 << 60) for sid in (A, B)}
    out = []
    for row in rows:
        cells = dict(row)
        if cells["line_no"] == DICT_LINE:
            continue
        found = columns[cells["session_id"]]
        if cells["raw"][:1] == bytes((BLOCK,)):
            packer = packers[cells["session_id"]]
            for line in packer.unpack_block(cells["line_no"], cells["raw"], found.get, with_kinds=True):
                fields = {"line_no": line.line_no, "kind": line.kind, "entry_type": line.entry_type}
                out.append(tuple({**cells, **fields, "message_seq": line.seq, "raw": line.raw}.items()))
            continue
        content = found.get(cells["message_seq"], (None,))[0]
        cells["raw"] = packers[cells["session_id"]].unpack(cells["raw"], content)
        out.append(tuple(cells.items()))
    return out


def _assert_source_exports(store: SessionStore, trained: bool, spliced: bool) -> None:
    """The byte copy `export --format claude-code` makes of each session's imported lines is the lines as written."""
    expected = {A: [RAW_LINE, MESSAGE_LINE], B: LONG_SOURCE}
    for sid, lines in expected.items():
        out = io.BytesIO()
        _copy_source_lines(store.get(sid), out)
        assert out.getvalue() == b"".join(lines)
    if trained:
        assert session_packer(store.db, B).dictionary is not None, "the upgrade packs a long source with a dictionary"
    if spliced:
        stored = store.db.one("SELECT raw FROM source_lines WHERE session_id = :id AND line_no = 1", {"id": A})[0]
        assert bytes(stored)[0] == BLOCK, "0015 keeps the two lines in one block"
        assert FIXED[0]["text"].encode() not in bytes(stored), "0012 splices the message line, 0015 keeps it spliced"


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_revision_upgrades_to_head_keeping_every_row(empty_store_url: str, revision: str) -> None:
    before = _build(empty_store_url, revision)
    assert sum(map(len, before.values())) == sum(map(len, _rows().values()))
    with SessionStore.open(empty_store_url) as store:
        after = _snapshot(store.db.engine)
        with store.db.engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        _assert_readable(store, before)
        _assert_source_exports(store, trained=revision < PACKED_FROM, spliced=revision < SPLICED_FROM)
    after["source_lines"] = _unpacked(empty_store_url, after["source_lines"])
    expected = dict(before)
    if revision >= PACKED_FROM:
        expected["source_lines"] = _unpacked(empty_store_url, before["source_lines"])
    assert _as_before(after, expected) == expected
    if empty_store_url.startswith("sqlite"):
        if revision == head_revision():
            assert _backups(empty_store_url) == [], "a database already at head is not copied"
        else:
            _assert_backup(empty_store_url, revision, before)


@pytest.fixture
def newer_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped migrations plus one no-op revision on top, as if this were a newer sessionstore."""
    shipped = head_revision()
    copy = tmp_path / "migrations"
    shutil.copytree(migrate.MIGRATIONS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "versions" / "ffff_test_extra.py").write_text(EXTRA_REVISION.format(head=shipped))
    monkeypatch.setattr(migrate, "MIGRATIONS_DIR", copy)
    for module in (migrate, store_module):
        monkeypatch.setattr(module, "SCHEMA_HEAD", "ffff_test_extra")
    return shipped


def test_opening_with_a_newer_version_backs_up_first(
    empty_store_url: str, newer_head: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = _build(empty_store_url, newer_head)
    with caplog.at_level(logging.WARNING, logger="sessionstore.migrate"):
        with SessionStore.open(empty_store_url) as store:
            with store.db.engine.connect() as conn:
                assert current_revision(conn) == "ffff_test_extra"
            assert _snapshot(store.db.engine) == before
    logged = " ".join(r.getMessage() for r in caplog.records)
    if empty_store_url.startswith("sqlite"):
        _assert_backup(empty_store_url, newer_head, before)
        assert str(_backups(empty_store_url)[0]) in logged
    else:
        assert "no automatic backup" in logged and "pg_dump" in logged


def test_no_backup_of_an_empty_or_current_database(sqlite_url: str, newer_head: str) -> None:
    with SessionStore.open(sqlite_url):
        pass
    with SessionStore.open(sqlite_url):
        pass
    assert _backups(sqlite_url) == []


def test_a_failed_backup_stops_the_upgrade(sqlite_url: str, newer_head: str, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _build(sqlite_url, newer_head)

    class NoBackup:
        Error = sqlite3.Error

        @staticmethod
        def connect(*_: Any) -> Any:
            raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(migrate, "sqlite3", NoBackup)
    with pytest.raises(MigrationError, match="could not back up .*nothing was changed"):
        SessionStore.open(sqlite_url)
    assert _backups(sqlite_url) == [], "no half-written backup is left behind"
    engine = make_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            assert current_revision(conn) == newer_head
        assert _snapshot(engine) == before
    finally:
        engine.dispose()
