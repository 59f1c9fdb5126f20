"""Imported source lines stored in blocks of consecutive lines (revision 0015): exported byte for byte, grown one
block at a time, cut inside a block, never read wrong, and converted from per-line rows by the migration."""

from __future__ import annotations

import io
import os
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code, export_jsonl
from sessionstore.interchange.importing import import_file
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.codecs.linepack import (
    BLOCK,
    BLOCK_BYTES,
    BLOCK_LINES,
    SPLICE_OF,
    BlockLine,
    LineCorrupt,
    LinePacker,
    block_columns,
    column_bytes,
    session_lines,
    session_packer,
    train,
)
from sessionstore.storage.engine.migrate import downgrade, upgrade
from sessionstore.storage.upkeep.vacuum import vacuum
from tests.support.cli import claude_code_round_trip, run_cli_process
from tests.support.wholestate import session_rows

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
CONTENT = '[{"type":"text","text":"Fixed the flaky test: the fixture now waits for the port. é ✓"}]'
USAGE = '{"input_tokens":4,"cache_read_input_tokens":18001,"output_tokens":120,"service_tier":"standard"}'


def _message_line(i: int, parent: str | None, text_of: str = "the build is green é") -> bytes:
    role = "user" if i % 2 == 0 else "assistant"
    line = {
        "parentUuid": parent,
        "type": role,
        "uuid": f"00000000-0000-4000-8000-{i:012d}",
        "sessionId": "blocks",
        "timestamp": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
        "message": {"role": role, "content": [{"type": "text", "text": f"turn {i}: {text_of}"}]},
    }
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _transcript(n: int, big_every: int = 0) -> list[bytes]:
    """`n` Claude Code lines: messages, with a progress line (no message) every 5th and, every `big_every`th,
    a message longer than a block's bytes."""
    out, parent = [], None
    for i in range(n):
        if i % 5 == 4:
            out.append(json.dumps({"type": "progress", "uuid": f"p-{i}", "parentUuid": parent}).encode() + b"\n")
            continue
        big = bool(big_every) and i % big_every == big_every - 1
        out.append(_message_line(i, parent, "x" * (BLOCK_BYTES * 2) if big else "the build is green é"))
        parent = f"00000000-0000-4000-8000-{i:012d}"
    return out


def _rows(store: SessionStore, sid: str) -> list[tuple[int, int, bytes]]:
    """(first line, line count, raw) of each stored row of the session but its dictionary."""
    rows = store.db.all(
        "SELECT line_no, line_count, raw FROM source_lines WHERE session_id = :id AND line_no > 0 ORDER BY line_no",
        {"id": sid},
    )
    return [(int(n), int(c), bytes(raw)) for n, c, raw in rows]


def _export(store: SessionStore, sid: str) -> bytes:
    out = io.BytesIO()
    export_claude_code(store.get(sid), out)
    return out.getvalue()


def test_blocks_round_trip_lines_with_and_without_messages_and_huge_ones() -> None:
    """pack_blocks / unpack_block give every line back, with its number (gaps too), seq, kind and entry type."""
    lines = [
        BlockLine(1, None, b'{"type":"progress"}\n', None, "side", "progress"),
        BlockLine(2, 7, b'{"message":{"content":' + CONTENT.encode() + b',"usage":' + USAGE.encode() + b"}}\n"),
        BlockLine(5, None, b"not json at all \xff\n", None, "bad", None),
        BlockLine(6, None, b'{"type":"hook","data":"' + b"z" * 200_000 + b'"}\n', None, "side", "hook"),
        BlockLine(7, 8, b'{"message":{"content":"' + b"y" * 200_000 + b'"}}\n', None, "message", "assistant"),
        BlockLine(8, 9, b'{"message":{"content":[]}}\n', None, "message", ""),
    ]
    columns = {7: (CONTENT, USAGE, None), 8: ('"' + "y" * 200_000 + '"', None, None), 9: ("[]", None, None)}
    for packer in (LinePacker(), LinePacker(train(_transcript(400)))):
        given = [line._replace(columns=columns.get(line.seq or 0)) for line in lines]
        rows = packer.pack_blocks("s", given)
        # A rest longer than BLOCK_BYTES is a block of its own; a huge content cut out of its line costs nothing.
        assert [row[5] for row in rows] == [3, 1, 2]
        out = [
            line
            for row in rows
            for line in packer.unpack_block(row[1], row[6], lambda seq: columns.get(seq), with_kinds=True)
        ]
        assert out == given
        assert all(row[6][0] == BLOCK and row[2] == "block" for row in rows)
        assert CONTENT.encode() not in b"".join(row[6] for row in rows), "the content is cut from its line"


