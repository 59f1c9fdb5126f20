"""Imported source lines are stored packed (zstd, a per-session dictionary; a message line without the content
its messages row holds; from revision 0015 in blocks of lines, tests/test_line_blocks.py), exported byte for byte,
and vacuum gives space back."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.importing import import_file
from sessionstore.storage.codecs.linepack import (
    BLOCK,
    COLUMNS,
    DICT_KIND,
    DICT_LINE,
    MIN_SLICE,
    MIN_SPLICED,
    RAW,
    SEGMENTS_DICT,
    SEGMENTS_RAW,
    SEGMENTS_ZSTD,
    SPLICE_DICT,
    SPLICE_OF,
    SPLICE_RAW,
    SPLICE_ZSTD,
    ZSTD,
    ZSTD_DICT,
    BlockLine,
    LineCorrupt,
    LinePacker,
    block_columns,
    block_head,
    column_bytes,
    session_lines,
    session_packer,
    train,
)
from sessionstore.storage.upkeep.vacuum import vacuum
from tests.support.cli import run_cli

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _lines(n: int, tag: str = "s") -> list[bytes]:
    return [
        json.dumps({"type": "progress", "uuid": f"{tag}-{i:06d}", "cwd": "/home/me/project", "step": i}).encode()
        + b"\n"
        for i in range(n)
    ]


def test_codecs_round_trip_and_say_which_they_are() -> None:
    lines = _lines(400)
    dictionary = train(lines)
    assert dictionary is not None
    with_dict, plain = LinePacker(dictionary), LinePacker()
    for line in [*lines, b"", b"x", b"\x00\xff not utf-8 \n" * 10]:
        assert with_dict.unpack(with_dict.pack(line)) == line
        assert plain.unpack(plain.pack(line)) == line
    assert with_dict.pack(lines[0])[0] == ZSTD_DICT
    assert plain.pack(lines[0] * 3)[0] == ZSTD
    assert plain.pack(b"short")[0] == RAW
    assert len(with_dict.pack(lines[7])) < len(lines[7]) / 2, "a dictionary packs even a short line"
    assert plain.dict_id == 0
    assert with_dict.dict_id == zstandard.get_frame_parameters(with_dict.pack(lines[0])[1:]).dict_id != 0


def test_too_few_lines_train_no_dictionary() -> None:
    assert train(_lines(10)) is None


def test_undecodable_rows_are_a_typed_error() -> None:
    dictionary = train(_lines(400))
    packed = LinePacker(dictionary).pack(_lines(1)[0])
    with pytest.raises(LineCorrupt, match="dictionary"):
        LinePacker().unpack(packed)
    other = train(_lines(400, "other"))
    assert other is not None and zstandard.ZstdCompressionDict(other).dict_id() != LinePacker(dictionary).dict_id
    with pytest.raises(LineCorrupt, match="does not decompress"):
        LinePacker(other).unpack(packed)
    with pytest.raises(LineCorrupt, match="unknown codec"):
        LinePacker().unpack(b"\x09abc")
    with pytest.raises(LineCorrupt, match="decompress"):
        LinePacker().unpack(bytes((ZSTD,)) + b"not a frame")
    with pytest.raises(LineCorrupt):
        LinePacker().unpack(b"")


#: A Claude Code message line and its content as `messages.content_json` holds it (compact, non-ASCII kept).
CONTENT = '[{"type":"text","text":"Fixed the flaky test: the fixture now waits for the port. é ✓"}]'
LINE = (
    '{"parentUuid":"p-1","type":"assistant","message":{"role":"assistant","content":' + CONTENT + "},"
    '"uuid":"u-2","timestamp":"2026-01-01T00:00:00.000Z"}\n'
).encode()


def test_a_line_carrying_its_message_content_is_stored_without_it() -> None:
    dictionary = train(_lines(400))
    with_dict, plain = LinePacker(dictionary), LinePacker()
    short = b'{"message":{"content":' + CONTENT.encode() + b"}}\n"
    cases = ((with_dict, LINE, SEGMENTS_DICT), (plain, LINE, SEGMENTS_ZSTD), (plain, short, SEGMENTS_RAW))
    for packer, line, codec in cases:
        packed = packer.pack(line, CONTENT)
        assert packed[0] == codec, (packed[0], codec)
        assert CONTENT.encode() not in packed
        assert len(packed) < len(packer.pack(line)), "the spliced form is the smaller one"
        assert packer.unpack(packed, CONTENT) == line
        assert packer.unpack(packed, CONTENT.encode()) == line, "the content as fetched bytes too"
    assert SPLICE_OF == {
        SPLICE_RAW: RAW,
        SPLICE_ZSTD: ZSTD,
        SPLICE_DICT: ZSTD_DICT,
        SEGMENTS_RAW: RAW,
        SEGMENTS_ZSTD: ZSTD,
        SEGMENTS_DICT: ZSTD_DICT,
    }


def _content_only(packer: LinePacker, line: bytes, content: bytes) -> bytes:
    """`line` as revision 0012 first stored it (codec 3-5: offset, CRC-32, the rest), written out by hand."""
    at = line.index(content)
    inner = packer.pack(line[:at] + line[at + len(content) :])
    return bytes((inner[0] + SPLICE_RAW,)) + bytes((at,)) + zlib.crc32(line).to_bytes(4, "big") + inner[1:]


def test_lines_stored_with_the_content_alone_spliced_stay_readable() -> None:
    """Codecs 3-5 (a store written at 0012 before segments) read back, and a changed content is still caught."""
    short = b'{"message":{"content":' + CONTENT.encode() + b"}}\n"
    for packer, line in ((LinePacker(train(_lines(400))), short), (LinePacker(), short), (LinePacker(), short * 3)):
        stored = _content_only(packer, line, CONTENT.encode())
        assert stored[0] in (SPLICE_RAW, SPLICE_ZSTD, SPLICE_DICT)
        assert packer.unpack(stored, CONTENT, '{"ignored":1}', None) == line
        with pytest.raises(LineCorrupt, match="does not match"):
            packer.unpack(stored, CONTENT.replace("flaky", "FLAKY"))
    every = ((LinePacker(train(_lines(400))), LINE), (LinePacker(), LINE), (LinePacker(), short))
    assert {_content_only(packer, line, CONTENT.encode())[0] for packer, line in every} == {
        SPLICE_RAW,
        SPLICE_ZSTD,
        SPLICE_DICT,
    }


def test_content_only_lines_ending_with_their_content_or_made_of_it_stay_readable() -> None:
    """Revision 0012 cut the content out wherever it occurred: a line ending with it (offset at the end of the
    rest) and a line that is nothing but it (an empty rest) read back byte for byte too."""
    content = CONTENT.encode()
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        for line in (b'{"message":{"content":' + content, content):
            stored = _content_only(packer, line, content)
            assert stored[0] == SPLICE_RAW
            assert packer.unpack(stored, CONTENT) == line


#: A Claude Code tool result line: its message's content, usage and toolUseResult as the messages row holds them.
USAGE = '{"input_tokens":4,"cache_read_input_tokens":18001,"output_tokens":120,"service_tier":"standard"}'
TOOL_RESULT = '{"stdout":"12 passed in 0.41s — all green","stderr":"","interrupted":false,"isImage":false}'
METADATA = '{"cwd":"/home/me/project","toolUseResult":' + TOOL_RESULT + ',"version":"2.1.0"}'
ENVELOPE = (
    '{"parentUuid":"p-1","cwd":"/home/me/project","type":"user","message":{"role":"user","content":' + CONTENT + ","
    '"usage":' + USAGE + '},"uuid":"u-3","toolUseResult":' + TOOL_RESULT + ',"version":"2.1.0"}\n'
).encode()


def test_a_line_is_stored_without_its_usage_and_the_metadata_values_it_repeats() -> None:
    """Content and usage whole and the toolUseResult as a slice of metadata_json: each one needed to read it back."""
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        packed = packer.pack(ENVELOPE, CONTENT, USAGE, METADATA)
        assert packed[0] in (SEGMENTS_ZSTD, SEGMENTS_DICT)
        assert packer.unpack(packed, CONTENT, USAGE, METADATA) == ENVELOPE
        assert packer.unpack(packed, CONTENT.encode(), USAGE.encode(), METADATA.encode()) == ENVELOPE
        assert len(packed) < len(packer.pack(ENVELOPE, CONTENT)), "smaller than the content alone cut out"
        with pytest.raises(LineCorrupt, match="usage_json, which is missing"):
            packer.unpack(packed, CONTENT, None, METADATA)
        with pytest.raises(LineCorrupt, match="metadata_json, which is missing"):
            packer.unpack(packed, CONTENT, USAGE, None)
        with pytest.raises(LineCorrupt, match="past the end of its message's metadata_json"):
            packer.unpack(packed, CONTENT, USAGE, METADATA[:40])


def test_a_column_not_verbatim_in_the_line_is_left_in_it_and_the_others_still_cut() -> None:
    """Usage spaced otherwise, a metadata value escaped otherwise, a usage inside the content: fewer segments."""
    spaced = USAGE.replace(":", ": ")
    escaped = METADATA.replace("—", "\\u2014")
    # The usage's text occurs only inside the content: the content is cut out, the usage is not cut from inside it.
    holding = "[" + USAGE + "]"
    usage_in_content = ENVELOPE.replace(CONTENT.encode(), holding.encode()).replace(USAGE.encode() + b"}", b"{}}")
    assert usage_in_content.count(USAGE.encode()) == 1
    packer = LinePacker()
    for line, content, usage, metadata, needs in (
        (ENVELOPE, CONTENT, spaced, METADATA, (True, False, True)),
        (ENVELOPE, CONTENT, USAGE, escaped, (True, True, False)),
        (ENVELOPE, CONTENT, spaced, escaped, (True, False, False)),
        (usage_in_content, holding, USAGE, METADATA, (True, False, True)),
        (ENVELOPE.replace(CONTENT.encode(), b"[]"), CONTENT, USAGE, METADATA, (False, True, True)),
    ):
        packed = packer.pack(line, content, usage, metadata)
        assert packer.unpack(packed, content, usage, metadata) == line
        given = [c if need else None for c, need in zip((content, usage, metadata), needs, strict=True)]
        assert packer.unpack(packed, *given) == line, needs
        for i, need in enumerate(needs):
            if need:
                with pytest.raises(LineCorrupt, match="missing"):
                    packer.unpack(packed, *[None if j == i else c for j, c in enumerate(given)])


def test_a_changed_column_is_a_typed_error_never_other_bytes() -> None:
    """Every one-byte change of any column a line was cut from, and a shorter or longer column, gives LineCorrupt."""
    packer = LinePacker()
    packed = packer.pack(ENVELOPE, CONTENT, USAGE, METADATA)
    columns = [CONTENT.encode(), USAGE.encode(), METADATA.encode()]
    for i, column in enumerate(columns):
        variants = [column[:k] + bytes((column[k] ^ 0x01,)) + column[k + 1 :] for k in range(len(column))]
        variants += [column[:-1], column + b" ", b"x" + column, column[1:]]
        for variant in variants:
            given = [variant if j == i else c for j, c in enumerate(columns)]
            try:
                line = packer.unpack(packed, *given)
            except LineCorrupt:
                continue
            # A change in metadata_json outside the slice the line was cut from leaves the line as it was.
            assert i == 2 and line == ENVELOPE, (i, variant)


def test_a_line_without_its_content_verbatim_is_stored_whole_and_round_trips() -> None:
    """Content escaped otherwise, too short, absent or next to bytes that are not UTF-8: the line is packed whole."""
    escaped = CONTENT.replace("é", "\\u00e9")
    bad_bytes = LINE.replace(b"Fixed", b"\xff\xfe") + b"\x00"
    cases = [(LINE, escaped), (LINE, '"ok"'), (LINE, '"not in the line at all, long enough"'), (bad_bytes, CONTENT)]
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        for line, content in cases:
            packed = packer.pack(line, content)
            assert packed[0] in (RAW, ZSTD, ZSTD_DICT), content
            assert packer.unpack(packed, content) == line
            assert packer.unpack(packed) == line, "a whole line needs no content to be read"


def test_a_spliced_line_whose_content_changed_or_went_missing_is_a_typed_error() -> None:
    packer = LinePacker()
    packed = packer.pack(LINE, CONTENT)
    assert packed[0] in SPLICE_OF
    with pytest.raises(LineCorrupt, match="missing"):
        packer.unpack(packed)
    with pytest.raises(LineCorrupt, match="does not match"):
        packer.unpack(packed, CONTENT.replace("flaky", "FLAKY"))  # same length: only the checksum tells
    with pytest.raises(LineCorrupt, match="does not match"):
        packer.unpack(packed, CONTENT[:-2])
    with pytest.raises(LineCorrupt, match="offset"):
        packer.unpack(bytes((SPLICE_RAW,)) + b"\xff\xff", CONTENT)
    with pytest.raises(LineCorrupt, match="truncated"):
        packer.unpack(bytes((SPLICE_RAW, 5, 0)), CONTENT)


def _stored(store: SessionStore, sid: str) -> list[tuple[int, str, bytes]]:
    rows = store.db.all(
        "SELECT line_no, kind, raw FROM source_lines WHERE session_id = :id ORDER BY line_no", {"id": sid}
    )
    return [(int(n), kind, bytes(raw)) for n, kind, raw in rows]


def test_an_import_stores_lines_packed_with_a_dictionary_and_exports_them_byte_for_byte(
    store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    source = (transcripts_dir / SPOTTER).read_bytes()
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        rows = _stored(store, sid)
        assert rows[0][:2] == (DICT_LINE, DICT_KIND), "the session's dictionary is its row 0"
        assert {raw[0] for _, _, raw in rows[1:]} == {BLOCK}
        assert sum(len(raw) for _, _, raw in rows) < len(source) / 4, "the lines are kept in a quarter of their bytes"
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == source


def _blocks(store: SessionStore, sid: str) -> list[tuple[int, bytes]]:
    """(first line, raw) of each stored block of the session, in order."""
    rows = store.db.all(
        "SELECT line_no, raw FROM source_lines WHERE session_id = :id AND line_no > 0 ORDER BY line_no", {"id": sid}
    )
    return [(int(n), bytes(raw)) for n, raw in rows]


def _block_lines(store: SessionStore, sid: str) -> list[BlockLine]:
    """Every stored line of the session with its message's columns, read block by block."""
    packer, columns = session_packer(store.db, sid), block_columns(store.db, sid, 0, 1 << 60)
    return [line for first, raw in _blocks(store, sid) for line in packer.unpack_block(first, raw, columns.get)]


