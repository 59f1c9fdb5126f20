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

The envelope of such a line holds more of what that messages row keeps: the
usage (`usage_json`, whole) and entry fields such as `toolUseResult` (values of
`metadata_json`). SEGMENTS_RAW, SEGMENTS_ZSTD and SEGMENTS_DICT store a line
without several such segments, each a byte slice of one column of the row
(`COLUMNS`): a varint count, then per segment the rest's bytes before it, the
column (and, for a slice, its start and length in the column), then the CRC-32
of the whole line and the body of the rest. Readers put the slices back without
parsing JSON. Imports write these; codecs 3-5 (content only) stay readable.
Every column a reader fetches becomes bytes in `column_bytes` alone, the one
place that knows how the messages columns are stored.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

import zstandard

from . import textpack
from .errors import SessionStoreError
from .fastjson import compact_dumps, loads_stored

if TYPE_CHECKING:
    from .db import Database

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
#: How a packed message text starts (sessionstore.storage.textpack).
PACKED_TEXT = bytes((textpack.PACKED,))
#: The same three for a line stored without its message's content (spliced back in when read; read, not written).
SPLICE_RAW, SPLICE_ZSTD, SPLICE_DICT = 3, 4, 5
#: The same three for a line stored without several segments of its message's columns (what imports write).
SEGMENTS_RAW, SEGMENTS_ZSTD, SEGMENTS_DICT = 6, 7, 8
#: What each spliced codec stores the rest of the line as.
SPLICE_OF = {
    SPLICE_RAW: RAW,
    SPLICE_ZSTD: ZSTD,
    SPLICE_DICT: ZSTD_DICT,
    SEGMENTS_RAW: RAW,
    SEGMENTS_ZSTD: ZSTD,
    SEGMENTS_DICT: ZSTD_DICT,
}
#: The messages columns a segment is cut from, by their number in a stored segment (readers fetch them in this order).
COLUMNS = ("content_json", "usage_json", "metadata_json")
CONTENT, USAGE, METADATA = 0, 1, 2
#: A content or usage shorter than this is left in its line (the offset and checksum would cost about as much).
MIN_SPLICED = 16
#: A metadata value shorter than this is left in its line (the session's dictionary packs most of them anyway).
MIN_SLICE = 64
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
    message column is missing or not the one it was stored without)."""


def column_bytes(value: Any) -> bytes | None:
    """A messages column as fetched (or given) as its UTF-8 bytes, None for NULL: the one place that decodes them.

    A column is text (str), its UTF-8 bytes (fetched with convert_to), or on SQLite a packed text
    (sessionstore.storage.textpack: a codec byte no JSON text starts with), unpacked here.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if value[:1] == PACKED_TEXT:
        return textpack.unpack_bytes(bytes(value))
    return bytes(value)


class Segment(NamedTuple):
    """Bytes of a line that are `length` bytes of a column from `start` (`whole`: the column itself)."""

    at: int
    column: int
    start: int
    length: int
    whole: bool


def _safe_bytes(value: Any) -> bytes | None:
    """`column_bytes`, None for a text that has no UTF-8 form (a lone surrogate): it cannot be in a line."""
    try:
        return column_bytes(value)
    except UnicodeEncodeError:
        return None


def _metadata_values(metadata: bytes) -> list[bytes]:
    """The serialized values of `metadata_json`'s keys long enough to be cut out, longest first.

    metadata_json is compact JSON of an object, so each value's compact text is a substring of it.
    """
    try:
        meta = loads_stored(metadata.decode("utf-8"))
    except ValueError:
        return []
    if not isinstance(meta, dict):
        return []
    texts = []
    for value in meta.values():
        # Most values are short strings: one under MIN_SLICE - 2 characters is left in the line unencoded.
        if isinstance(value, (dict, list)) or (isinstance(value, str) and len(value) >= MIN_SLICE - 2):
            text = compact_dumps(value).encode("utf-8")
            if len(text) >= MIN_SLICE:
                texts.append(text)
    return sorted(texts, key=len, reverse=True)


def find_segments(raw: bytes, columns: Sequence[bytes | None]) -> list[Segment]:
    """Where `raw` holds its message's columns (COLUMNS order): content and usage whole, metadata values sliced.

    Segments do not overlap; they are in the order they are worth keeping (content first), not by offset.
    """
    found: list[Segment] = []
    for column in (CONTENT, USAGE):
        text = columns[column] if column < len(columns) else None
        if text is not None and len(text) >= MIN_SPLICED:
            _place(raw, text, found, column, 0, True)
    metadata = columns[METADATA] if len(columns) > METADATA else None
    if metadata is not None and len(metadata) >= MIN_SLICE:
        for text in _metadata_values(metadata):
            _place(raw, text, found, METADATA, metadata.find(text), False)
    return found


