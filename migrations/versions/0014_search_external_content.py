"""Search index without its own copy of the text (SQLite): FTS5 external content over a packed copy.

Until now `search_fts` kept every indexed text twice: the trigram index, and FTS5's
own plain copy (`search_fts_content`, 0.25x the JSONL a store was imported from).
From this revision the copy is `search_rows.packed`, in the format of the packed
message texts (0013): TEXT as it is, or a BLOB of the byte 1 and a zstd frame naming
its dictionary, trained on the store's own search texts and kept in
`text_dictionaries` under the column name `search_body`. `search_fts` is an
external-content table whose content is the view `search_text` (the texts unpacked
by the `sessionstore_unpack` function every sessionstore SQLite connection has), so
snippets, bm25 and FTS5's integrity check read the one copy. Deleting a search row
(also by cascade from its message) gives FTS5 the old text in the delete trigger,
which external content needs to remove the row's terms.

The copy is kept rather than the index reading `messages`: a delete must pass the
text the row was indexed with, which a cascade from `messages` has already removed,
and which a newer text extractor would not reproduce.

The upgrade reads each text from the old table, packs it, and writes it into the new
index, in batches inside the one upgrade transaction (the runner backs the file up
first), then merges the new index into one segment; an old FTS row without a search
row is dropped, a search row without an FTS row keeps an empty text (doctor finds it
stale and reindexes it). The downgrade
writes the texts back into a plain FTS5 table and drops the column, view and
dictionary. PostgreSQL: nothing (its `search_docs` is a table of its own, compressed
by TOAST). The codec is spelled out here, as in 0013, so this revision keeps doing
what it did when the packing modules change.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import time
from typing import Iterator, Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PACKED, LEVEL, MIN_PACKED = 1, 3, 64
TRAIN_MIN, TRAIN_SAMPLES, DICT_BYTES, SAMPLE_BYTES = 256, 2000, 32_768, 4096
COLUMN = "search_body"
BATCH = 2000
FTS_OPTIONS = "tokenize='trigram', detail=full"
TRIGGER = "search_rows_ad"


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER {TRIGGER}")
    op.execute("ALTER TABLE search_fts RENAME TO search_fts_old")
    op.execute("ALTER TABLE search_rows ADD COLUMN packed BLOB")
    op.execute("CREATE VIEW search_text (id, body) AS SELECT id, sessionstore_unpack(packed) FROM search_rows")
    op.execute(
        f"CREATE VIRTUAL TABLE search_fts USING fts5(body, content='search_text', content_rowid='id', {FTS_OPTIONS})"
    )
    # As in 0002: merging runs after each catch-up, not on every insert.
    op.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('automerge', 0)")
    compressor = zstandard.ZstdCompressor(level=LEVEL, dict_data=_train(bind), write_content_size=True)
    _move_texts(bind, compressor)
    # One merged index, as `search --rebuild` leaves it: the batches above wrote hundreds of small segments.
    op.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
    op.execute("DROP TABLE search_fts_old")
    op.execute(
        f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON search_rows BEGIN "
        "INSERT INTO search_fts(search_fts, rowid, body) VALUES ('delete', old.id, sessionstore_unpack(old.packed)); END"
    )


def _old_texts(bind: sa.engine.Connection, after: int, limit: int) -> list[tuple[int, str]]:
    """(search row id, its text in the old index; '' when the index lost it), by id from `after`."""
    rows = bind.execute(
        sa.text(
            "SELECT r.id, f.body FROM search_rows r LEFT JOIN search_fts_old f ON f.rowid = r.id "
            "WHERE r.id > :after ORDER BY r.id LIMIT :k"
        ),
        {"after": after, "k": limit},
    ).all()
    return [(int(i), str(body) if body is not None else "") for i, body in rows]


def _train(bind: sa.engine.Connection) -> zstandard.ZstdCompressionDict | None:
    """A dictionary trained on the first indexed texts, stored; None when they are too few."""
    samples: list[bytes] = []
    after = 0
    while len(samples) < TRAIN_SAMPLES:
        rows = _old_texts(bind, after, BATCH)
        if not rows:
            break
        samples += [body.encode("utf-8")[:SAMPLE_BYTES] for _, body in rows if len(body) >= MIN_PACKED]
        after = rows[-1][0]
    samples = samples[:TRAIN_SAMPLES]
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


def _pack(compressor: zstandard.ZstdCompressor, text: str) -> str | bytes:
    if len(text) < MIN_PACKED:
        return text
    raw = text.encode("utf-8")
    frame = compressor.compress(raw)
    return bytes((PACKED,)) + frame if len(frame) + 1 < len(raw) else text


def _move_texts(bind: sa.engine.Connection, compressor: zstandard.ZstdCompressor) -> None:
    """Each search row's text packed into `search_rows.packed` and indexed in the new table."""
    update = sa.text("UPDATE search_rows SET packed = :v WHERE id = :r")
    insert = sa.text("INSERT INTO search_fts (rowid, body) VALUES (:r, :b)")
    after = 0
    while True:
        rows = _old_texts(bind, after, BATCH)
        if not rows:
            return
        bind.execute(update, [{"v": _pack(compressor, body), "r": rowid} for rowid, body in rows])
        bind.execute(insert, [{"r": rowid, "b": body} for rowid, body in rows])
        after = rows[-1][0]


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER {TRIGGER}")
    op.execute(f"CREATE VIRTUAL TABLE search_fts_plain USING fts5(body, {FTS_OPTIONS})")
    op.execute("INSERT INTO search_fts_plain(search_fts_plain, rank) VALUES ('automerge', 0)")
    insert = sa.text("INSERT INTO search_fts_plain (rowid, body) VALUES (:r, :b)")
    for rows in _packed_texts(bind):
        bind.execute(insert, [{"r": rowid, "b": body} for rowid, body in rows])
    op.execute("DROP TABLE search_fts")
    op.execute("DROP VIEW search_text")
    op.execute("ALTER TABLE search_fts_plain RENAME TO search_fts")
    op.execute("ALTER TABLE search_rows DROP COLUMN packed")
    bind.execute(sa.text("DELETE FROM text_dictionaries WHERE column_name = :c"), {"c": COLUMN})
    op.execute(
        f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON search_rows BEGIN DELETE FROM search_fts WHERE rowid = old.id; END"
    )


def _packed_texts(bind: sa.engine.Connection) -> Iterator[list[tuple[int, str]]]:
    """Every search row's text, unpacked, in batches by id."""
    dicts = {
        int(i): zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(bytes(d)))
        for i, d in bind.execute(sa.text("SELECT id, data FROM text_dictionaries"))
    }
    plain = zstandard.ZstdDecompressor()
    select = sa.text("SELECT id, packed FROM search_rows WHERE id > :after ORDER BY id LIMIT :k")
    after = 0
    while True:
        rows = bind.execute(select, {"after": after, "k": BATCH}).all()
        if not rows:
            return
        out = []
        for rowid, value in rows:
            if isinstance(value, (bytes, memoryview)):
                frame = bytes(value)[1:]
                dict_id = zstandard.get_frame_parameters(frame).dict_id
                value = (dicts[dict_id] if dict_id else plain).decompress(frame).decode("utf-8")
            out.append((int(rowid), value or ""))
        yield out
        after = rows[-1][0]
