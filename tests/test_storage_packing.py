"""Imported source lines are stored packed (zstd, a per-session dictionary; a message line without the content
its messages row holds), exported byte for byte, and vacuum gives space back."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import zstandard

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.importing import import_file
from sessionstore.storage.linepack import (
    DICT_KIND,
    DICT_LINE,
    RAW,
    SPLICE_DICT,
    SPLICE_OF,
    SPLICE_RAW,
    SPLICE_ZSTD,
    ZSTD,
    ZSTD_DICT,
    LineCorrupt,
    LinePacker,
    session_lines,
    session_packer,
    train,
)
from sessionstore.storage.vacuum import vacuum
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
    for packer, line, codec in ((with_dict, LINE, SPLICE_DICT), (plain, LINE, SPLICE_ZSTD), (plain, short, SPLICE_RAW)):
        packed = packer.pack(line, CONTENT)
        assert packed[0] == codec, (packed[0], codec)
        assert CONTENT.encode() not in packed
        assert len(packed) < len(packer.pack(line)), "the spliced form is the smaller one"
        assert packer.unpack(packed, CONTENT) == line
    assert SPLICE_OF == {SPLICE_RAW: RAW, SPLICE_ZSTD: ZSTD, SPLICE_DICT: ZSTD_DICT}


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
        assert {raw[0] for _, _, raw in rows[1:]} <= {RAW, ZSTD_DICT, SPLICE_RAW, SPLICE_DICT}
        assert sum(len(raw) for _, _, raw in rows) < len(source) / 4, "the lines are kept in a quarter of their bytes"
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == source


def test_an_import_stores_message_lines_spliced_in_fewer_bytes(store_url: str, transcripts_dir: Path) -> None:
    """On a real transcript nearly every message line is stored without its content, in far fewer bytes."""
    source = (transcripts_dir / SPOTTER).read_bytes().splitlines(keepends=True)
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(transcripts_dir / SPOTTER), source="claude-code").session_id
        packer = session_packer(store.db, sid)
        rows = store.db.all(
            "SELECT line_no, raw FROM source_lines WHERE session_id = :id AND message_seq IS NOT NULL", {"id": sid}
        )
        stored = [bytes(raw) for _, raw in rows]
        whole = [packer.pack(source[int(n) - 1]) for n, _ in rows]  # the same lines packed as before splicing
        assert sum(raw[0] in SPLICE_OF for raw in stored) > 0.95 * len(stored)
        assert sum(map(len, stored)) < 0.75 * sum(map(len, whole)), (sum(map(len, stored)), sum(map(len, whole)))
        assert [raw for _, raw in session_lines(store.db, sid, batch=7)] == source


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
    """The growth import drops the kept half line (`line_no > lines_done`) and stores the whole one spliced."""
    lines = _message_lines(40)
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:30])
    with SessionStore.open(store_url) as store:
        sid = import_file(store, str(path), source="claude-code").session_id
        line_40 = "SELECT kind, raw FROM source_lines WHERE session_id = :id AND line_no = 40"
        kind, half = store.db.one(line_40, {"id": sid})
        assert kind == "bad" and bytes(half)[0] not in SPLICE_OF, "the half line is kept as it is"
        path.write_bytes(b"".join(lines))
        assert import_file(store, str(path), source="claude-code").status == "grown"
        kind, whole = store.db.one(line_40, {"id": sid})
        assert kind == "message" and bytes(whole)[0] in SPLICE_OF
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