def _place(raw: bytes, text: bytes, found: list[Segment], column: int, start: int, whole: bool) -> None:
    """Add the first occurrence of `text` in `raw` that overlaps no segment in `found`, if any."""
    if start < 0:
        return
    at = raw.find(text)
    while at >= 0:
        end = at + len(text)
        clash = next((s for s in found if s.at < end and at < s.at + s.length), None)
        if clash is None:
            found.append(Segment(at, column, start, len(text), whole))
            return
        at = raw.find(text, clash.at + clash.length)


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

    def pack(self, raw: bytes, content_json: Any = None, usage_json: Any = None, metadata_json: Any = None) -> bytes:
        """`raw` with its codec byte: without the parts of its message's columns it holds verbatim, compressed
        when that is smaller.

        Each spliced form is kept only when it unpacks to `raw` exactly (checked here); when one does not, fewer
        segments are tried, down to the whole line.
        """
        columns = (_safe_bytes(content_json), _safe_bytes(usage_json), _safe_bytes(metadata_json))
        segments = find_segments(raw, columns)
        while segments:
            stored = self._segmented(raw, segments)
            try:
                if self.unpack(stored, *columns) == raw:
                    return stored
            except LineCorrupt:
                pass
            segments = segments[:-1]
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

    def _segmented(self, raw: bytes, segments: Sequence[Segment]) -> bytes:
        """SEGMENTS_* of `raw` without `segments`: count, per segment (gap, column * 2 + sliced[, start, length]),
        the line's CRC-32, the packed rest."""
        head = bytearray(_varint(len(segments)))
        rest, done = [], 0
        for seg in sorted(segments):
            rest.append(raw[done : seg.at])
            head += _varint(seg.at - done) + _varint(seg.column * 2 + (not seg.whole))
            if not seg.whole:
                head += _varint(seg.start) + _varint(seg.length)
            done = seg.at + seg.length
        rest.append(raw[done:])
        inner = self._pack_whole(b"".join(rest))
        return bytes((inner[0] + SEGMENTS_RAW,)) + head + zlib.crc32(raw).to_bytes(4, "big") + inner[1:]

    def unpack(
        self, stored: bytes, content_json: Any = None, usage_json: Any = None, metadata_json: Any = None
    ) -> bytes:
        """The original line of a stored `raw`; a spliced one takes its message's columns (as fetched: text or
        bytes, made bytes by `column_bytes` only when a segment needs them).

        Raises LineCorrupt.
        """
        if not stored:
            raise LineCorrupt("an empty stored source line (no codec byte)")
        codec, body = stored[0], stored[1:]
        if codec >= SEGMENTS_RAW and codec in SPLICE_OF:
            return self._unsegment(SPLICE_OF[codec], body, (content_json, usage_json, metadata_json))
        if codec in SPLICE_OF:
            return self._unsplice(SPLICE_OF[codec], body, content_json)
        return self._decode(codec, body)

    def _unsplice(self, codec: int, body: bytes, content_json: Any) -> bytes:
        """A codec 3-5 line: its rest decoded, the message's content put back at its offset, the checksum checked."""
        content = column_bytes(content_json)
        if content is None:
            raise LineCorrupt("a source line needs its message's content, which is missing")
        at, start = _read_varint(body, 0)
        if len(body) < start + 4:
            raise LineCorrupt("a spliced source line is truncated")
        crc = int.from_bytes(body[start : start + 4], "big")
        rest = self._decode(codec, body[start + 4 :])
        if at > len(rest):
            raise LineCorrupt("a spliced source line's offset is past its end")
        line = b"".join((rest[:at], content, rest[at:]))
        if zlib.crc32(line) != crc:
            raise LineCorrupt("a source line does not match its message's content (changed since the import?)")
        return line

    def _unsegment(self, codec: int, body: bytes, fetched: Sequence[Any]) -> bytes:
        """A SEGMENTS_* line: its rest decoded, each segment's column slice put back in, the checksum checked."""
        pieces, pos = self._segment_texts(body, fetched)
        if len(body) < pos + 4:
            raise LineCorrupt("a spliced source line is truncated")
        rest = self._decode(codec, body[pos + 4 :])
        out: list[bytes] = []
        done = 0
        for gap, text in pieces:
            if done + gap > len(rest):
                raise LineCorrupt("a spliced source line's offset is past its end")
            out += (rest[done : done + gap], text)
            done += gap
        out.append(rest[done:])
        line = b"".join(out)
        if zlib.crc32(line) != int.from_bytes(body[pos : pos + 4], "big"):
            raise LineCorrupt("a source line does not match its message's columns (changed since the import?)")
        return line

    @staticmethod
    def _segment_texts(body: bytes, fetched: Sequence[Any]) -> tuple[list[tuple[int, bytes]], int]:
        """(gap, bytes) of each segment a SEGMENTS_* body names, and where its CRC starts; raises LineCorrupt."""
        count, pos = _read_varint(body, 0)
        texts: list[bytes | None] = [None, None, None]
        pieces: list[tuple[int, bytes]] = []
        for _ in range(count):
            gap, pos = _read_varint(body, pos)
            tag, pos = _read_varint(body, pos)
            column = tag >> 1
            if column >= len(COLUMNS):
                raise LineCorrupt(f"a spliced source line names unknown column {column}")
            text = texts[column]
            if text is None:
                text = texts[column] = column_bytes(fetched[column])
                if text is None:
                    raise LineCorrupt(f"a source line needs its message's {COLUMNS[column]}, which is missing")
            if tag & 1:
                start, pos = _read_varint(body, pos)
                length, pos = _read_varint(body, pos)
                if start + length > len(text):
                    raise LineCorrupt(f"a source line's segment is past the end of its message's {COLUMNS[column]}")
                text = text[start : start + length]
            pieces.append((gap, text))
        return pieces, pos

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
        self, rows: Iterable[Sequence[Any]], columns: Mapping[int, Sequence[Any]] | None = None
    ) -> list[tuple[Any, ...]]:
        """`source_lines` insert tuples (message_seq next to last, raw last) with raw packed.

        `columns` maps a message seq to its COLUMNS values: a line carrying one is stored without what it repeats.
        """
        found = columns or {}
        out = []
        for row in rows:
            values = found.get(row[-2]) if row[-2] is not None else None
            out.append((*row[:-1], self.pack(bytes(row[-1]), *values) if values else self._pack_whole(bytes(row[-1]))))
        return out


