"""Spliced source lines: a line carrying a message is stored without the content `messages` holds already.

From 0010 each `source_lines.raw` is a codec byte (0 raw, 1 zstd, 2 zstd with the
session's dictionary, row `line_no = 0`) and a body. A line that carries a
message (message_seq set) also holds that message's content, stored a second
time in `messages.content_json`, and its envelope repeats more of that row:
the usage (`usage_json`) and entry fields such as `toolUseResult` (values of
`metadata_json`). From this revision such a line is stored without the
segments of those columns it holds verbatim: content and usage whole (16 bytes
or more), and each value of metadata_json whose compact JSON is 64 bytes or
more, as a slice of metadata_json (start, length). The codec is 6, 7 or 8
(codecs 0, 1, 2 of the rest of the line), then a varint count, per segment
varints (bytes of the rest before it, column * 2 + sliced, and for a slice its
start and length; columns 0 content_json, 1 usage_json, 2 metadata_json), the
CRC-32 of the whole line, and the body of the rest. Each row is checked to
rebuild its line exactly before it is written; when it does not, fewer segments
are tried, down to the line left as it was. (Codecs 3-5, the content alone,
were written by this revision before it was released; they stay readable.)

The upgrade rewrites the message lines session by session, in batches, inside
the one upgrade transaction (the runner backs the SQLite file up first); the
downgrade writes every spliced line (codecs 3-8) back as codec 1 or 2. The codec is spelled
out here rather than imported, so this revision keeps doing what it did when
the packing module changes.

On PostgreSQL the upgrade runs as the tables' owner (as 0010 did); FORCE ROW
LEVEL SECURITY on source_lines and messages must be lifted inside the
transaction so the owner converts every role's lines (joined with their
messages), and set again before the commit. migrations/env.py does that for
every table around the whole run; this revision does it too (a no-op under
that env.py) so it does not depend on it, as 0010 does not.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import json
import zlib
from typing import Callable, NamedTuple, Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
SPLICE_RAW, SEGMENTS_RAW = 3, 6
CONTENT, USAGE, METADATA = 0, 1, 2
LEVEL, MIN_PACKED, MIN_SPLICED, MIN_SLICE = 3, 48, 16, 64
BATCH = 2000
TABLES = ("source_lines", "messages")

_SESSIONS = "SELECT DISTINCT session_id FROM source_lines WHERE message_seq IS NOT NULL ORDER BY session_id"
_DICTIONARY = "SELECT raw FROM source_lines WHERE session_id = :id AND line_no = 0"
_MESSAGE_LINES = (
    "SELECT s.line_no, s.raw, m.content_json, m.usage_json, m.metadata_json FROM source_lines s JOIN messages m "
    "ON m.session_id = s.session_id AND m.seq = s.message_seq "
    "WHERE s.session_id = :id AND s.line_no > :after ORDER BY s.line_no LIMIT :n"
)
_UPDATE = "UPDATE source_lines SET raw = :raw WHERE session_id = :id AND line_no = :n"


class _Segment(NamedTuple):
    at: int
    column: int
    start: int
    length: int
    whole: bool


def _utf8(value: str | None) -> bytes | None:
    try:
        return value.encode("utf-8") if value is not None else None
    except UnicodeEncodeError:
        return None


def _metadata_values(metadata: bytes) -> list[bytes]:
    """The compact JSON of metadata_json's values of MIN_SLICE bytes or more, longest first."""
    try:
        meta = json.loads(metadata.decode("utf-8"))
    except ValueError:
        return []
    if not isinstance(meta, dict):
        return []
    texts = []
    for value in meta.values():
        # Most values are short strings: one under MIN_SLICE - 2 characters is left in the line unencoded.
        if isinstance(value, (dict, list)) or (isinstance(value, str) and len(value) >= MIN_SLICE - 2):
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            if len(text) >= MIN_SLICE:
                texts.append(text)
    return sorted(texts, key=len, reverse=True)


