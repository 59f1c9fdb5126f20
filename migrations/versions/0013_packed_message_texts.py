"""Packed message texts (SQLite): content, metadata and usage JSON stored zstd-compressed with trained dictionaries.

SQLite compresses nothing, and `messages` was the largest table of an imported
store (0.62x the JSONL it came from). From this revision a `messages.content_json`,
`metadata_json` or `usage_json` of 64 characters or more may be stored as a BLOB:
the byte 1, then a zstd frame (level 3) that names the dictionary it was made with
(0: none). Dictionaries are trained per column on the store's own rows and kept in
`text_dictionaries` (zstd's random 32-bit id as the key), never changed or deleted.
A TEXT value is the JSON itself, so rows of both kinds mix freely.

The upgrade trains a dictionary per column from up to 2,000 existing values (when
there are at least 256) and packs every existing value that gets shorter, in
batches, inside the one upgrade transaction (the runner backs the file up first);
`sessionstore db vacuum` then gives the space back to the file system. The
downgrade writes every value back as TEXT and drops the table. PostgreSQL: nothing
(TOAST compresses long values already). The codec is spelled out here rather than
imported, so this revision keeps doing what it did when the packing module changes.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import time
from typing import Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PACKED, LEVEL, MIN_PACKED = 1, 3, 64
TRAIN_MIN, TRAIN_SAMPLES, DICT_BYTES = 256, 2000, 32_768
COLUMNS = ("metadata_json", "usage_json")
BATCH = 2000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.execute(
        "CREATE TABLE text_dictionaries (id INTEGER NOT NULL PRIMARY KEY, column_name VARCHAR(32) NOT NULL, "
        "created_at FLOAT NOT NULL, data BLOB NOT NULL)"
    )
    for column in COLUMNS:
        compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=_train(bind, column), write_content_size=True)
        _rewrite(bind, column, lambda text, c=compressor: _pack(c, text))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    dicts = {
        int(i): zstandard.ZstdCompressionDict(bytes(d))
        for i, d in bind.execute(sa.text("SELECT id, data FROM text_dictionaries"))
    }
    for column in COLUMNS:
        _rewrite_packed(bind, column, dicts)
    op.execute("DROP TABLE text_dictionaries")


def _train(bind: sa.engine.Connection, column: str) -> zstandard.ZstdCompressionDict | None:
    """A dictionary trained on the column's existing values, stored; None when they are too few."""
    samples = [
        str(v).encode("utf-8")
        for (v,) in bind.execute(
            sa.text(f"SELECT {column} FROM messages WHERE length({column}) >= :n LIMIT :k"),
            {"n": MIN_PACKED, "k": TRAIN_SAMPLES},
        )
    ]
    if len(samples) < TRAIN_MIN:
        return None
    try:
        data = zstandard.train_dictionary(DICT_BYTES, samples, k=400, d=6, level=LEVEL).as_bytes()  # type: ignore[arg-type]
    except zstandard.ZstdError:
        return None
    dictionary = zstandard.ZstdCompressionDict(data)
    bind.execute(
        sa.text("INSERT INTO text_dictionaries (id, column_name, created_at, data) VALUES (:i, :c, :t, :d)"),
        {"i": dictionary.dict_id(), "c": column, "t": time.time(), "d": data},
    )
    return dictionary


def _pack(compressor: zstandard.ZstdCompressor, text: str) -> str | bytes:
    raw = text.encode("utf-8")
    frame = compressor.compress(raw)
    return bytes((PACKED,)) + frame if len(frame) + 1 < len(raw) else text


def _rewrite(bind: sa.engine.Connection, column: str, pack: object) -> None:
    """Pack every TEXT value of `column` long enough to gain, by rowid batches."""
    after = 0
    select = sa.text(
        f"SELECT rowid, {column} FROM messages WHERE rowid > :after AND typeof({column}) = 'text' "
        f"AND length({column}) >= :n ORDER BY rowid LIMIT :k"
    )
    update = sa.text(f"UPDATE messages SET {column} = :v WHERE rowid = :r")
    while True:
        rows = bind.execute(select, {"after": after, "n": MIN_PACKED, "k": BATCH}).all()
        if not rows:
            return
        changed = []
        for rowid, text in rows:
            value = pack(text)  # type: ignore[operator]
            if value is not text:
                changed.append({"v": value, "r": rowid})
        if changed:
            bind.execute(update, changed)
        after = rows[-1][0]


def _rewrite_packed(bind: sa.engine.Connection, column: str, dicts: dict[int, zstandard.ZstdCompressionDict]) -> None:
    """Every packed value of `column` back to TEXT."""
    plain = zstandard.ZstdDecompressor()
    with_dict = {i: zstandard.ZstdDecompressor(dict_data=d) for i, d in dicts.items()}
    select = sa.text(
        f"SELECT rowid, {column} FROM messages WHERE rowid > :after AND typeof({column}) = 'blob' ORDER BY rowid LIMIT :k"
    )
    update = sa.text(f"UPDATE messages SET {column} = :v WHERE rowid = :r")
    after = 0
    while True:
        rows = bind.execute(select, {"after": after, "k": BATCH}).all()
        if not rows:
            return
        out = []
        for rowid, value in rows:
            frame = bytes(value)[1:]
            dict_id = zstandard.get_frame_parameters(frame).dict_id
            decompressor = with_dict[dict_id] if dict_id else plain
            out.append({"v": decompressor.decompress(frame).decode("utf-8"), "r": rowid})
        bind.execute(update, out)
        after = rows[-1][0]
