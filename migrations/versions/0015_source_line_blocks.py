"""Source lines in blocks: one `source_lines` row holds up to 64 consecutive lines of a session.

Each line had a row of its own (codecs 0-8, sessionstore.storage.linepack), so
what neighbouring lines share (a line's uuid is the next one's parentUuid, the
tool ids, hook payloads, the envelope) was compressed once per line, and every
row paid its session id and index entry again. From this revision a row may be
a BLOCK (codec 9): `line_no` is its first line and the new column `line_count`
says how many it holds (1 for the rows written before). Its raw is the codec
byte, the codec of its body (0 raw, 1 zstd, 2 zstd with the session's
dictionary, a frame with its checksum), then varints: the line count, the
lowest message seq of its lines (0: none), the span to the highest, and per
line its line_no step from the previous one (0 for the first), its message
(0: none, else seq - base + 1), the length of its rest, and for a line with a
message its segments as codecs 6-8 store them (a count, per segment gap,
column * 2 + sliced[, start, length], then the line's CRC-32 when the count is
not 0); then ONE body: the lines' rests, concatenated, then each line's kind and
entry type (varint length + UTF-8; the entry type's length + 1, 0 for NULL), as
its own row kept them. A block holds up to 64 lines and 64 KB of rests. The
row's message_seq is its lowest seq (NULL: no message line), kind is 'block',
entry_type NULL.

The upgrade adds the column and turns every session's per-line rows into blocks
in batches, inside the one upgrade transaction (the runner backs the SQLite file
up first), without reading messages: a spliced line keeps its segments and CRC,
and only its rest is recompressed. A row that does not decode is left as it
was (a block ends before it); `sessionstore db vacuum` then gives the space
back. The downgrade writes each block's lines back as rows of codecs 0-2 (no
segment) or 6-8 (as an import at 0013 writes them) with their kind and entry
type, and drops the column. The codec is spelled out here rather than imported, so this revision
keeps doing what it did when the packing module changes.

On PostgreSQL the upgrade runs as the tables' owner (as 0012 did); FORCE ROW
LEVEL SECURITY on source_lines is lifted inside the transaction so the owner
converts every role's lines, and set again before the commit.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import logging
import time
from typing import Any, NamedTuple, Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
SPLICE_RAW, SEGMENTS_RAW, BLOCK = 3, 6, 9
LEVEL, MIN_PACKED = 3, 48
BLOCK_LINES, BLOCK_BYTES = 64, 65_536
BATCH = 2000
BLOCK_KIND = "block"

_SESSIONS = "SELECT DISTINCT session_id FROM source_lines WHERE line_no > 0 ORDER BY session_id"
_DICTIONARY = "SELECT raw FROM source_lines WHERE session_id = :id AND line_no = 0"
_ROWS = (
    "SELECT line_no, message_seq, raw, owner, kind, entry_type FROM source_lines "
    "WHERE session_id = :id AND line_no > :after "
    "ORDER BY line_no LIMIT :n"
)
_DELETE = "DELETE FROM source_lines WHERE session_id = :id AND line_no BETWEEN :first AND :last"
_INSERT = (
    "INSERT INTO source_lines (session_id, line_no, kind, entry_type, message_seq, line_count, raw, owner) "
    "VALUES (:id, :n, :kind, :type, :seq, :count, :raw, :owner)"
)

log = logging.getLogger("sessionstore.migrate")


class _Line(NamedTuple):
    """One line as a block stores it: its number, message seq, segment index (with CRC), rest, kind, entry type."""

    line_no: int
    seq: int | None
    cut: bytes
    rest: bytes
    kind: str
    entry_type: str | None


class _Codec:
    """One session's codecs 0-9 as this revision reads and writes them (without the messages they splice)."""

    def __init__(self, dictionary: bytes | None):
        data = zstandard.ZstdCompressionDict(dictionary) if dictionary is not None else None
        self.packed = ZSTD_DICT if data is not None else ZSTD
        self.lines = zstandard.ZstdCompressor(level=LEVEL, dict_data=data, write_content_size=True)
        self.blocks = zstandard.ZstdCompressor(
            level=LEVEL, dict_data=data, write_content_size=True, write_checksum=True
        )
        self.with_dict = zstandard.ZstdDecompressor(dict_data=data) if data is not None else None
        self.plain = zstandard.ZstdDecompressor()

    def pack(self, data: bytes, compressor: zstandard.ZstdCompressor) -> bytes:
        """Codec 0, 1 or 2 of `data`, whichever is shortest."""
        if len(data) >= MIN_PACKED:
            packed = compressor.compress(data)
            if len(packed) + 1 < len(data):
                return bytes((self.packed,)) + packed
        return b"\x00" + data

    def decode(self, codec: int, body: bytes) -> bytes:
        """The bytes of a codec 0, 1 or 2 body."""
        if codec == RAW:
            return body
        if codec == ZSTD:
            return self.plain.decompress(body)
        if codec == ZSTD_DICT and self.with_dict is not None:
            return self.with_dict.decompress(body)
        raise ValueError(f"unknown codec {codec} (or its dictionary is missing)")

    def line(self, row: Sequence[Any]) -> _Line:
        """A per-line row (line_no, message_seq, raw of codec 0-8, owner, kind, entry_type) as a block line;
        raises ValueError or ZstdError when it does not decode."""
        line_no, seq, stored = int(row[0]), (int(row[1]) if row[1] is not None else None), bytes(row[2])
        codec, body = stored[0], stored[1:]
        if codec <= ZSTD_DICT:
            cut, rest = (b"\x00" if seq is not None else b""), self.decode(codec, body)
        elif seq is None:
            raise ValueError("a spliced line without its message")
        elif codec < SEGMENTS_RAW:  # content only: offset, CRC-32, rest -> one whole content segment
            at, pos = _read_varint(body, 0)
            cut, rest = b"\x01" + _varint(at) + b"\x00" + body[pos : pos + 4], self.decode(codec - 3, body[pos + 4 :])
        elif codec < BLOCK:
            end = _segments_end(body, 0) + 4
            cut, rest = body[:end], self.decode(codec - SEGMENTS_RAW, body[end:])
        else:
            raise ValueError(f"unknown codec {codec}")
        return _Line(line_no, seq, cut, rest, row[4], row[5])

    def block(self, lines: Sequence[_Line]) -> tuple[int | None, bytes]:
        """(lowest seq, BLOCK raw) of `lines`."""
        seqs = [line.seq for line in lines if line.seq is not None]
        base = min(seqs, default=0)
        index = bytearray()
        previous = lines[0].line_no
        for line in lines:
            tag = _varint(line.seq - base + 1) if line.seq is not None else b"\x00"
            index += _varint(line.line_no - previous) + tag + _varint(len(line.rest)) + line.cut
            previous = line.line_no
        kinds = b"".join(_kind_entry(line.kind, line.entry_type) for line in lines)
        body = self.pack(b"".join(line.rest for line in lines) + kinds, self.blocks)
        head = bytes((BLOCK, body[0])) + _varint(len(lines)) + _varint(base) + _varint(max(seqs, default=0) - base)
        return (min(seqs) if seqs else None), head + bytes(index) + body[1:]

    def unblock(self, first: int, stored: bytes) -> list[_Line]:
        """The lines of a BLOCK row."""
        count, pos = _read_varint(stored, 2)
        base, pos = _read_varint(stored, pos)
        _, pos = _read_varint(stored, pos)
        lines, line_no = [], first
        for _ in range(count):
            step, pos = _read_varint(stored, pos)
            tag, pos = _read_varint(stored, pos)
            length, pos = _read_varint(stored, pos)
            start = pos
            if tag:
                pos = _segments_end(stored, pos)
                pos += 4 if stored[start] else 0
            line_no += step
            lines.append((line_no, base + tag - 1 if tag else None, stored[start:pos], length))
        rests = self.decode(stored[1], stored[pos:])
        out, done = [], sum(line[3] for line in lines)
        kinds = []
        for _ in lines:
            length, done = _read_varint(rests, done)
            kind, done = rests[done : done + length].decode("utf-8"), done + length
            length, done = _read_varint(rests, done)
            entry = rests[done : done + length - 1].decode("utf-8", "surrogatepass") if length else None
            kinds.append((kind, entry))
            done += max(0, length - 1)
        done = 0
        for (line_no, seq, cut, length), (kind, entry) in zip(lines, kinds, strict=True):
            out.append(_Line(line_no, seq, cut, rests[done : done + length], kind, entry))
            done += length
        return out

    def per_line(self, line: _Line) -> bytes:
        """The line as a row of codec 0-2 (no segment) or 6-8, as 0013 imports wrote it."""
        if line.cut[:1] in (b"", b"\x00"):
            return self.pack(line.rest, self.lines)
        inner = self.pack(line.rest, self.lines)
        return bytes((inner[0] + SEGMENTS_RAW,)) + line.cut + inner[1:]


