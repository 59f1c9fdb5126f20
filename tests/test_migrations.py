"""Alembic owns the schema: upgrades, downgrades, and models that match the revisions."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from sessionstore import MigrationError, SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.importing import import_file
from sessionstore.storage.codecs.linepack import RAW, SPLICE_OF, ZSTD, ZSTD_DICT, session_packer
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import current_revision, downgrade, ensure_current, head_revision, upgrade
from sessionstore.storage.engine.models import Base, include_name
from tests.support.cli import run_cli

TABLES = {
    "sessions",
    "messages",
    "view_entries",
    "compactions",
    "replacements",
    "blobs",
    "session_memory",
    "source_lines",
    "imports",
}


def _tables(engine) -> set[str]:
    with engine.connect() as conn:
        return set(inspect(conn).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(empty_store_url: str) -> None:
    engine = make_engine(empty_store_url)
    try:
        upgrade(engine)
        assert TABLES <= _tables(engine)
        downgrade(engine, "base")
        assert _tables(engine) == set()
        upgrade(engine)
        with engine.connect() as conn:
            assert current_revision(conn) == head_revision()
        assert TABLES <= _tables(engine)
    finally:
        engine.dispose()


def test_autogenerate_finds_no_difference(empty_store_url: str) -> None:
    engine = make_engine(empty_store_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": include_name})
            diff = compare_metadata(ctx, Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


def test_open_upgrades_an_empty_database_once(empty_store_url: str) -> None:
    with SessionStore.open(empty_store_url) as st:
        st.create_session(title="kept")
    engine = make_engine(empty_store_url)
    try:
        assert ensure_current(engine) is False
    finally:
        engine.dispose()
    with SessionStore.open(empty_store_url) as st:
        assert [s["title"] for s in st.list()] == ["kept"]


def test_a_newer_unknown_revision_is_refused(empty_store_url: str) -> None:
    with SessionStore.open(empty_store_url):
        pass
    engine = make_engine(empty_store_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'fffffffff999'"))
        with pytest.raises(MigrationError, match="newer version"):
            ensure_current(engine)
    finally:
        engine.dispose()


def test_db_commands(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    assert run_cli(capsys, "db", "upgrade", "--db", sqlite_url).code == 0
    result = run_cli(capsys, "db", "current", "--json", "--db", sqlite_url)
    assert result.code == 0 and '"up_to_date": true' in result.out
    result = run_cli(capsys, "db", "history")
    assert result.code == 0 and "0001" in result.out


def test_schema_head_constant_matches_alembic() -> None:
    from sessionstore.storage.engine.migrate import SCHEMA_HEAD

    assert SCHEMA_HEAD == head_revision(), (
        "update SCHEMA_HEAD in sessionstore/storage/engine/migrate.py with each new revision"
    )


def test_0010_down_and_up_again_keeps_every_imported_line(empty_store_url: str, transcripts_dir: Path) -> None:
    """Downgrading past 0010 writes every line back raw (no dictionary rows); upgrading packs them again."""
    path = transcripts_dir / "claude-code" / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    with SessionStore.open(empty_store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
    engine = make_engine(empty_store_url)
    try:
        downgrade(engine, "0009")
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT line_no, raw FROM source_lines WHERE session_id = :id ORDER BY line_no"), {"id": sid}
            ).all()
        assert [int(n) for n, _ in rows] == list(range(1, len(lines) + 1)), "no dictionary row is left"
        assert [bytes(raw) for _, raw in rows] == lines
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    with SessionStore.open(empty_store_url) as store:
        assert session_packer(store.db, sid).dictionary is not None
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == b"".join(lines)


def _message_lines(engine: Engine, sid: str) -> list[bytes]:
    """The session's message lines as stored, in order."""
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT raw FROM source_lines WHERE session_id = :id AND message_seq IS NOT NULL ORDER BY line_no"),
            {"id": sid},
        ).all()
    return [bytes(raw) for (raw,) in rows]


def _codecs(engine: Engine, sid: str) -> dict[int, int]:
    """How many of the session's message lines each codec stores."""
    return dict(Counter(raw[0] for raw in _message_lines(engine, sid)))


def test_0012_down_and_up_again_splices_the_message_lines_and_keeps_every_byte(
    store_url: str, transcripts_dir: Path
) -> None:
    """Downgrading past 0012 stores every message line whole again (codecs 1-2); upgrading splices them again.

    (From 0015 an import stores blocks of lines; at 0013 they are the rows an import at 0013 wrote.)"""
    path = transcripts_dir / "claude-code" / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    source = path.read_bytes()
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
    engine = make_engine(store_url)
    try:
        downgrade(engine, "0013")
        imported, stored = _codecs(engine, sid), _message_lines(engine, sid)
        assert sum(n for codec, n in imported.items() if codec in SPLICE_OF) > 0.95 * sum(imported.values())
        downgrade(engine, "0011")
        assert set(_codecs(engine, sid)) <= {RAW, ZSTD, ZSTD_DICT}, "0011 reads no spliced line"
        with SessionStore.open(store_url, upgrade=False) as store:
            packer = session_packer(store.db, sid)
            rows = store.db.all(
                "SELECT raw FROM source_lines WHERE session_id = :id AND line_no > 0 ORDER BY line_no", {"id": sid}
            )
            assert b"".join(packer.unpack(bytes(raw)) for (raw,) in rows) == source
        upgrade(engine, "0013", backup=False)
        assert _codecs(engine, sid) == imported, "the upgrade stores the lines as an import at 0012 does"
        assert _message_lines(engine, sid) == stored, "the same segments of the same columns, byte for byte"
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    with SessionStore.open(store_url) as store:
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == source