def _segments(raw: bytes, columns: Sequence[bytes | None]) -> list[_Segment]:
    """Non-overlapping places of the columns in `raw`: content, usage whole; metadata values sliced."""
    found: list[_Segment] = []
    for column in (CONTENT, USAGE):
        text = columns[column]
        if text is not None and len(text) >= MIN_SPLICED:
            _place(raw, text, found, column, 0, True)
    metadata = columns[METADATA]
    if metadata is not None and len(metadata) >= MIN_SLICE:
        for text in _metadata_values(metadata):
            _place(raw, text, found, METADATA, metadata.find(text), False)
    return found


def _place(raw: bytes, text: bytes, found: list[_Segment], column: int, start: int, whole: bool) -> None:
    if start < 0:
        return
    at = raw.find(text)
    while at >= 0:
        end = at + len(text)
        clash = next((s for s in found if s.at < end and at < s.at + s.length), None)
        if clash is None:
            found.append(_Segment(at, column, start, len(text), whole))
            return
        at = raw.find(text, clash.at + clash.length)


class _Codec:
    """One session's codecs 0-8 as this revision writes and reads them."""

    def __init__(self, dictionary: bytes | None):
        data = zstandard.ZstdCompressionDict(dictionary) if dictionary is not None else None
        self.packed = ZSTD_DICT if data is not None else ZSTD
        self.compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=data, write_content_size=True)
        self.with_dict = zstandard.ZstdDecompressor(dict_data=data) if data is not None else None
        self.plain = zstandard.ZstdDecompressor()

    def pack(self, raw: bytes) -> bytes:
        """Codec 0, 1 or 2 of `raw` (as 0010 wrote it)."""
        if len(raw) >= MIN_PACKED:
            packed = self.compressor.compress(raw)
            if len(packed) + 1 < len(raw):
                return bytes((self.packed,)) + packed
        return b"\x00" + raw

    def decode(self, codec: int, body: bytes) -> bytes:
        """The bytes of a codec 0, 1 or 2 body."""
        if codec == RAW:
            return body
        if codec == ZSTD:
            return self.plain.decompress(body)
        if codec == ZSTD_DICT and self.with_dict is not None:
            return self.with_dict.decompress(body)
        raise ValueError(f"unknown codec {codec} (or its dictionary is missing)")

    def splice(self, raw: bytes, columns: Sequence[bytes | None]) -> bytes | None:
        """Codec 6, 7 or 8 of `raw` without its segments (fewer when it does not rebuild); None: none is left."""
        segments = _segments(raw, columns)
        while segments:
            stored = self.segmented(raw, segments)
            try:
                if self.unsplice(stored, columns) == raw:
                    return stored
            except (ValueError, zstandard.ZstdError):
                pass
            segments = segments[:-1]
        return None

    def segmented(self, raw: bytes, segments: Sequence[_Segment]) -> bytes:
        head = bytearray(_varint(len(segments)))
        rest, done = [], 0
        for seg in sorted(segments):
            rest.append(raw[done : seg.at])
            head += _varint(seg.at - done) + _varint(seg.column * 2 + (not seg.whole))
            if not seg.whole:
                head += _varint(seg.start) + _varint(seg.length)
            done = seg.at + seg.length
        rest.append(raw[done:])
        inner = self.pack(b"".join(rest))
        return bytes((inner[0] + SEGMENTS_RAW,)) + head + zlib.crc32(raw).to_bytes(4, "big") + inner[1:]

    def unsplice(self, stored: bytes, columns: Sequence[bytes | None]) -> bytes:
        """The line a codec 3-8 row holds, its columns put back; raises ValueError when it does not check."""
        if stored[0] >= SEGMENTS_RAW:
            return self._unsegment(stored, columns)
        content = columns[CONTENT]
        if content is None:
            raise ValueError("a spliced line's content is missing")
        at, start = _read_varint(stored, 1)
        rest = self.decode(stored[0] - SPLICE_RAW, stored[start + 4 :])
        line = rest[:at] + content + rest[at:]
        if at > len(rest) or zlib.crc32(line) != int.from_bytes(stored[start : start + 4], "big"):
            raise ValueError("a spliced line does not match its message's content")
        return line

    def _unsegment(self, stored: bytes, columns: Sequence[bytes | None]) -> bytes:
        count, pos = _read_varint(stored, 1)
        pieces = []
        for _ in range(count):
            gap, pos = _read_varint(stored, pos)
            tag, pos = _read_varint(stored, pos)
            text = columns[tag >> 1] if (tag >> 1) < len(columns) else None
            if text is None:
                raise ValueError("a spliced line's column is missing")
            if tag & 1:
                start, pos = _read_varint(stored, pos)
                length, pos = _read_varint(stored, pos)
                if start + length > len(text):
                    raise ValueError("a spliced line's segment is past its column's end")
                text = text[start : start + length]
            pieces.append((gap, text))
        rest = self.decode(stored[0] - SEGMENTS_RAW, stored[pos + 4 :])
        out: list[bytes] = []
        done = 0
        for gap, text in pieces:
            out += (rest[done : done + gap], text)
            done += gap
        line = b"".join((*out, rest[done:]))
        if done > len(rest) or zlib.crc32(line) != int.from_bytes(stored[pos : pos + 4], "big"):
            raise ValueError("a spliced line does not match its message's columns")
        return line


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, start: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(start, min(len(data), start + 10)):
        value |= (data[i] & 0x7F) << shift
        if data[i] < 0x80:
            return value, i + 1
        shift += 7
    raise ValueError("a spliced line's offset is truncated")