def _kind_entry(kind: str, entry_type: str | None) -> bytes:
    """A line's kind and entry type as a block keeps them."""
    text = kind.encode("utf-8")
    if entry_type is None:
        return _varint(len(text)) + text + b"\x00"
    entry = entry_type.encode("utf-8", "surrogatepass")
    return _varint(len(text)) + text + _varint(len(entry) + 1) + entry


def _segments_end(data: bytes, pos: int) -> int:
    """Where the segment list (count, then gap, tag[, start, length] each) at `pos` ends (before its CRC)."""
    count, pos = _read_varint(data, pos)
    for _ in range(count):
        _, pos = _read_varint(data, pos)
        tag, pos = _read_varint(data, pos)
        if tag & 1:
            _, pos = _read_varint(data, pos)
            _, pos = _read_varint(data, pos)
    return pos


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
    raise ValueError("a varint is truncated")


def _owner_sees_every_row(bind: sa.engine.Connection) -> bool:
    """PostgreSQL: lift FORCE ROW LEVEL SECURITY on source_lines for this transaction (True: it was forced)."""
    if bind.dialect.name != "postgresql":
        return False
    query = sa.text("SELECT relforcerowsecurity FROM pg_class WHERE oid = 'source_lines'::regclass")
    if not bind.execute(query).scalar():
        return False
    bind.execute(sa.text("ALTER TABLE source_lines NO FORCE ROW LEVEL SECURITY"))
    return True


