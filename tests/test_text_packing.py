"""Message texts packed on SQLite (revisions 0013 and 0016): smaller, read back exactly, never read wrong.

`messages.content_json`, `metadata_json` and `usage_json` of 64 characters or more are stored as
zstd frames (with dictionaries trained on the store's first import batch) when that is shorter.
Every reader sees the same JSON, packed or not: the API (a packed content is parsed from its
bytes by jiter, which must give what json.loads gives), exports, SQL that looks inside a text
(`unpacked()`), another process that opened the store before the dictionary existed. A frame
whose dictionary is missing is an error, not a wrong text. PostgreSQL stores TEXT.
"""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.importing import ImportWarnings, import_file
from sessionstore.storage.codecs import textpack
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.codecs.fastjson import compact_dumps, loads_stored
from sessionstore.storage.engine.migrate import downgrade, head_revision, upgrade
from sessionstore.storage.read.recall import _like_pattern, like_clause
from sessionstore.storage.write.spill import results_in_view
from sessionstore.storage.upkeep.vacuum import vacuum
from tests.support.cli import run_cli

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
BIG = "x" * 5000
META = {"cwd": "/home/someone/project", "toolUseResult": {"stdout": "ok " * 200, "exitCode": 0}}


def _types(path: Path, column: str) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute(f"SELECT typeof({column}), COUNT(*) FROM messages GROUP BY 1").fetchall())


def test_an_import_is_stored_packed_and_reads_back_exactly(tmp_path: Path, transcripts_dir: Path) -> None:
    db = tmp_path / "s.db"
    source = transcripts_dir / SPOTTER
    with SessionStore.open(f"sqlite:///{db}") as store:
        sid = import_file(store, source).session_id
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        metadata = [m.metadata for m in store.get(sid).transcript()]
    assert out.getvalue() == source.read_bytes()  # every line rebuilt from packed columns, byte for byte
    assert any("toolUseResult" in m for m in metadata)
    for column in ("metadata_json", "content_json"):
        types = _types(db, column)
        assert types.get("blob", 0) > types.get("text", 0), (column, types)
        with sqlite3.connect(db) as conn:
            packed = list(conn.execute(f"SELECT {column} FROM messages WHERE typeof({column}) = 'blob'"))
            columns = {c for (c,) in conn.execute("SELECT column_name FROM text_dictionaries")}
        stored = sum(len(v) for (v,) in packed)
        text = sum(len(textpack.unpack(v).encode()) for (v,) in packed)
        assert stored < text * 0.5, (column, stored, text)
        assert column in columns  # usage_json too once a batch has 256 long enough


def test_a_packed_text_reads_as_json_through_the_api_and_sql(sqlite_url: str) -> None:
    """A packed value in any of the columns reads as its JSON everywhere (here a content packed without a
    dictionary, as a store that only ever had appends holds them)."""
    with SessionStore.open(sqlite_url) as store:
        session = store.create_session(title="packed")
        session.append({"role": "user", "content": "find the needle-7f3 " + BIG, "metadata": META})
        session.append({"role": "assistant", "content": "short"})
        path = Path(sqlite_url.removeprefix("sqlite:///"))
        assert _types(path, "metadata_json") == {"blob": 1, "null": 1}
        assert _types(path, "content_json") == {"text": 2}  # no content dictionary yet: contents stay TEXT
        frame = zstandard.ZstdCompressor().compress(json.dumps("find the needle-7f3 " + BIG).encode())
        store.db.run_write(
            lambda db: db.execute(
                "UPDATE messages SET content_json = :c WHERE seq = 1", {"c": bytes((textpack.PACKED,)) + frame}
            ).close()
        )
        assert _types(path, "content_json") == {"blob": 1, "text": 1}
        fresh = store.get(session.id)
        assert fresh.active_view()[0]["content"] == "find the needle-7f3 " + BIG
        first = next(iter(fresh.transcript()))
        assert first.metadata == META and first.content == "find the needle-7f3 " + BIG
        clause = like_clause(store.db, "needle-7f3")  # what recall's query searches with
        found = store.db.all(f"SELECT m.seq FROM messages m WHERE {clause}", {"like": _like_pattern("needle-7f3")})
        assert [r[0] for r in found] == [1]
        row = store.db.one("SELECT substr(unpacked(content_json), 1, 12) FROM messages WHERE seq = 1")
        assert row[0] == '"find the ne'


