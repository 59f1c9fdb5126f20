"""Packed source lines: every stored `source_lines.raw` gets a codec byte and is zstd-compressed.

An imported line was kept raw, so a store was bigger than the files it came
from (source_lines alone 1.2x their bytes). From this revision each `raw`
starts with a codec byte: 0 raw bytes follow, 1 a zstd frame, 2 a zstd frame
made with the session's dictionary, which is the session's row `line_no = 0`
(kind `zdict`, trained on its first lines when it has enough of them).

The upgrade rewrites every existing row that way, session by session, inside
the one upgrade transaction (the runner backs the SQLite file up first); the
downgrade writes every line back raw and drops the dictionary rows. The codec
is spelled out here rather than imported, so this revision keeps doing what it
did when the packing module changes.

On PostgreSQL the upgrade runs as the tables' owner (as 0009 did); FORCE ROW
LEVEL SECURITY on source_lines is lifted inside the transaction so the owner
converts every role's lines, not only its own, and set again before the commit.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from typing import Any, Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RAW, ZSTD, ZSTD_DICT = 0, 1, 2
DICT_KIND = "zdict"
TRAIN_MIN_LINES, TRAIN_SAMPLES, DICT_BYTES, LEVEL, MIN_PACKED = 256, 256, 16_384, 3, 48
TRAIN_K, TRAIN_D = 400, 6
BATCH = 2000


def _sessions(bind: sa.engine.Connection) -> list[str]:
    return [r[0] for r in bind.execute(sa.text("SELECT DISTINCT session_id FROM source_lines ORDER BY session_id"))]


def _lines(bind: sa.engine.Connection, session_id: str) -> list[tuple[int, bytes]]:
    rows = bind.execute(
        sa.text("SELECT line_no, raw FROM source_lines WHERE session_id = :id AND line_no > 0 ORDER BY line_no"),
        {"id": session_id},
    )
    return [(int(n), bytes(raw)) for n, raw in rows]


def _update(bind: sa.engine.Connection, session_id: str, rows: list[tuple[int, bytes]]) -> None:
    statement = sa.text("UPDATE source_lines SET raw = :raw WHERE session_id = :id AND line_no = :n")
    for start in range(0, len(rows), BATCH):
        bind.execute(statement, [{"id": session_id, "n": n, "raw": raw} for n, raw in rows[start : start + BATCH]])


def _pack(compressor: zstandard.ZstdCompressor, codec: int, raw: bytes) -> bytes:
    if len(raw) >= MIN_PACKED:
        packed = compressor.compress(raw)
        if len(packed) + 1 < len(raw):
            return bytes((codec,)) + packed
    return b"\x00" + raw


def _owner_sees_every_line(bind: sa.engine.Connection) -> bool:
    """PostgreSQL: lift FORCE ROW LEVEL SECURITY on source_lines for this transaction (the owner then reads every row).

    Returns whether it was forced; `_force_again` sets it back before the commit (DDL is transactional
    there, so a failed upgrade leaves it as it was).
    """
    if bind.dialect.name != "postgresql":
        return False
    forced = bool(
        bind.execute(sa.text("SELECT relforcerowsecurity FROM pg_class WHERE oid = 'source_lines'::regclass")).scalar()
    )
    if forced:
        bind.execute(sa.text("ALTER TABLE source_lines NO FORCE ROW LEVEL SECURITY"))
    return forced


def _force_again(bind: sa.engine.Connection, forced: bool) -> None:
    if forced:
        bind.execute(sa.text("ALTER TABLE source_lines FORCE ROW LEVEL SECURITY"))


def upgrade() -> None:
    bind = op.get_bind()
    forced = _owner_sees_every_line(bind)
    for session_id in _sessions(bind):
        lines = _lines(bind, session_id)
        dictionary: Any = None
        if len(lines) >= TRAIN_MIN_LINES:
            try:
                samples: list[bytes | bytearray | memoryview] = [raw for _, raw in lines[:TRAIN_SAMPLES]]
                trained = zstandard.train_dictionary(DICT_BYTES, samples, k=TRAIN_K, d=TRAIN_D, level=LEVEL)
                dictionary = zstandard.ZstdCompressionDict(trained.as_bytes())
            except zstandard.ZstdError:
                dictionary = None
        if dictionary is not None:
            owner = bind.execute(
                sa.text("SELECT owner FROM source_lines WHERE session_id = :id AND line_no > 0 LIMIT 1"),
                {"id": session_id},
            ).scalar()
            bind.execute(
                sa.text(
                    "INSERT INTO source_lines (session_id, line_no, kind, entry_type, message_seq, raw, owner) "
                    "VALUES (:id, 0, :kind, NULL, NULL, :raw, :owner)"
                ),
                {"id": session_id, "kind": DICT_KIND, "raw": dictionary.as_bytes(), "owner": owner},
            )
        compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=dictionary, write_content_size=True)
        codec = ZSTD_DICT if dictionary is not None else ZSTD
        _update(bind, session_id, [(n, _pack(compressor, codec, raw)) for n, raw in lines])
    _force_again(bind, forced)


def downgrade() -> None:
    bind = op.get_bind()
    forced = _owner_sees_every_line(bind)
    for session_id in _sessions(bind):
        row = bind.execute(
            sa.text("SELECT raw FROM source_lines WHERE session_id = :id AND line_no = 0"), {"id": session_id}
        ).first()
        dictionary = zstandard.ZstdCompressionDict(bytes(row[0])) if row is not None else None
        with_dict = zstandard.ZstdDecompressor(dict_data=dictionary) if dictionary is not None else None
        plain = zstandard.ZstdDecompressor()
        out = []
        for n, stored in _lines(bind, session_id):
            codec, body = stored[0], stored[1:]
            if codec == ZSTD_DICT and with_dict is not None:
                body = with_dict.decompress(body)
            elif codec == ZSTD:
                body = plain.decompress(body)
            elif codec != RAW:
                raise ValueError(f"session {session_id} line {n}: unknown codec {codec}")
            out.append((n, body))
        _update(bind, session_id, out)
    bind.execute(sa.text("DELETE FROM source_lines WHERE line_no = 0"))
    _force_again(bind, forced)
