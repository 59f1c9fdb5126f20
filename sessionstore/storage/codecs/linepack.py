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

From revision 0015 an import stores a session's lines in BLOCKs: one row per up
to BLOCK_LINES consecutive lines (`line_no` its first line, `line_count` how
many), so neighbouring lines, which share ids, envelopes and hook payloads, are
compressed together and the per-row cost is paid once a block. A BLOCK row is
the codec byte, the codec of its body (RAW, ZSTD or ZSTD_DICT), a varint line
count, a varint base message seq, then per line: its line_no step, its message
(0: none, else seq - base + 1), the length of its rest and, for a line with a
message, its segments as SEGMENTS_* write them (count, then gap, column and
slice; with a CRC-32 of the whole line when there is one); then ONE body of the
concatenated rests. A reader fetches the messages columns of a block by one
range read of `messages` (`block_columns`). Per-line rows of every codec above
stay readable, mixed with blocks.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

import zstandard

from . import textpack
from ..core.errors import SessionStoreError
from .fastjson import compact_dumps, loads_stored

if TYPE_CHECKING:
    from ..engine.db import Database

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
#: How a packed message text starts (sessionstore.storage.codecs.textpack).
PACKED_TEXT = bytes((textpack.PACKED,))
#: The same three for a line stored without its message's content (spliced back in when read; read, not written).
SPLICE_RAW, SPLICE_ZSTD, SPLICE_DICT = 3, 4, 5
#: The same three for a line stored without several segments of its message's columns (what imports write).
SEGMENTS_RAW, SEGMENTS_ZSTD, SEGMENTS_DICT = 6, 7, 8
#: Up to BLOCK_LINES lines (or BLOCK_BYTES bytes of rests) in one row (what imports write from revision 0015).
BLOCK = 9
BLOCK_KIND = "block"
BLOCK_LINES = 64
BLOCK_BYTES = 65_536
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
    (sessionstore.storage.codecs.textpack: a codec byte no JSON text starts with), unpacked here.
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


class BlockLine(NamedTuple):
    """A line in a block: its number, its message's seq (None: none), that message's COLUMNS values, and the kind
    and entry type the import gave it (kept in the block as a per-line row kept them in its columns)."""

    line_no: int
    seq: int | None
    raw: bytes
    columns: Sequence[Any] | None = None
    kind: str = "side"
    entry_type: str | None = None


class BlockHead(NamedTuple):
    """What a BLOCK row's first bytes say: its body's codec, line count, and the seqs of the messages it needs."""

    codec: int
    lines: int
    base: int
    last: int
    at: int