def _without(columns: Any, column: int) -> Any:
    """`columns` (as fetched) with one of them NULL."""
    return None if columns is None else tuple(None if i == column else c for i, c in enumerate(columns))


def test_an_import_stores_message_lines_spliced_in_fewer_bytes(store_url: str, transcripts_dir: Path) -> None:
    """On a real transcript the message lines are stored without their content, in far fewer bytes."""
    source = (transcripts_dir / SPOTTER).read_bytes().splitlines(keepends=True)
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        packer = session_packer(store.db, sid)
        lines = _block_lines(store, sid)
        assert [line.raw for line in lines] == source
        stored = sum(len(raw) for _, raw in _blocks(store, sid))
        whole = sum(len(row[-1]) for row in packer.pack_blocks(sid, [line._replace(columns=None) for line in lines]))
        assert stored < 0.75 * whole, (stored, whole)
        assert [raw for _, raw in session_lines(store.db, sid, batch=7)] == source


def test_an_import_stores_message_lines_without_their_usage_and_tool_results(
    store_url: str, transcripts_dir: Path
) -> None:
    """On a real transcript the usage and the toolUseResult metadata_json keeps are cut from their lines too."""
    source = (transcripts_dir / SPOTTER).read_bytes().splitlines(keepends=True)
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        packer, columns = session_packer(store.db, sid), block_columns(store.db, sid, 0, 1 << 60)
        blocks = _blocks(store, sid)
        needs = {"usage": 0, "metadata": 0}
        for first, raw in blocks:
            for key, column in (("usage", 1), ("metadata", 2)):
                try:
                    packer.unpack_block(first, raw, lambda seq, c=column: _without(columns.get(seq), c))
                except LineCorrupt:
                    needs[key] += 1
        assert needs["usage"] > 0.3 * len(blocks) and needs["metadata"] > 0.3 * len(blocks), (needs, len(blocks))
        content_only = packer.pack_blocks(
            sid, [line._replace(columns=_without(_without(line.columns, 1), 2)) for line in _block_lines(store, sid)]
        )
        stored = sum(len(raw) for _, raw in blocks)
        assert stored < 0.9 * sum(len(row[-1]) for row in content_only), stored  # blocks share the rest
        assert [raw for _, raw in session_lines(store.db, sid, batch=7)] == source