def _force_again(bind: sa.engine.Connection, forced: bool) -> None:
    if forced:
        bind.execute(sa.text("ALTER TABLE source_lines FORCE ROW LEVEL SECURITY"))


class _Blocks:
    """One session's per-line rows gathered into blocks, written a batch at a time."""

    def __init__(self, bind: sa.engine.Connection, session_id: str, codec: _Codec):
        self.bind, self.session_id, self.codec = bind, session_id, codec
        self.owner: Any = None
        self.pending: list[_Line] = []
        self.size = 0
        self.deletes: list[dict[str, Any]] = []
        self.inserts: list[dict[str, Any]] = []

    def add(self, line: _Line, owner: Any) -> None:
        """Add the next line (of `owner`: a block holds the lines of one owner)."""
        full = len(self.pending) >= BLOCK_LINES or self.size + len(line.rest) > BLOCK_BYTES
        if self.pending and (full or owner != self.owner):
            self.close()
        self.owner = owner
        self.pending.append(line)
        self.size += len(line.rest)

    def close(self) -> None:
        """The pending lines become one block."""
        lines, self.pending, self.size = self.pending, [], 0
        if not lines:
            return
        seq, raw = self.codec.block(lines)
        first, last = lines[0].line_no, lines[-1].line_no
        self.deletes.append({"id": self.session_id, "first": first, "last": last})
        self.inserts.append(
            {
                "id": self.session_id,
                "n": first,
                "kind": BLOCK_KIND,
                "type": None,
                "seq": seq,
                "count": len(lines),
                "raw": raw,
                "owner": self.owner,
            }
        )

    def write(self) -> None:
        if self.deletes:
            self.bind.execute(sa.text(_DELETE), self.deletes)
            self.bind.execute(sa.text(_INSERT), self.inserts)
        self.deletes, self.inserts = [], []


def _to_blocks(bind: sa.engine.Connection, session_id: str) -> int:
    """Every per-line row of one session into blocks; returns how many lines it read."""
    row = bind.execute(sa.text(_DICTIONARY), {"id": session_id}).first()
    blocks = _Blocks(bind, session_id, _Codec(bytes(row[0]) if row is not None else None))
    last, read = 0, 0
    while True:
        rows = bind.execute(sa.text(_ROWS), {"id": session_id, "after": last, "n": BATCH}).all()
        if not rows:
            break
        for row in rows:
            last, owner = int(row[0]), row[3]
            try:
                line = blocks.codec.line(row)
            except (ValueError, IndexError, zstandard.ZstdError):
                blocks.close()  # a row that does not decode stays as it is, between two blocks
                continue
            blocks.add(line, owner)
        read += len(rows)
        blocks.write()
    blocks.close()
    blocks.write()
    return read


def upgrade() -> None:
    op.add_column("source_lines", sa.Column("line_count", sa.Integer(), nullable=False, server_default="1"))
    bind = op.get_bind()
    forced = _owner_sees_every_row(bind)
    sessions = [r[0] for r in bind.execute(sa.text(_SESSIONS))]
    started, lines = time.monotonic(), 0
    for n, session_id in enumerate(sessions, 1):
        lines += _to_blocks(bind, session_id)
        if time.monotonic() - started > 5:
            log.info("sessionstore: 0015: %d of %d sessions in blocks (%d lines)", n, len(sessions), lines)
            started = time.monotonic()
    _force_again(bind, forced)


def downgrade() -> None:
    bind = op.get_bind()
    forced = _owner_sees_every_row(bind)
    for (session_id,) in bind.execute(sa.text(_SESSIONS)).all():
        row = bind.execute(sa.text(_DICTIONARY), {"id": session_id}).first()
        codec = _Codec(bytes(row[0]) if row is not None else None)
        blocks = bind.execute(
            sa.text(
                "SELECT line_no, raw, owner FROM source_lines WHERE session_id = :id AND line_no > 0 AND kind = :k "
                "ORDER BY line_no"
            ),
            {"id": session_id, "k": BLOCK_KIND},
        ).all()
        for first, stored, owner in blocks:
            lines = codec.unblock(int(first), bytes(stored))
            bind.execute(sa.text(_DELETE), {"id": session_id, "first": int(first), "last": int(first)})
            bind.execute(sa.text(_INSERT), [_line_row(session_id, codec, line, owner) for line in lines])
    _force_again(bind, forced)
    with op.batch_alter_table("source_lines") as batch:
        batch.drop_column("line_count")


def _line_row(session_id: str, codec: _Codec, line: _Line, owner: Any) -> dict[str, Any]:
    """The insert parameters of one line written back as its own row."""
    return {
        "id": session_id,
        "n": line.line_no,
        "kind": line.kind,
        "type": line.entry_type,
        "seq": line.seq,
        "count": 1,
        "raw": codec.per_line(line),
        "owner": owner,
    }