def block_head(stored: bytes) -> BlockHead:
    """The head of a BLOCK row (cheap: the line index is not read); raises LineCorrupt."""
    if len(stored) < 2 or stored[0] != BLOCK:
        raise LineCorrupt("not a block of source lines")
    count, pos = _read_varint(stored, 2)
    base, pos = _read_varint(stored, pos)
    span, pos = _read_varint(stored, pos)
    return BlockHead(stored[1], count, base, base + span, pos)


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
        self._block_compressor: zstandard.ZstdCompressor | None = None
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
        head, rest = _cut_out(raw, segments)
        inner = self._pack_whole(rest)
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
        line = _rebuild(self._decode(codec, body[pos + 4 :]), pieces)
        if zlib.crc32(line) != int.from_bytes(body[pos : pos + 4], "big"):
            raise LineCorrupt("a source line does not match its message's columns (changed since the import?)")
        return line

    @staticmethod
    def _segment_texts(body: bytes, fetched: Sequence[Any], pos: int = 0) -> tuple[list[tuple[int, bytes]], int]:
        """(gap, bytes) of each segment a SEGMENTS_* body names from `pos`, and where its CRC starts; raises
        LineCorrupt."""
        count, pos = _read_varint(body, pos)
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

    def pack_blocks(self, session_id: str, lines: Sequence[BlockLine]) -> list[tuple[Any, ...]]:
        """`source_lines` insert tuples (BLOCK_COLUMNS) of `lines` (in line order) in blocks of up to BLOCK_LINES
        lines holding up to BLOCK_BYTES bytes of rests (a longer line alone).

        Each line with a message is stored without the segments of its columns it holds verbatim, as `pack`
        finds them, kept only when they rebuild the line exactly.
        """
        entries = [self._entry(line) for line in lines]
        rows = []
        for start, end in split_blocks([len(rest) for _, _, rest in entries]):
            block = entries[start:end]
            seqs = [line.seq for line, _, _ in block if line.seq is not None]
            first = block[0][0].line_no
            raw = self._block(first, block, min(seqs, default=0), max(seqs, default=0))
            rows.append((session_id, first, BLOCK_KIND, None, min(seqs, default=None), len(block), raw))
        return rows

    def _entry(self, line: BlockLine) -> tuple[BlockLine, bytes, bytes]:
        """(line, its segment index, its rest): the index b"" for a line without a message."""
        if line.seq is None:
            return line, b"", line.raw
        cut, rest = self._cut(line.raw, line.columns)
        return line, cut, rest

    def _block(self, first: int, block: Sequence[tuple[BlockLine, bytes, bytes]], base: int, last: int) -> bytes:
        """A BLOCK row: codec, body codec, count, base seq, seq span, per line (step, message, rest length,
        segment index), then one body: the rests, then each line's kind and entry type."""
        index = bytearray()
        previous = first
        for line, cut, rest in block:
            tag = _varint(line.seq - base + 1) if line.seq is not None else b"\x00"
            index += _varint(line.line_no - previous) + tag + _varint(len(rest)) + cut
            previous = line.line_no
        kinds = b"".join(_kind_entry(line) for line, _, _ in block)
        body = self._pack_rests(b"".join(rest for _, _, rest in block) + kinds)
        head = bytes((BLOCK, body[0])) + _varint(len(block)) + _varint(base) + _varint(last - base)
        return head + index + body[1:]

    def _cut(self, raw: bytes, columns: Sequence[Any] | None) -> tuple[bytes, bytes]:
        """(segment index, rest) of a message line: the index as SEGMENTS_* write it, with the line's CRC-32 when
        it names a segment (b"\\x00": none); fewer segments are tried until they rebuild `raw` exactly."""
        values = [_safe_bytes(value) for value in columns] if columns else [None, None, None]
        segments = find_segments(raw, values)
        while segments:
            head, rest = _cut_out(raw, segments)
            try:
                pieces, _ = self._segment_texts(head, values)
                if _rebuild(rest, pieces) == raw:
                    return head + zlib.crc32(raw).to_bytes(4, "big"), rest
            except LineCorrupt:
                pass
            segments = segments[:-1]
        return b"\x00", raw

    def _pack_rests(self, data: bytes) -> bytes:
        """RAW, ZSTD or ZSTD_DICT of a block's rests (a frame with its checksum: a block holds many lines)."""
        if len(data) >= MIN_PACKED:
            if self._block_compressor is None:
                self._block_compressor = zstandard.ZstdCompressor(
                    level=LEVEL, dict_data=self._dict, write_content_size=True, write_checksum=True
                )
            packed = self._block_compressor.compress(data)
            if len(packed) + 1 < len(data):
                return bytes((ZSTD_DICT if self._dict is not None else ZSTD,)) + packed
        return b"\x00" + data

    def unpack_block(
        self,
        first: int,
        stored: bytes,
        columns_of: Callable[[int], Sequence[Any] | None],
        *,
        with_kinds: bool = False,
    ) -> list[BlockLine]:
        """Each line of the BLOCK row `stored` whose first line is `first`, as stored (its message's columns as
        `columns_of(seq)` gives them: as fetched, None for no such message; its kind and entry type read only
        `with_kinds`). Raises LineCorrupt."""
        head = block_head(stored)
        pos, line_no = head.at, first
        index: list[tuple[int, int | None, int, list[tuple[int, bytes]], int | None]] = []
        for _ in range(head.lines):
            step, pos = _read_varint(stored, pos)
            tag, pos = _read_varint(stored, pos)
            length, pos = _read_varint(stored, pos)
            pieces: list[tuple[int, bytes]] = []
            crc = seq = None
            if tag:
                seq = head.base + tag - 1
                pieces, pos = self._segment_texts(stored, columns_of(seq) or _NONE, pos)
                if pieces:
                    if len(stored) < pos + 4:
                        raise LineCorrupt("a block of source lines is truncated")
                    crc, pos = int.from_bytes(stored[pos : pos + 4], "big"), pos + 4
            line_no += step
            index.append((line_no, seq, length, pieces, crc))
        rests = self._decode(head.codec, stored[pos:])
        done = sum(entry[2] for entry in index)
        if done > len(rests):
            raise LineCorrupt("a block of source lines does not hold the lines its index names")
        kinds = _read_kinds(rests, done, len(index)) if with_kinds else [("side", None)] * len(index)
        out: list[BlockLine] = []
        done = 0
        for (number, seq, length, pieces, crc), (kind, entry_type) in zip(index, kinds, strict=True):
            line = rests[done : done + length]
            done += length
            if pieces:
                line = _rebuild(line, pieces)
                if zlib.crc32(line) != crc:
                    raise LineCorrupt("a source line does not match its message's columns (changed since the import?)")
            out.append(BlockLine(number, seq, line, columns_of(seq) if seq is not None else None, kind, entry_type))
        return out

    def pack_rows(
        self, rows: Iterable[Sequence[Any]], columns: Mapping[int, Sequence[Any]] | None = None
    ) -> list[tuple[Any, ...]]:
        """Per-line `source_lines` insert tuples (message_seq next to last, raw last) with raw packed (the format
        before revision 0015, which imports no longer write; kept for the tests of those rows).

        `columns` maps a message seq to its COLUMNS values: a line carrying one is stored without what it repeats.
        """
        found = columns or {}
        out = []
        for row in rows:
            values = found.get(row[-2]) if row[-2] is not None else None
            out.append((*row[:-1], self.pack(bytes(row[-1]), *values) if values else self._pack_whole(bytes(row[-1]))))
        return out