def _owner_sees_every_row(bind: sa.engine.Connection) -> list[str]:
    """PostgreSQL: lift FORCE ROW LEVEL SECURITY on source_lines and messages for this transaction.

    Returns the tables it was forced on; `_force_again` sets it back before the commit (DDL is
    transactional there, so a failed upgrade leaves it as it was).
    """
    if bind.dialect.name != "postgresql":
        return []
    forced = []
    for table in TABLES:
        query = sa.text(f"SELECT relforcerowsecurity FROM pg_class WHERE oid = '{table}'::regclass")
        if bind.execute(query).scalar():
            bind.execute(sa.text(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY"))
            forced.append(table)
    return forced


def _force_again(bind: sa.engine.Connection, forced: list[str]) -> None:
    for table in forced:
        bind.execute(sa.text(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY"))


Convert = Callable[[_Codec, bytes, Sequence[bytes | None]], "bytes | None"]


def _rewrite(bind: sa.engine.Connection, convert: Convert) -> None:
    """Every message line of every session through `convert(codec, stored, columns)` (None: left as it is)."""
    for session_id in [r[0] for r in bind.execute(sa.text(_SESSIONS))]:
        row = bind.execute(sa.text(_DICTIONARY), {"id": session_id}).first()
        codec = _Codec(bytes(row[0]) if row is not None else None)
        last = 0
        while True:
            rows = bind.execute(sa.text(_MESSAGE_LINES), {"id": session_id, "after": last, "n": BATCH}).all()
            if not rows:
                break
            last = int(rows[-1][0])
            updates = []
            for n, stored, *columns in rows:
                new = convert(codec, bytes(stored), [_utf8(column) for column in columns])
                if new is not None:
                    updates.append({"id": session_id, "n": int(n), "raw": new})
            if updates:
                bind.execute(sa.text(_UPDATE), updates)


def _spliced(codec: _Codec, stored: bytes, columns: Sequence[bytes | None]) -> bytes | None:
    """A codec 0-2 row spliced; a row already spliced, or one that does not decode, is left as it is."""
    if stored[0] > ZSTD_DICT:
        return None
    try:
        raw = codec.decode(stored[0], stored[1:])
    except (ValueError, zstandard.ZstdError):
        return None
    return codec.splice(raw, columns)


def _whole(codec: _Codec, stored: bytes, columns: Sequence[bytes | None]) -> bytes | None:
    """A spliced row back as codec 1 or 2 (raises when it does not rebuild: 0011 could not read it)."""
    if stored[0] <= ZSTD_DICT:
        return None
    return codec.pack(codec.unsplice(stored, columns))


def upgrade() -> None:
    bind = op.get_bind()
    forced = _owner_sees_every_row(bind)
    _rewrite(bind, _spliced)
    _force_again(bind, forced)


def downgrade() -> None:
    bind = op.get_bind()
    forced = _owner_sees_every_row(bind)
    _rewrite(bind, _whole)
    _force_again(bind, forced)