def test_a_block_holds_at_most_block_lines(store_url: str, tmp_path: Path) -> None:
    lines = _transcript(3 * BLOCK_LINES + 5, big_every=50)
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(lines))
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        rows = _rows(store, sid)
        assert all(raw[0] == BLOCK and 1 <= count <= BLOCK_LINES for _, count, raw in rows)
        assert sum(count for _, count, _ in rows) == len(lines)
        assert len(rows) <= len(lines) // BLOCK_LINES + 2 * (len(lines) // 50) + 2
        assert _export(store, sid) == b"".join(lines)
        assert [raw for _, raw in session_lines(store.db, sid, batch=3)] == lines


def test_a_long_import_writes_full_blocks_across_its_batches(store_url: str, tmp_path: Path) -> None:
    """A file longer than an import batch (importing.BATCH lines): the lines of a batch that do not fill a block
    wait for the next one, so every block but the last holds BLOCK_LINES lines."""
    lines = _transcript(2_100)
    path = tmp_path / "batches.jsonl"
    path.write_bytes(b"".join(lines))
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        counts = [count for _, count, _ in _rows(store, sid)]
        assert counts == [BLOCK_LINES] * (len(lines) // BLOCK_LINES) + [len(lines) % BLOCK_LINES]
        assert _export(store, sid) == b"".join(lines)


def test_lines_appended_one_at_a_time_keep_the_blocks_few_and_the_bytes_identical(
    store_url: str, tmp_path: Path
) -> None:
    """What `watch` does: each import of the grown file rewrites only the last block, which fills up to BLOCK_LINES."""
    lines = _transcript(2 * BLOCK_LINES + 30)
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"".join(lines[:10]))
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        for n in range(11, len(lines) + 1):
            path.write_bytes(b"".join(lines[:n]))
            assert import_file(store, str(path), source="claude-code").status == "grown"
            rows = _rows(store, sid)
            assert [count for _, count, _ in rows] == [BLOCK_LINES] * (n // BLOCK_LINES) + (
                [n % BLOCK_LINES] if n % BLOCK_LINES else []
            ), n
        assert _export(store, sid) == b"".join(lines)
        whole = tmp_path / "whole.jsonl"
        whole.write_bytes(b"".join(lines).replace(b'"blocks"', b'"whole0"'))
        other = import_file(store, str(whole), source="claude-code").session_id
        assert [count for _, count, _ in _rows(store, other)] == [count for _, count, _ in _rows(store, sid)]


@pytest.mark.parametrize("complete", [BLOCK_LINES - 1, BLOCK_LINES + 9])
def test_a_half_line_inside_a_block_is_cut_out_when_the_file_grows(
    store_url: str, tmp_path: Path, complete: int
) -> None:
    """`lines_done` inside a stored block (full or not): the block is split at it, the half line replaced."""
    lines = _transcript(complete + 20)
    path = tmp_path / "half.jsonl"
    path.write_bytes(b"".join(lines[:complete]) + lines[complete][:25])
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        assert [raw for _, raw in session_lines(store.db, sid)][-1] == lines[complete][:25]
        path.write_bytes(b"".join(lines))
        assert import_file(store, str(path), source="claude-code").status == "grown"
        assert _export(store, sid) == b"".join(lines)
        assert sum(count for _, count, _ in _rows(store, sid)) == len(lines)
        transcript = [m.content for m in store.get(sid).transcript()]
        assert len(transcript) == sum(1 for line in lines if b'"message"' in line)


def test_a_changed_or_missing_column_or_a_damaged_block_is_a_typed_error(store_url: str, tmp_path: Path) -> None:
    lines = _transcript(80)
    path = tmp_path / "damage.jsonl"
    path.write_bytes(b"".join(lines))
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        first, _, raw = _rows(store, sid)[0]
        update = "UPDATE source_lines SET raw = :raw WHERE session_id = :id AND line_no = :n"
        damaged = [raw[:-5] + bytes((raw[-5] ^ 0x40,)) + raw[-4:], raw[:-3], raw[:12], raw[:1]]
        for bad in damaged:
            params = {"raw": bad, "id": sid, "n": first}
            store.db.run_write(lambda db, params=params: db.execute(update, params).close())
            with pytest.raises(LineCorrupt):
                _export(store, sid)
        params = {"raw": raw, "id": sid, "n": first}
        store.db.run_write(lambda db: db.execute(update, params).close())
        assert _export(store, sid) == b"".join(lines)
        seq = 3
        change = "UPDATE messages SET content_json = REPLACE(content_json, 'green', 'GREEN') WHERE session_id = :id"
        store.db.run_write(lambda db: db.execute(change + " AND seq = :seq", {"id": sid, "seq": seq}).close())
        with pytest.raises(LineCorrupt, match="does not match"):
            _export(store, sid)
        gone = "DELETE FROM messages WHERE session_id = :id AND seq = :seq"
        store.db.run_write(lambda db: db.execute(gone, {"id": sid, "seq": seq}).close())
        with pytest.raises(LineCorrupt, match="missing"):
            _export(store, sid)