def test_metadata_is_packed_on_sqlite_and_text_on_postgresql(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        session = store.create_session(title="plain")
        session.append({"role": "user", "content": BIG, "metadata": META})
        value = store.db.one("SELECT metadata_json FROM messages WHERE session_id = :id", {"id": session.id})[0]
        assert next(iter(store.get(session.id).transcript())).metadata == META
    if store_url.startswith("sqlite"):
        assert isinstance(value, bytes) and len(value) < 200 and json.loads(textpack.unpack(value)) == META
    else:
        assert json.loads(value) == META


def test_a_frame_whose_dictionary_is_missing_is_an_error_not_a_wrong_text(
    tmp_path: Path, transcripts_dir: Path
) -> None:
    db = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{db}") as store:
        import_file(store, transcripts_dir / SPOTTER)
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute(
            "SELECT metadata_json FROM messages WHERE typeof(metadata_json) = 'blob' ORDER BY length(metadata_json) DESC"
        ).fetchone()
    frame = bytearray(value)
    dict_id = int.from_bytes(frame[6:10], "little")
    assert dict_id != 0 and zstandard.get_frame_parameters(bytes(frame[1:])).dict_id == dict_id
    frame[6:10] = (dict_id ^ 0x5A5A5A5A).to_bytes(4, "little")  # a dictionary no store has
    with pytest.raises(textpack.TextCorrupt, match="dictionary"):
        loads_stored(bytes(frame))
    with pytest.raises(textpack.TextCorrupt, match="codec"):
        textpack.unpack(b"\x07" + bytes(value[1:]))


def test_a_dictionary_trained_by_another_process_after_this_one_opened_is_found(
    tmp_path: Path, transcripts_dir: Path
) -> None:
    db = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{db}") as store:
        script = (
            "import sys; from sessionstore import SessionStore; from sessionstore.interchange.importing import "
            "import_file\nwith SessionStore.open(sys.argv[1]) as s: print(import_file(s, sys.argv[2]).session_id)"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, f"sqlite:///{db}", str(transcripts_dir / SPOTTER)],
            capture_output=True,
            text=True,
            check=True,
        )
        sid = done.stdout.strip().splitlines()[-1]
        with sqlite3.connect(db) as conn:
            ids = [i for (i,) in conn.execute("SELECT id FROM text_dictionaries")]
        assert ids
        for i in ids:  # this process has not seen them: as if it had opened the store first
            textpack._dicts.pop(i, None)
        textpack._local.cache = {}
        metadata = [m.metadata for m in store.get(sid).transcript()]
    assert any("toolUseResult" in m for m in metadata)


def test_0013_packs_an_existing_store_and_its_downgrade_gives_every_text_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    engine = make_engine(url)
    upgrade(engine, "0012")
    rows = [
        {
            "s": "s1",
            "q": i,
            "u": f"u{i}",
            "c": json.dumps(f"message {i}"),
            "m": json.dumps({"cwd": "/w", "toolUseResult": {"stdout": f"run {i} " + "lorem ipsum " * (i % 7 + 3)}}),
        }
        for i in range(1, 400)
    ]
    _insert_messages(engine, rows)
    before = _texts(url)
    with SessionStore.open(url) as store:
        assert [json.dumps(m.metadata) for m in store.get("s1").transcript()] == [r["m"] for r in rows]
    assert _types(tmp_path / "s.db", "metadata_json") == {"blob": len(rows)}
    downgrade(engine, "0012")
    assert _types(tmp_path / "s.db", "metadata_json") == {"text": len(rows)}
    assert _texts(url) == before
    with SessionStore.open(url) as store:
        assert store.db.one("SELECT version_num FROM alembic_version")[0] == head_revision()
    assert _types(tmp_path / "s.db", "metadata_json") == {"blob": len(rows)}
    engine.dispose()


