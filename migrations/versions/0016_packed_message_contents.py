"""Packed message contents (SQLite): `messages.content_json` stored zstd-compressed with a trained dictionary.

Revision 0013 packed the metadata and usage JSON of messages but left the contents
as TEXT, because reading them back cost a resume a third more. Contents are now
parsed straight from their unpacked UTF-8 bytes, which costs a resume about what a
TEXT content did, and they are the largest part of `messages`. From this revision a
`content_json` of 64 characters or more may be a BLOB: the byte 1, then a zstd
frame (level 3) naming the dictionary it was made with (0: none), the format of
revision 0013; its dictionaries are `text_dictionaries` rows for `content_json`.

The upgrade trains a content dictionary from up to 2,000 existing contents (when
there are at least 256) and packs every existing content that gets shorter, in
batches, inside the one upgrade transaction (the runner backs the file up first);
`sessionstore db vacuum` then gives the space back. The downgrade writes every
content back as TEXT and deletes the content dictionaries. PostgreSQL: nothing
(TOAST compresses long values already). The codec is spelled out here rather than
imported, so this revision keeps doing what it did when the packing module changes.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import time
from typing import Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PACKED, LEVEL, MIN_PACKED = 1, 3, 64
TRAIN_MIN, TRAIN_SAMPLES, DICT_BYTES = 256, 2000, 32_768
COLUMN = "content_json"
BATCH = 2000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=_train(bind), write_content_size=True)
    after = 0
    select = sa.text(
        f"SELECT rowid, {COLUMN} FROM messages WHERE rowid > :after AND typeof({COLUMN}) = 'text' "
        f"AND length({COLUMN}) >= :n ORDER BY rowid LIMIT :k"
    )
    update = sa.text(f"UPDATE messages SET {COLUMN} = :v WHERE rowid = :r")
    while True:
        rows = bind.execute(select, {"after": after, "n": MIN_PACKED, "k": BATCH}).all()
        if not rows:
            return
        changed = []
        for rowid, text in rows:
            raw = str(text).encode("utf-8")
            frame = compressor.compress(raw)
            if len(frame) + 1 < len(raw):
                changed.append({"v": bytes((PACKED,)) + frame, "r": rowid})
        if changed:
            bind.execute(update, changed)
        after = rows[-1][0]


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    dicts = {
        int(i): zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(bytes(d)))
        for i, d in bind.execute(sa.text("SELECT id, data FROM text_dictionaries"))
    }
    plain = zstandard.ZstdDecompressor()
    select = sa.text(
        f"SELECT rowid, {COLUMN} FROM messages WHERE rowid > :after AND typeof({COLUMN}) = 'blob' "
        "ORDER BY rowid LIMIT :k"
    )
    update = sa.text(f"UPDATE messages SET {COLUMN} = :v WHERE rowid = :r")
    after = 0
    while True:
        rows = bind.execute(select, {"after": after, "k": BATCH}).all()
        if not rows:
            break
        out = []
        for rowid, value in rows:
            frame = bytes(value)[1:]
            dict_id = zstandard.get_frame_parameters(frame).dict_id
            out.append({"v": (dicts[dict_id] if dict_id else plain).decompress(frame).decode("utf-8"), "r": rowid})
        bind.execute(update, out)
        after = rows[-1][0]
    bind.execute(sa.text("DELETE FROM text_dictionaries WHERE column_name = :c"), {"c": COLUMN})


def _train(bind: sa.engine.Connection) -> zstandard.ZstdCompressionDict | None:
    """A dictionary trained on the existing contents, stored; None when they are too few."""
    samples = [
        str(v).encode("utf-8")
        for (v,) in bind.execute(
            sa.text(
                f"SELECT {COLUMN} FROM messages WHERE typeof({COLUMN}) = 'text' AND length({COLUMN}) >= :n LIMIT :k"
            ),
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
        {"i": dictionary.dict_id(), "c": COLUMN, "t": time.time(), "d": data},
    )
    return dictionary