def _varint(n: int) -> bytes:
    """`n` (>= 0) as a little-endian base-128 varint."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(body: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` in `body` and where it ends; raises LineCorrupt when it does not end."""
    if pos < len(body) and body[pos] < 0x80:
        return body[pos], pos + 1  # one byte: most counts, columns and gaps
    value = shift = 0
    for i in range(pos, min(len(body), pos + 10)):
        value |= (body[i] & 0x7F) << shift
        if body[i] < 0x80:
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


#: A session's imported lines with the COLUMNS of the message each carries (None for the others), fetched as
#: UTF-8 bytes: the text is never decoded only to be encoded again. (SQLite's CAST gives the database's encoding,
#: UTF-8 for every store sessionstore creates; were it another, the CRC check would say LineCorrupt.)
_LINES = (
    "SELECT s.line_no, s.raw, {columns} FROM source_lines s LEFT JOIN messages m "
    "ON m.session_id = s.session_id AND m.seq = s.message_seq "
    "WHERE s.session_id = :id AND s.line_no > :after ORDER BY s.line_no LIMIT :n"
)


def _lines_sql(db: "Database") -> str:
    """`_LINES` in this engine's words for a text's UTF-8 bytes."""
    # SQLite: the column as stored (text, or a packed text that column_bytes unpacks only when a line needs it).
    spelled = "m.{}" if db.is_sqlite else "convert_to(m.{}, 'UTF8')"
    return _LINES.format(columns=", ".join(spelled.format(column) for column in COLUMNS))


def session_lines(db: "Database", session_id: str, batch: int = 1000) -> Iterator[tuple[int, bytes]]:
    """(line_no, original line) of every imported line of a session, in order, read `batch` rows at a time.

    Keyset paging keeps memory flat; each batch is one range read of source_lines joined with the
    messages whose columns spliced lines leave out.
    """
    packer = session_packer(db, session_id)
    statement = db.cached_sql("session_lines", _lines_sql)
    last = DICT_LINE
    while True:
        rows = db.all(statement, {"id": session_id, "after": last, "n": batch})
        if not rows:
            return
        for line_no, stored, content, usage, metadata in rows:
            last = int(line_no)
            yield last, packer.unpack(bytes(stored), content, usage, metadata)