#: The columns of a `pack_blocks` tuple.
BLOCK_COLUMNS = ("session_id", "line_no", "kind", "entry_type", "message_seq", "line_count", "raw")


def split_blocks(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) of each block of lines whose rests are `sizes` bytes: up to BLOCK_LINES lines and
    BLOCK_BYTES bytes (a longer line alone)."""
    blocks = []
    start = size = 0
    for i, length in enumerate(sizes):
        if i > start and (i - start >= BLOCK_LINES or size + length > BLOCK_BYTES):
            blocks.append((start, i))
            start, size = i, 0
        size += length
    if start < len(sizes):
        blocks.append((start, len(sizes)))
    return blocks


_NONE = (None, None, None)


def _kind_entry(line: BlockLine) -> bytes:
    """A line's kind and entry type as a block keeps them: varint length + UTF-8 each, the entry type's length
    + 1 (0: None)."""
    kind = line.kind.encode("utf-8")
    if line.entry_type is None:
        return _varint(len(kind)) + kind + b"\x00"
    entry = line.entry_type.encode("utf-8", "surrogatepass")
    return _varint(len(kind)) + kind + _varint(len(entry) + 1) + entry


def _read_kinds(body: bytes, pos: int, count: int) -> list[tuple[str, str | None]]:
    """`count` (kind, entry type) pairs of a block's body from `pos` (after its rests); raises LineCorrupt."""
    out: list[tuple[str, str | None]] = []
    try:
        for _ in range(count):
            length, pos = _read_varint(body, pos)
            kind = body[pos : pos + length].decode("utf-8")
            pos += length
            length, pos = _read_varint(body, pos)
            entry = body[pos : pos + length - 1].decode("utf-8", "surrogatepass") if length else None
            pos += max(0, length - 1)
            out.append((kind, entry))
    except UnicodeDecodeError as exc:
        raise LineCorrupt(f"a block of source lines has an unreadable kind: {exc}") from exc
    if pos != len(body):
        raise LineCorrupt("a block of source lines does not hold the lines its index names")
    return out


def _cut_out(raw: bytes, segments: Sequence[Segment]) -> tuple[bytes, bytes]:
    """(segment index without CRC, rest) of `raw` without `segments`: count, per segment (gap, column * 2 +
    sliced[, start, length])."""
    head = bytearray(_varint(len(segments)))
    rest, done = [], 0
    for seg in sorted(segments):
        rest.append(raw[done : seg.at])
        head += _varint(seg.at - done) + _varint(seg.column * 2 + (not seg.whole))
        if not seg.whole:
            head += _varint(seg.start) + _varint(seg.length)
        done = seg.at + seg.length
    rest.append(raw[done:])
    return bytes(head), b"".join(rest)