def _spliced_message(store: SessionStore, sid: str, column: str) -> tuple[int, str]:
    """The seq and `column` of a message whose line was stored without part of that column."""
    packer, columns = session_packer(store.db, sid), block_columns(store.db, sid, 0, 1 << 60)
    index = COLUMNS.index(column)
    for first, raw in _blocks(store, sid):
        head = block_head(raw)
        for seq in range(head.base, head.last + 1) if head.base else ():
            try:
                packer.unpack_block(
                    first, raw, lambda s, n=seq: _without(columns.get(s), index) if s == n else columns.get(s)
                )
            except LineCorrupt:
                query = f"SELECT unpacked({column}) FROM messages WHERE session_id = :id AND seq = :seq"
                return seq, store.db.one(query, {"id": sid, "seq": seq})[0]
    raise AssertionError(f"no line was stored without its {column}")


@pytest.mark.parametrize("column", ["usage_json", "metadata_json"])
def test_a_changed_usage_or_metadata_fails_the_export(store_url: str, transcripts_dir: Path, column: str) -> None:
    """Export gives LineCorrupt, never other bytes, when a usage or metadata a line was cut from changed."""
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        seq, value = _spliced_message(store, sid, column)
        update = f"UPDATE messages SET {column} = :c WHERE session_id = :id AND seq = :seq"
        for changed in (value.replace("0", "1").replace("e", "f"), value[: len(value) // 2]):
            assert changed != value
            params = {"c": changed, "id": sid, "seq": seq}
            store.db.run_write(lambda db, params=params: db.execute(update, params).close())
            with pytest.raises(LineCorrupt):
                export_claude_code(store.get(sid), io.BytesIO())


def test_column_bytes_is_utf8_of_text_and_bytes_as_they_are() -> None:
    assert column_bytes("é✓") == "é✓".encode() and column_bytes(b"\xc3\xa9") == b"\xc3\xa9"
    assert column_bytes(memoryview(b"ab")) == b"ab" and column_bytes(None) is None


def test_a_spliced_line_whose_message_content_changed_or_is_gone_fails_the_export(
    store_url: str, transcripts_dir: Path
) -> None:
    """Export gives the typed LineCorrupt, never other bytes, when the content a line was spliced from is not there."""
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        seq, content = store.db.one(
            "SELECT m.seq, unpacked(m.content_json) FROM source_lines s JOIN messages m "
            "ON m.session_id = s.session_id AND m.seq = s.message_seq "
            "WHERE s.session_id = :id AND LENGTH(unpacked(m.content_json)) > 100 ORDER BY s.line_no LIMIT 1",
            {"id": sid},
        )
        changed = content.replace("a", "b", 1) if "a" in content else content[::-1]
        store.db.run_write(
            lambda db: db.execute(
                "UPDATE messages SET content_json = :c WHERE session_id = :id AND seq = :seq",
                {"c": changed, "id": sid, "seq": seq},
            ).close()
        )
        with pytest.raises(LineCorrupt, match="does not match"):
            export_claude_code(store.get(sid), io.BytesIO())
        store.db.run_write(
            lambda db: db.execute(
                "DELETE FROM messages WHERE session_id = :id AND seq = :seq", {"id": sid, "seq": seq}
            ).close()
        )
        with pytest.raises(LineCorrupt, match="missing"):
            export_claude_code(store.get(sid), io.BytesIO())


def test_a_grown_file_packs_its_new_lines_with_the_same_dictionary(
    store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    lines = (transcripts_dir / SPOTTER).read_bytes().splitlines(keepends=True)
    path = tmp_path / "grown.jsonl"
    path.write_bytes(b"".join(lines[:1200]))
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        dictionary = session_packer(store.db, sid).dictionary
        path.write_bytes(b"".join(lines))
        assert import_file(store, str(path), source="claude-code").status == "grown"
        assert session_packer(store.db, sid).dictionary == dictionary
        assert [n for n, kind, _ in _stored(store, sid) if kind == DICT_KIND] == [DICT_LINE]
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == b"".join(lines)


def test_a_half_written_message_line_completed_later_is_stored_spliced(store_url: str, tmp_path: Path) -> None:
    """The growth import drops the kept half line (`line_no > lines_done`, inside the last block) and stores the
    whole one spliced, in the same single block."""
    lines = _message_lines(40)
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:30])
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        stored = _block_lines(store, sid)
        assert (stored[-1].line_no, stored[-1].seq, stored[-1].raw) == (40, None, lines[-1][:30]), "kept as it is"
        path.write_bytes(b"".join(lines))
        assert import_file(store, str(path), source="claude-code").status == "grown"
        assert len(_blocks(store, sid)) == 1
        last = _block_lines(store, sid)[-1]
        assert last.line_no == 40 and last.seq is not None and last.raw == lines[-1]
        (first, raw), columns = _blocks(store, sid)[0], block_columns(store.db, sid, 0, 1 << 60)
        with pytest.raises(LineCorrupt, match="missing"):
            session_packer(store.db, sid).unpack_block(
                first, raw, lambda s: _without(columns.get(s), 0) if s == last.seq else columns.get(s)
            )
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == b"".join(lines)


def _message_lines(n: int) -> list[bytes]:
    """`n` compact Claude Code lines, user and assistant in turn, each content long enough to be spliced."""
    out, parent = [], None
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        line = {
            "parentUuid": parent,
            "type": role,
            "uuid": f"00000000-0000-4000-8000-{i:012d}",
            "sessionId": "growing",
            "timestamp": f"2026-01-01T00:00:{i % 60:02d}.000Z",
            "message": {"role": role, "content": [{"type": "text", "text": f"turn {i}: the build is green é"}]},
        }
        out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        parent = line["uuid"]
    return out


def test_delete_removes_the_lines_and_the_dictionary_and_vacuum_gives_the_space_back(
    store_url: str, transcripts_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        store.delete(sid)
        left = store.db.one("SELECT COUNT(*) FROM source_lines WHERE session_id = :id", {"id": sid})[0]
        assert left == 0
        steps: list[tuple[int, int, str]] = []
        result = vacuum(store, lambda done, total, what: steps.append((done, total, what)))
        assert steps[-1][0] == steps[-1][1] > 0 and [s[0] for s in steps] == list(range(len(steps)))
        if store_url.startswith("sqlite"):
            assert result.bytes_after < result.bytes_before / 2, result
    shown = run_cli(capsys, "db", "vacuum", "--db", store_url, "--json", "--progress")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["bytes_after"] > 0


def _text(tag: str, n: int) -> str:
    """`n` characters that hardly compress (base64 of a hash chain), different for each `tag`."""
    out, seed = "", tag.encode()
    while len(out) < n:
        seed = hashlib.sha256(seed).digest()
        out += base64.urlsafe_b64encode(seed).decode().rstrip("=")
    return out[:n]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tool_line(content: str, usage: str | None = None, **entry: Any) -> bytes:
    """A Claude Code user line holding `content` (and `usage`) verbatim, with the entry fields `entry`."""
    message = '{"role":"user","content":' + content + (',"usage":' + usage if usage else "") + "}"
    envelope = '{"parentUuid":"' + _text("parent", 36) + '","cwd":"/home/me/project","type":"user","message":'
    fields = "".join("," + _compact(key) + ":" + _compact(value) for key, value in entry.items())
    return (envelope + message + ',"uuid":"' + _text("uuid", 36) + '"' + fields + "}\n").encode()


def test_columns_exactly_as_long_as_the_minimums_are_stored_once() -> None:
    """A content of MIN_SPLICED bytes and a metadata value of MIN_SLICE bytes (a string of MIN_SLICE - 2
    characters) are cut out of their line: the documented minimums are included, so the line packs smaller."""
    content = _compact(_text("content", MIN_SPLICED - 2))
    value = _text("slug", MIN_SLICE - 2)
    metadata = _compact({"cwd": "/home/me/project", "slug": value})
    assert len(content.encode()) == MIN_SPLICED and len(_compact(value).encode()) == MIN_SLICE
    line = _tool_line(content, slug=value)
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        whole = packer.pack(line)
        content_cut = packer.pack(line, content)
        both_cut = packer.pack(line, content, None, metadata)
        assert packer.unpack(both_cut, content, None, metadata) == line
        assert len(content_cut) < len(whole), "a content of MIN_SPLICED bytes is not stored twice"
        assert len(both_cut) < len(content_cut) - MIN_SLICE / 2, "a value of MIN_SLICE bytes is not stored twice"


def test_a_line_starting_with_its_content_is_stored_without_it() -> None:
    """The content's bytes are cut out wherever they are in the line, at its very first byte too."""
    content = _compact([{"type": "text", "text": _text("first", 120)}])
    line = content.encode() + b"\n"
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        packed = packer.pack(line, content)
        assert packer.unpack(packed, content) == line
        assert len(packed) < 32 < len(packer.pack(line)), len(packed)


def test_metadata_values_nested_in_each_other_are_each_stored_once() -> None:
    """An entry field holding another field's value (a tool result quoting a summary) and that value again in its
    own place: the longer is cut whole and the shorter where it repeats, so neither is stored."""
    summary = _text("summary", 150)
    result = {"stdout": summary, "exitCode": 0}
    metadata = _compact({"toolUseResult": result, "summary": summary})
    content = _compact([{"type": "tool_result", "content": "done", "tool_use_id": "toolu_01"}])
    line = _tool_line(content, toolUseResult=result, summary=summary)
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        packed = packer.pack(line, content, None, metadata)
        assert packer.unpack(packed, content, None, metadata) == line
        assert len(packed) < len(packer.pack(line, content)) - len(summary) / 2, len(packed)


def test_a_tool_error_repeated_in_the_content_and_the_tool_use_result_is_stored_once() -> None:
    """A failed tool's text is both the tool_result's content and the `toolUseResult` string: the content is cut,
    and the metadata value, whose first occurrence is inside the content, is cut where it repeats."""
    error = "Error: Exit code 1\n" + _text("stderr", 400)
    content = _compact([{"type": "tool_result", "content": error, "is_error": True, "tool_use_id": "toolu_01"}])
    metadata = _compact({"toolUseResult": error, "sourceToolAssistantUUID": _text("source", 36)})
    line = _tool_line(content, toolUseResult=error, sourceToolAssistantUUID=_text("source", 36))
    for packer in (LinePacker(train(_lines(400))), LinePacker()):
        packed = packer.pack(line, content, None, metadata)
        assert packer.unpack(packed, content, None, metadata) == line
        assert len(packed) < len(packer.pack(line, content)) - len(error) / 2, len(packed)


@pytest.mark.timeout(60)
def test_columns_back_to_back_in_a_line_are_each_stored_once() -> None:
    """A (hostile) line holding its content and usage with nothing between them, in either order: packing ends,
    each is cut out, and the line reads back byte for byte."""
    content = _compact([{"type": "text", "text": _text("adjacent", 100)}])
    usage = _compact({"input_tokens": 4, "note": _text("usage", 60)})
    for line in ((content + usage).encode(), b"x" + (usage + content).encode() + b"\r\n"):
        for packer in (LinePacker(train(_lines(400))), LinePacker()):
            packed = packer.pack(line, content, usage)
            assert packer.unpack(packed, content, usage) == line
            assert len(packed) < len(packer.pack(line, content)) - len(usage) / 2, line[:20]


@functools.cache
def _packers() -> tuple[LinePacker, LinePacker]:
    return LinePacker(train(_lines(400))), LinePacker()


_TEXT = st.text(st.characters(), max_size=90)
_VALUE = st.one_of(_TEXT, st.dictionaries(st.text(max_size=6), _TEXT, max_size=3), st.lists(_TEXT, max_size=3))
_HOSTILE = st.sampled_from([b"", b"\xef\xbb\xbf", b"\r\n", b"\n", b"\r", b"\x00", b"\xff\xfe", b"{", b'"', b"}", b","])


@pytest.mark.timeout(120)
@settings(max_examples=200, deadline=None)
@given(
    content=_VALUE,
    usage=st.dictionaries(st.text(max_size=6), _TEXT, max_size=3),
    metadata=st.dictionaries(st.text(max_size=6), _VALUE, max_size=3),
    order=st.lists(st.one_of(st.integers(0, 5), _HOSTILE, st.binary(max_size=40)), max_size=12),
    as_bytes=st.booleans(),
)
def test_any_line_round_trips_whatever_columns_it_repeats(
    content: Any, usage: dict[str, str], metadata: dict[str, Any], order: list[int | bytes], as_bytes: bool
) -> None:
    """A line made of its columns' texts (whole, metadata values, in any order, repeated, back to back) and
    hostile bytes (BOM, CR, NUL, not UTF-8, stray JSON punctuation) reads back byte for byte, per line and in a
    block, with the columns given as text or as fetched bytes (a lone surrogate has no UTF-8 and is never cut)."""
    texts = [_compact(content), _compact(usage), _compact(metadata), *(_compact(v) for v in metadata.values())]
    pieces = [texts[p % len(texts)].encode("utf-8", "surrogatepass") if isinstance(p, int) else p for p in order]
    line = b"".join(pieces)
    columns: list[Any] = texts[:3]
    if as_bytes:
        columns = [text.encode("utf-8", "surrogatepass") for text in columns]
    for packer in _packers():
        assert packer.unpack(packer.pack(line, *columns), *columns) == line
        lines = [BlockLine(1, 5, line, columns), BlockLine(2, None, line), BlockLine(4, 6, line, columns)]
        rows = packer.pack_blocks("s", lines)
        out = [got for row in rows for got in packer.unpack_block(row[1], row[6], lambda seq: columns)]
        assert [(got.line_no, got.raw) for got in out] == [(1, line), (2, line), (4, line)]