def _insert_messages(engine: sa.Engine, rows: list[dict[str, object]]) -> None:
    """Session s1 with `rows` (s, q, u, c, m) as its messages, written as an older revision's code would."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sessions (id, title, context_window, created_at, updated_at, metadata_json) "
                "VALUES ('s1', 't', 200000, 0, 0, '{}')"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO messages (session_id, seq, uuid, role, type, is_meta, is_compact_summary, content_json, "
                "metadata_json, tokens) VALUES (:s, :q, :u, 'user', 'user', 0, 0, :c, :m, 10)"
            ),
            rows,
        )


def _texts(url: str) -> list[tuple[int, str, str]]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        return [
            (q, textpack.text_of(c), textpack.text_of(m))
            for q, c, m in conn.execute("SELECT seq, content_json, metadata_json FROM messages ORDER BY seq")
        ]


def test_a_dictionary_trained_in_a_write_that_rolled_back_is_not_used_after_it(tmp_path: Path) -> None:
    """A strict import refused after its first batch takes its new dictionary with it; later writes of the
    same handle must not compress with that dictionary (no store holds it)."""
    path = tmp_path / "refused.jsonl"
    lines = [
        json.dumps(
            {
                "type": "user",
                "uuid": f"u{i:05d}",
                "parentUuid": f"u{i - 1:05d}" if i else None,
                "sessionId": "refused",
                "timestamp": "2026-01-01T00:00:00Z",
                "cwd": "/home/someone/projects/refused",
                "gitBranch": f"feature/line-{i}",
                "message": {"role": "user", "content": f"line {i}"},
            }
        )
        for i in range(1_100)
    ]
    path.write_text("\n".join(lines) + "\nnot json at all\n")
    db = tmp_path / "s.db"
    with SessionStore.open(f"sqlite:///{db}") as store:
        with pytest.raises(ImportWarnings):
            import_file(store, path, strict=True)
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM text_dictionaries").fetchone()[0] == 0
        session = store.create_session(title="after")
        session.append({"role": "user", "content": "hi", "metadata": META})
    textpack._dicts.clear()  # another process: it knows only what the store holds
    textpack._local.cache = {}
    with SessionStore.open(f"sqlite:///{db}") as store:
        assert next(iter(store.get(session.id).transcript())).metadata == META


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(exclude_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_a_packed_content_parses_to_what_json_loads_gives(value: object) -> None:
    """A packed content is parsed from its bytes by jiter: same value, same types, as the json module."""
    text = compact_dumps([value, "padding " * 12])
    packed = textpack.TextPacker.__new__(textpack.TextPacker)
    packed._compressors = {c: zstandard.ZstdCompressor(level=3, write_content_size=True) for c in textpack.COLUMNS}
    packed._with_dictionary = set(textpack.COLUMNS)  # as if trained: the frames' dictionary does not matter here
    stored = packed.pack("content_json", text)
    assert isinstance(stored, bytes)
    got, want = loads_stored(stored), json.loads(text)
    assert got == want and repr(got) == repr(want)


def test_a_packed_tool_result_is_counted_in_the_view(sqlite_url: str, transcripts_dir: Path) -> None:
    """What `stats` and `spill list` count reads the tool_use_ids out of packed contents (appended to a store
    whose import trained the content dictionary)."""
    with SessionStore.open(sqlite_url) as store:
        import_file(store, transcripts_dir / SPOTTER)
        session = store.create_session(title="tools")
        session.append({"role": "user", "content": "run it"})
        session.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {}}]}
        )
        session.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": BIG}]}
        )
        stored = store.db.one(
            "SELECT content_json FROM messages WHERE session_id = :id AND seq = 3", {"id": session.id}
        )[0]
        assert isinstance(stored, bytes) and len(stored) < 200
        assert results_in_view(store.get(session.id)) == {"toolu_01"}


def test_0016_packs_existing_contents_and_its_downgrade_gives_them_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    engine = make_engine(url)
    upgrade(engine, "0013")
    rows = [
        {"s": "s1", "q": i, "u": f"u{i}", "c": compact_dumps([{"type": "text", "text": f"step {i}: " + "ok " * 40}])}
        for i in range(1, 400)
    ] + [{"s": "s1", "q": 400, "u": "u400", "c": compact_dumps("short")}]
    _insert_messages(engine, [{**r, "m": None} for r in rows])
    before = _texts(url)
    with SessionStore.open(url) as store:
        assert [compact_dumps(m.content) for m in store.get("s1").transcript()] == [r["c"] for r in rows]
    assert _types(tmp_path / "s.db", "content_json") == {"blob": 399, "text": 1}
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM text_dictionaries WHERE column_name = 'content_json'").fetchone()[0]
    assert _texts(url) == before
    downgrade(engine, "0013")
    assert _types(tmp_path / "s.db", "content_json") == {"text": 400}
    assert _texts(url) == before
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert not conn.execute("SELECT COUNT(*) FROM text_dictionaries WHERE column_name = 'content_json'").fetchone()[
            0
        ]
    engine.dispose()


def test_vacuum_gives_a_store_of_appends_its_dictionaries_and_packs_with_them(sqlite_url: str) -> None:
    """Appends pack without a dictionary until the store has one; `db vacuum` trains it and repacks, same JSON."""
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    with SessionStore.open(sqlite_url) as store:
        session = store.create_session(title="appends")
        session.append_many(
            {"role": "user", "content": [{"type": "text", "text": f"step {i}: ran the suite, {i % 9} failures " * 3}]}
            for i in range(600)
        )
        before = [m.content for m in store.get(session.id).transcript()]
        with sqlite3.connect(path) as conn:
            plain = conn.execute("SELECT SUM(length(content_json)) FROM messages").fetchone()[0]
            assert conn.execute("SELECT COUNT(*) FROM text_dictionaries").fetchone()[0] == 0
        assert _types(path, "content_json") == {"text": 600}  # no dictionary, no packed content
        assert vacuum(store).bytes_after > 0
        with sqlite3.connect(path) as conn:
            packed = conn.execute("SELECT SUM(length(content_json)) FROM messages").fetchone()[0]
            columns = [c for (c,) in conn.execute("SELECT column_name FROM text_dictionaries")]
            ids = {
                zstandard.get_frame_parameters(bytes(v)[1:]).dict_id
                for (v,) in conn.execute("SELECT content_json FROM messages")
            }
        assert columns == ["content_json"] and 0 not in ids
        assert packed < plain * 0.6, (packed, plain)
        assert [m.content for m in store.get(session.id).transcript()] == before
        assert textpack.repack(store.db, "content_json") == 0  # done once: nothing left to pack
    textpack._local.cache = {}
    with SessionStore.open(sqlite_url) as store:
        assert [m.content for m in store.get(session.id).transcript()] == before


def test_db_upgrade_says_what_gives_back_the_space_its_repacking_freed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    engine = make_engine(url)
    upgrade(engine, "0015")
    text = "the suite ran: " + " ".join(f"test_{j} passed" for j in range(120))
    _insert_messages(
        engine,
        [{"s": "s1", "q": i, "u": f"u{i}", "c": compact_dumps(f"{i} {text}"), "m": None} for i in range(1, 1200)],
    )
    engine.dispose()
    shown = run_cli(capsys, "db", "upgrade", "--db", url)
    assert shown.code == 0, shown.err
    assert f"database at {head_revision()}" in shown.out
    assert "revisions 0016, 0017 repacked rows" in shown.err and f"sessionstore db vacuum --db {url}" in shown.err
    again = run_cli(capsys, "db", "upgrade", "--db", url)  # nothing repacked: nothing to say
    assert again.code == 0 and "vacuum" not in again.err
