"""Spliced source lines: a line carrying a message is stored without the content `messages` holds already.

From 0010 each `source_lines.raw` is a codec byte (0 raw, 1 zstd, 2 zstd with the
session's dictionary, row `line_no = 0`) and a body. A line that carries a
message (message_seq set) also holds that message's content, stored a second
time in `messages.content_json`. From this revision such a line, when the
content's UTF-8 bytes occur in it verbatim (16 bytes or more), is stored as
codec 3, 4 or 5 (codecs 0, 1, 2 of the rest of the line): a varint offset where
the content goes back, the CRC-32 of the whole line, then the body of the
line's prefix + suffix. Each spliced row is checked to rebuild its line exactly
before it is written; a line that does not is left as it was.

The upgrade rewrites the message lines session by session, in batches, inside
the one upgrade transaction (the runner backs the SQLite file up first); the
downgrade writes every spliced line back as codec 1 or 2. The codec is spelled
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

import zlib
from typing import Callable, Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
SPLICE_RAW = 3
LEVEL, MIN_PACKED, MIN_SPLICED = 3, 48, 16
BATCH = 2000
TABLES = ("source_lines", "messages")

_SESSIONS = "SELECT DISTINCT session_id FROM source_lines WHERE message_seq IS NOT NULL ORDER BY session_id"
_DICTIONARY = "SELECT raw FROM source_lines WHERE session_id = :id AND line_no = 0"
_MESSAGE_LINES = (
    "SELECT s.line_no, s.raw, m.content_json FROM source_lines s JOIN messages m "
    "ON m.session_id = s.session_id AND m.seq = s.message_seq "
    "WHERE s.session_id = :id AND s.line_no > :after ORDER BY s.line_no LIMIT :n"
)
_UPDATE = "UPDATE source_lines SET raw = :raw WHERE session_id = :id AND line_no = :n"


class _Codec:
    """One session's codecs 0-5 as this revision writes and reads them."""

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

    def splice(self, raw: bytes, content: bytes) -> bytes | None:
        """Codec 3, 4 or 5 of `raw` without `content`; None when it does not rebuild `raw` exactly."""
        at = raw.find(content) if len(content) >= MIN_SPLICED else -1
        if at < 0:
            return None
        inner = self.pack(raw[:at] + raw[at + len(content) :])
        stored = bytes((inner[0] + SPLICE_RAW,)) + _varint(at) + zlib.crc32(raw).to_bytes(4, "big") + inner[1:]
        return stored if self.unsplice(stored, content) == raw else None

    def unsplice(self, stored: bytes, content: bytes) -> bytes:
        """The line a codec 3, 4 or 5 row holds, `content` put back; raises ValueError when it does not check."""
        at, start = _read_varint(stored, 1)
        rest = self.decode(stored[0] - SPLICE_RAW, stored[start + 4 :])
        line = rest[:at] + content + rest[at:]
        if at > len(rest) or zlib.crc32(line) != int.from_bytes(stored[start : start + 4], "big"):
            raise ValueError("a spliced line does not match its message's content")
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


def _rewrite(bind: sa.engine.Connection, convert: "Callable[[_Codec, bytes, bytes], bytes | None]") -> None:
    """Every message line of every session through `convert(codec, stored, content)` (None: left as it is)."""
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
            for n, stored, content_json in rows:
                new = convert(codec, bytes(stored), content_json.encode("utf-8"))
                if new is not None:
                    updates.append({"id": session_id, "n": int(n), "raw": new})
            if updates:
                bind.execute(sa.text(_UPDATE), updates)


def _spliced(codec: _Codec, stored: bytes, content: bytes) -> bytes | None:
    """A codec 0-2 row spliced; a row already spliced, or one that does not decode, is left as it is."""
    if stored[0] > ZSTD_DICT:
        return None
    try:
        raw = codec.decode(stored[0], stored[1:])
    except (ValueError, zstandard.ZstdError):
        return None
    return codec.splice(raw, content)


def _whole(codec: _Codec, stored: bytes, content: bytes) -> bytes | None:
    """A spliced row back as codec 1 or 2 (raises when it does not rebuild: 0011 could not read it)."""
    if stored[0] <= ZSTD_DICT:
        return None
    return codec.pack(codec.unsplice(stored, content))


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