def test_a_row_that_is_not_a_block_is_a_typed_error_never_lines() -> None:
    """unpack_block of an empty row or of a per-line row (earlier revisions, mixed with blocks) raises LineCorrupt,
    even when the per-line row's bytes would parse as a block index."""
    packer = LinePacker()
    per_line = [packer.pack(line) for line in (b"\x00\x01\x00\x00\x00\x00 parses as a block\n", b"x", CONTENT.encode())]
    assert [row[0] for row in per_line] == [0, 0, 0]
    for stored in [b"", *per_line]:
        with pytest.raises(LineCorrupt, match="not a block"):
            packer.unpack_block(1, stored, lambda seq: None)


def _store_at_0013(url: str, paths: list[Path]) -> list[str]:
    """Import `paths` at head and take the store down to 0013: per-line rows, as an import at 0013 stored them."""
    with SessionStore.open(url) as store:
        sids = [import_file(store, str(path), source="claude-code").session_id for path in paths]
    engine = make_engine(url)
    try:
        downgrade(engine, "0013")
        with engine.connect() as conn:
            blocks = conn.execute(text("SELECT COUNT(*) FROM source_lines WHERE kind = 'block'")).scalar()
        assert blocks == 0
    finally:
        engine.dispose()
    return sids


def test_the_migration_packs_a_filled_0013_store_in_blocks_keeping_messages_views_and_exports(
    store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    half = tmp_path / "half.jsonl"
    lines = _transcript(150, big_every=70)
    half.write_bytes(b"".join(lines[:-1]) + lines[-1][:20])
    paths = [transcripts_dir / SPOTTER, half]
    sids = _store_at_0013(store_url, paths)
    with SessionStore.open(store_url, upgrade=False) as store:
        before = {sid: (_kept(store, sid), _jsonl(store, sid)) for sid in sids}
        query = "SELECT line_no, raw FROM source_lines WHERE session_id = :id AND line_no > 0"
        per_line = {sid: store.db.all(query, {"id": sid}) for sid in sids}
    engine = make_engine(store_url)
    try:
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    with SessionStore.open(store_url) as store:
        result = vacuum(store, lambda done, total, what: None)
        if store_url.startswith("sqlite"):
            assert result.bytes_after < 0.9 * result.bytes_before, "vacuum gives the repacked lines' space back"
        for sid, path in zip(sids, paths, strict=True):
            rows = _rows(store, sid)
            assert {raw[0] for _, _, raw in rows} == {BLOCK}
            assert len(rows) < len(per_line[sid]) / 20
            source = path.read_bytes()
            assert _export(store, sid) == source
            assert (_kept(store, sid), _jsonl(store, sid)) == before[sid]
        stored = sum(len(raw) for sid in sids for _, _, raw in _rows(store, sid))
        assert stored < 0.6 * sum(len(bytes(raw)) for rows in per_line.values() for _, raw in rows)
        path = tmp_path / "half.jsonl"
        path.write_bytes(b"".join(lines))
        assert import_file(store, str(path), source="claude-code").status == "grown"
        assert _export(store, sids[1]) == b"".join(lines)
    engine = make_engine(store_url)
    try:
        downgrade(engine, "0013")  # and back: the per-line rows an import at 0013 writes
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    with SessionStore.open(store_url) as store:
        assert _export(store, sids[0]) == paths[0].read_bytes()


def _kept(store: SessionStore, sid: str) -> dict[str, Any]:
    """Every row of the session but its source lines (compared by their export)."""
    return {table: rows for table, rows in session_rows(store, sid).items() if table != "source_lines"}


def _jsonl(store: SessionStore, sid: str) -> str:
    out = io.StringIO()
    export_jsonl(store.get(sid), out)
    return out.getvalue()


def test_reopening_reads_the_lines_back_with_their_kinds(store_url: str, tmp_path: Path) -> None:
    """The kinds and entry types a block keeps are the ones the import gave its lines, also after the file grew:
    the import of the grown file stores the last block's lines again, with the kinds it read back from it."""
    lines = _transcript(20)
    path = tmp_path / "kinds.jsonl"
    with SessionStore.open(store_url) as store:
        for n in (12, len(lines)):
            path.write_bytes(b"".join(lines[:n]))
            sid = import_file(store, str(path), source="claude-code").session_id
            (first, count, raw) = _rows(store, sid)[0]
            assert count == n, "one block, rewritten whole by the growth import"
            columns: dict[int, Any] = block_columns(store.db, sid, 0, 1 << 60)
            got = session_packer(store.db, sid).unpack_block(first, raw, columns.get, with_kinds=True)
            assert [(line.kind, line.entry_type) for line in got] == [
                ("side", "progress") if b'"progress"' in line else ("message", json.loads(line)["type"])
                for line in lines[:n]
            ]


def test_per_line_rows_of_earlier_revisions_read_back_mixed_with_blocks(store_url: str, transcripts_dir: Path) -> None:
    """Rows as an import before 0015 wrote them (one line each, spliced ones included) and blocks in one session:
    `session_lines` reads both, fetching the columns the per-line rows need by the same range read."""
    source = (transcripts_dir / SPOTTER).read_bytes().splitlines(keepends=True)
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        packer = session_packer(store.db, sid)
        columns = block_columns(store.db, sid, 0, 1 << 60)
        blocks = _rows(store, sid)
        half = blocks[: len(blocks) // 2]
        lines = [line for first, _, raw in half for line in packer.unpack_block(first, raw, columns.get)]
        per_line = packer.pack_rows(
            [(sid, line.line_no, "side", None, line.seq, line.raw) for line in lines],
            {seq: [column_bytes(c) for c in values] for seq, values in columns.items()},
        )
        assert sum(row[-1][0] in SPLICE_OF for row in per_line) > len(per_line) / 5, "spliced rows among them"

        def swap(db: Any) -> None:
            for first, _, _ in half:
                db.execute("DELETE FROM source_lines WHERE session_id = :id AND line_no = :n", {"id": sid, "n": first})
            db.insert_rows(
                "source_lines", ("session_id", "line_no", "kind", "entry_type", "message_seq", "raw"), per_line
            )

        store.db.run_write(swap)
        assert [raw for _, raw in session_lines(store.db, sid, batch=200)] == source
        assert _export(store, sid) == b"".join(source)


def test_a_spliced_per_line_row_without_its_message_seq_is_a_typed_error(store_url: str, transcripts_dir: Path) -> None:
    """A per-line row of an earlier revision stored without its message's content but whose message_seq is NULL
    (a damaged row) fails the export with LineCorrupt, the error every other damaged line gives, never a crash."""
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        packer = session_packer(store.db, sid)
        columns = block_columns(store.db, sid, 0, 1 << 60)
        lines = [line for first, _, raw in _rows(store, sid) for line in packer.unpack_block(first, raw, columns.get)]
        per_line = packer.pack_rows(
            [(sid, line.line_no, "side", None, line.seq, line.raw) for line in lines],
            {seq: [column_bytes(c) for c in values] for seq, values in columns.items()},
        )
        spliced = next(row for row in per_line if row[-1][0] in SPLICE_OF)
        damaged = [row if row is not spliced else (*row[:4], None, row[5]) for row in per_line]

        def swap(db: Any) -> None:
            db.execute("DELETE FROM source_lines WHERE session_id = :id AND line_no > 0", {"id": sid})
            db.insert_rows(
                "source_lines", ("session_id", "line_no", "kind", "entry_type", "message_seq", "raw"), damaged
            )

        store.db.run_write(swap)
        with pytest.raises(LineCorrupt, match="missing"):
            _export(store, sid)


def test_a_non_ascii_entry_type_survives_growth_imports_through_the_cli(empty_store_url: str, tmp_path: Path) -> None:
    """A line whose `type` is not ASCII: a block keeps its entry type's length in bytes, so the import of the
    grown file (which reads the last block back with its kinds) and the export still give every byte."""
    lines = _transcript(6)
    odd = json.dumps({"type": "réсумé-✓", "uuid": "odd-1", "data": "x"}, ensure_ascii=False).encode() + b"\n"
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"".join(lines[:3]) + odd)
    env = {**os.environ, "SESSIONSTORE_DB_URL": empty_store_url}
    assert run_cli_process("import", "claude-code", str(path), env=env).code == 0
    grown = b"".join(lines[:3]) + odd + b"".join(lines[3:])
    path.write_bytes(grown)
    assert claude_code_round_trip(empty_store_url, str(path), str(tmp_path / "back.jsonl")) == grown
