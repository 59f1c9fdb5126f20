"""Imported source lines are stored packed (zstd, a per-session dictionary), exported byte for byte, and vacuum gives space back."""

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
    ZSTD,
    ZSTD_DICT,
    LineCorrupt,
    LinePacker,
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
        assert {raw[0] for _, _, raw in rows[1:]} <= {RAW, ZSTD_DICT}
        assert sum(len(raw) for _, _, raw in rows) < len(source) / 3, "the lines are kept in a third of their bytes"
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == source


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
