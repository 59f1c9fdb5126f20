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

A line that carries a message also holds that message's content, which
`messages.content_json` keeps already (messages rows are never updated). When
the content's UTF-8 bytes occur verbatim in the line, only the rest is stored
(one copy of each byte): SPLICE_RAW, SPLICE_ZSTD and SPLICE_DICT are RAW, ZSTD
and ZSTD_DICT of `prefix + suffix`, their body preceded by the offset the
content goes back in (a varint) and the CRC-32 of the whole line, so a content
that changed or went missing is a LineCorrupt, never wrong bytes. A reader gets
the content by joining messages on (session_id, seq = message_seq) in the same
range read (`session_lines`).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import zstandard

from .errors import SessionStoreError

if TYPE_CHECKING:
    from .db import Database

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
#: The same three for a line stored without its message's content (spliced back in when read).
SPLICE_RAW, SPLICE_ZSTD, SPLICE_DICT = 3, 4, 5
#: What each spliced codec stores the rest of the line as.
SPLICE_OF = {SPLICE_RAW: RAW, SPLICE_ZSTD: ZSTD, SPLICE_DICT: ZSTD_DICT}
#: A content shorter than this is left in its line (the offset and checksum would cost about as much).
MIN_SPLICED = 16
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
    """A stored source line cannot be decoded (unknown codec, missing or wrong dictionary, or a spliced line whose
    message content is missing or not the one it was stored without)."""


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

    def pack(self, raw: bytes, content_json: str | None = None) -> bytes:
        """`raw` with its codec byte: without `content_json` when it occurs in it, compressed when that is smaller."""
        if content_json is not None:
            spliced = self._splice(raw, content_json)
            if spliced is not None:
                return spliced
        return self._pack_whole(raw)

    def _pack_whole(self, raw: bytes) -> bytes:
        """RAW, ZSTD or ZSTD_DICT of `raw`, whichever is shortest."""
        if len(raw) >= MIN_PACKED:
            if self._compressor is None:
                self._compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=self._dict, write_content_size=True)
            packed = self._compressor.compress(raw)
            if len(packed) + 1 < len(raw):
                return bytes((ZSTD_DICT if self._dict is not None else ZSTD,)) + packed
        return b"\x00" + raw

    def _splice(self, raw: bytes, content_json: str) -> bytes | None:
        """`raw` stored without the content it carries, or None when it does not carry it verbatim.

        The spliced form is kept only when it unpacks to `raw` exactly (checked here, at pack time).
        """
        try:
            content = content_json.encode("utf-8")
        except UnicodeEncodeError:
            return None
        if len(content) < MIN_SPLICED:
            return None
        at = raw.find(content)
        if at < 0:
            return None
        inner = self._pack_whole(raw[:at] + raw[at + len(content) :])
        stored = bytes((inner[0] + SPLICE_RAW,)) + _varint(at) + zlib.crc32(raw).to_bytes(4, "big") + inner[1:]
        try:
            if self.unpack(stored, content) != raw:
                return None
        except LineCorrupt:
            return None
        return stored

    def unpack(self, stored: bytes, content_json: str | bytes | None = None) -> bytes:
        """The original line of a stored `raw` (`content_json`: its message's, as text or UTF-8, for a spliced line).

        Raises LineCorrupt.
        """
        if not stored:
            raise LineCorrupt("an empty stored source line (no codec byte)")
        codec, body = stored[0], stored[1:]
        if codec in SPLICE_OF:
            return self._unsplice(SPLICE_OF[codec], body, content_json)
        return self._decode(codec, body)

    def _unsplice(self, codec: int, body: bytes, content_json: str | bytes | None) -> bytes:
        """A spliced line: its rest decoded, the message's content put back at its offset, the checksum checked."""
        if content_json is None:
            raise LineCorrupt("a source line needs its message's content, which is missing")
        at, start = _read_varint(body)
        if len(body) < start + 4:
            raise LineCorrupt("a spliced source line is truncated")
        crc = int.from_bytes(body[start : start + 4], "big")
        rest = self._decode(codec, body[start + 4 :])
        if at > len(rest):
            raise LineCorrupt("a spliced source line's offset is past its end")
        content = content_json.encode("utf-8") if isinstance(content_json, str) else content_json
        line = b"".join((rest[:at], content, rest[at:]))
        if zlib.crc32(line) != crc:
            raise LineCorrupt("a source line does not match its message's content (changed since the import?)")
        return line

    def _decode(self, codec: int, body: bytes) -> bytes:
        """The bytes a RAW, ZSTD or ZSTD_DICT body holds; raises LineCorrupt."""
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

    def pack_rows(
        self, rows: Iterable[Sequence[Any]], contents: Mapping[int, str] | None = None
    ) -> list[tuple[Any, ...]]:
        """`source_lines` insert tuples (message_seq next to last, raw last) with raw packed.

        `contents` maps a message seq to its content_json: a line carrying one is stored without it.
        """
        found = contents or {}
        return [
            (*row[:-1], self.pack(bytes(row[-1]), found.get(row[-2]) if row[-2] is not None else None)) for row in rows
        ]


def _varint(n: int) -> bytes:
    """`n` (>= 0) as a little-endian base-128 varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(body: bytes) -> tuple[int, int]:
    """The varint at the start of `body` and where it ends; raises LineCorrupt when it does not end."""
    value = shift = 0
    for i, byte in enumerate(body[:10]):
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    raise LineCorrupt("a spliced source line's offset is truncated")


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


#: A session's imported lines with the content of the message each carries (None for the others), as UTF-8
#: bytes: the text is never decoded only to be encoded again. (SQLite's CAST gives the database's encoding,
#: UTF-8 for every store sessionstore creates; were it another, the CRC check would say LineCorrupt.)
_LINES = (
    "SELECT s.line_no, s.raw, {content} FROM source_lines s LEFT JOIN messages m "
    "ON m.session_id = s.session_id AND m.seq = s.message_seq "
    "WHERE s.session_id = :id AND s.line_no > :after ORDER BY s.line_no LIMIT :n"
)


def _lines_sql(db: "Database") -> str:
    """`_LINES` in this engine's words for a text's UTF-8 bytes."""
    content = "CAST(unpacked(m.content_json) AS BLOB)" if db.is_sqlite else "convert_to(m.content_json, 'UTF8')"
    return _LINES.format(content=content)


def session_lines(db: "Database", session_id: str, batch: int = 1000) -> Iterator[tuple[int, bytes]]:
    """(line_no, original line) of every imported line of a session, in order, read `batch` rows at a time.

    Keyset paging keeps memory flat; each batch is one range read of source_lines joined with the
    messages whose content spliced lines leave out.
    """
    packer = session_packer(db, session_id)
    statement = db.cached_sql("session_lines", _lines_sql)
    last = DICT_LINE
    while True:
        rows = db.all(statement, {"id": session_id, "after": last, "n": batch})
        if not rows:
            return
        for line_no, stored, content in rows:
            last = int(line_no)
            yield last, packer.unpack(bytes(stored), bytes(content) if content is not None else None)
