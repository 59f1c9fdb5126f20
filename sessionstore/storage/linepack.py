"""Imported source lines stored compressed: zstd per row, with a dictionary trained per session.

An imported Claude Code line is kept so the file can be exported byte for byte,
but most of a line (ids, cwd, version, git branch, the envelope around the
message) repeats from line to line, which per-row compression alone cannot see.
So a session with enough lines gets a zstd dictionary trained on its first
lines, stored as its `source_lines` row 0 (kind `zdict`): it is the session's
own data (its owner's, under row-level security; deleted with the session), and
every row stays one range read: `line_no > 0` is the file, in order.

Each stored `raw` starts with a codec byte, so rows written by any version stay
readable: RAW (the bytes follow), ZSTD (a zstd frame), ZSTD_DICT (a zstd frame
made with the session's dictionary; the frame names its dictionary id, and zstd refuses
another dictionary).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Sequence

import zstandard

from .errors import SessionStoreError

if TYPE_CHECKING:
    from .db import Database

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
#: The row holding a session's dictionary (the file's lines are numbered from 1).
DICT_LINE = 0
DICT_KIND = "zdict"
#: A session gets a dictionary when its first import batch has at least this many lines (it is trained on them).
TRAIN_MIN_LINES = 256
TRAIN_SAMPLES = 256
DICT_BYTES = 16_384
#: Fixed COVER parameters: zstd's search for the best ones costs 5x the time (0.3 s a session) for no gain on transcripts.
TRAIN_K, TRAIN_D = 400, 6
LEVEL = 3
#: Shorter lines are stored raw (a zstd frame header costs more than it saves).
MIN_PACKED = 48


class LineCorrupt(SessionStoreError):
    """A stored source line cannot be decoded (unknown codec, missing or wrong dictionary)."""


class LinePacker:
    """Packs and unpacks one session's source lines (with its dictionary, when it has one)."""

    def __init__(self, dictionary: bytes | None = None):
        self.dictionary = dictionary
        self._dict = zstandard.ZstdCompressionDict(dictionary) if dictionary else None
        self._compressor: zstandard.ZstdCompressor | None = None
        self._decompressor: zstandard.ZstdDecompressor | None = None
        self._plain_decompressor: zstandard.ZstdDecompressor | None = None

    @property
    def dict_id(self) -> int:
        """The dictionary's zstd id (0: none)."""
        return self._dict.dict_id() if self._dict is not None else 0

    def pack(self, raw: bytes) -> bytes:
        """`raw` with its codec byte: compressed when that is smaller."""
        if len(raw) >= MIN_PACKED:
            if self._compressor is None:
                self._compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=self._dict, write_content_size=True)
            packed = self._compressor.compress(raw)
            if len(packed) + 1 < len(raw):
                return bytes((ZSTD_DICT if self._dict is not None else ZSTD,)) + packed
        return b"\x00" + raw

    def unpack(self, stored: bytes) -> bytes:
        """The original line of a stored `raw`; raises LineCorrupt."""
        if not stored:
            raise LineCorrupt("an empty stored source line (no codec byte)")
        codec, body = stored[0], stored[1:]
        try:
            if codec == RAW:
                return body
            if codec == ZSTD:
                if self._plain_decompressor is None:
                    self._plain_decompressor = zstandard.ZstdDecompressor()
                return self._plain_decompressor.decompress(body)
            if codec == ZSTD_DICT:
                if self._dict is None:
                    raise LineCorrupt("a source line needs its session's dictionary, which is missing")
                if self._decompressor is None:
                    self._decompressor = zstandard.ZstdDecompressor(dict_data=self._dict)
                return self._decompressor.decompress(body)
        except zstandard.ZstdError as exc:
            raise LineCorrupt(f"a source line does not decompress: {exc}") from exc
        raise LineCorrupt(f"a source line has unknown codec {codec}")

    def pack_rows(self, rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
        """`source_lines` insert tuples (raw last) with raw packed."""
        return [(*row[:-1], self.pack(bytes(row[-1]))) for row in rows]


def train(lines: Sequence[bytes]) -> bytes | None:
    """A dictionary trained on `lines` (None when there are too few or zstd cannot train one)."""
    if len(lines) < TRAIN_MIN_LINES:
        return None
    try:
        samples: list[bytes | bytearray | memoryview] = list(lines[:TRAIN_SAMPLES])
        return zstandard.train_dictionary(DICT_BYTES, samples, k=TRAIN_K, d=TRAIN_D, level=LEVEL).as_bytes()
    except zstandard.ZstdError:
        return None


def session_packer(db: "Database", session_id: str) -> LinePacker:
    """The packer of a session's lines: with its dictionary row when it has one."""
    row = db.one(
        "SELECT raw FROM source_lines WHERE session_id = :id AND line_no = :n", {"id": session_id, "n": DICT_LINE}
    )
    return LinePacker(bytes(row[0]) if row is not None else None)


def dictionary_row(session_id: str, dictionary: bytes) -> tuple[object, ...]:
    """The `source_lines` row holding a session's dictionary (columns session_id..raw)."""
    return (session_id, DICT_LINE, DICT_KIND, None, None, dictionary)