def _rebuild(rest: bytes, pieces: Sequence[tuple[int, bytes]]) -> bytes:
    """`rest` with each (gap, bytes) piece put back `gap` bytes after the previous one; raises LineCorrupt."""
    out: list[bytes] = []
    done = 0
    for gap, text in pieces:
        if done + gap > len(rest):
            raise LineCorrupt("a spliced source line's offset is past its end")
        out += (rest[done : done + gap], text)
        done += gap
    out.append(rest[done:])
    return b"".join(out)


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


#: A page of a session's stored rows (a block, a per-line row or the dictionary, which `line_no > :after` skips).
_ROWS = (
    "SELECT line_no, raw, message_seq FROM source_lines "
    "WHERE session_id = :id AND line_no > :after ORDER BY line_no LIMIT :n"
)
#: The COLUMNS of a session's messages with seq in [lo, hi], fetched as UTF-8 bytes: the text is never decoded
#: only to be encoded again. (SQLite's CAST gives the database's encoding, UTF-8 for every store sessionstore
#: creates; were it another, the CRC check would say LineCorrupt.)
_RANGE = "SELECT seq, {columns} FROM messages WHERE session_id = :id AND seq BETWEEN :lo AND :hi"


def _range_sql(db: "Database") -> str:
    """`_RANGE` in this engine's words for a text's UTF-8 bytes."""
    # SQLite: the column as stored (text, or a packed text that column_bytes unpacks only when a line needs it).
    spelled = "{}" if db.is_sqlite else "convert_to({}, 'UTF8')"
    return _RANGE.format(columns=", ".join(spelled.format(column) for column in COLUMNS))


def block_columns(db: "Database", session_id: str, low: int, high: int) -> dict[int, Sequence[Any]]:
    """seq -> COLUMNS (as fetched) of a session's messages with seq in [low, high]: one range read."""
    statement = db.cached_sql("block_columns", _range_sql)
    rows = db.all(statement, {"id": session_id, "lo": low, "hi": high})
    return {int(row[0]): tuple(row[1:]) for row in rows}


def _seq_range(rows: Sequence[Sequence[Any]]) -> tuple[int, int] | None:
    """The lowest and highest message seq the stored rows of a page need (None: none)."""
    low = high = None
    for _, stored, seq in rows:
        if stored[:1] == bytes((BLOCK,)):
            if seq is None:
                continue
            head = block_head(bytes(stored))
            first, last = head.base, head.last
        elif seq is not None and stored[:1] and stored[0] in SPLICE_OF:
            first = last = int(seq)
        else:
            continue
        low = first if low is None else min(low, first)
        high = last if high is None else max(high, last)
    return None if low is None else (low, high if high is not None else low)


def session_lines(db: "Database", session_id: str, batch: int = 1000) -> Iterator[tuple[int, bytes]]:
    """(line_no, original line) of every imported line of a session, in order, about `batch` lines at a time.

    Keyset paging keeps memory flat; each page is one range read of source_lines (blocks of lines, or
    single lines stored before revision 0015) and one range read of the messages whose columns they need.
    """
    packer = session_packer(db, session_id)
    last = DICT_LINE
    page = max(1, batch // BLOCK_LINES)
    while True:
        rows = db.all(_ROWS, {"id": session_id, "after": last, "n": page})
        if not rows:
            return
        needed = _seq_range(rows)
        found = block_columns(db, session_id, *needed) if needed is not None else {}
        for line_no, stored, seq in rows:
            last = int(line_no)
            stored = bytes(stored)
            if stored[:1] == bytes((BLOCK,)):
                for line in packer.unpack_block(last, stored, found.get):
                    yield line.line_no, line.raw
            else:
                yield last, packer.unpack(stored, *(found.get(int(seq), _NONE) if seq is not None else _NONE))


def block_lines(db: "Database", session_id: str, packer: LinePacker, first: int, stored: bytes) -> list[BlockLine]:
    """The lines of one stored BLOCK row with their messages' columns (fetched by one range read)."""
    head = block_head(stored)
    found = block_columns(db, session_id, head.base, head.last) if head.base else {}
    return packer.unpack_block(first, stored, found.get, with_kinds=True)
