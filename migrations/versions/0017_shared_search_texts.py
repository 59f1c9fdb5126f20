"""Shared search texts (SQLite): each distinct indexed text stored and indexed once.

A resumed or forked Claude Code session repeats its predecessor's messages, and the same
file is read and the same command printed in many sessions; revision 0014 kept and indexed
each copy. From this revision `search_texts` holds each distinct text once, keyed by its
BLAKE2b-128 hash (`hash`, unique), packed as 0014 packed it (`packed`); a `search_rows` row
names its text (`text_id`, indexed) and no longer holds a copy. `search_fts` indexes
`search_texts` (its rowid is the text's id, through the view `search_text`), so a match
finds every message holding that text by `search_rows.text_id`.

References are the `search_rows` rows naming a text, found by the index on `text_id`: the
delete trigger on `search_rows` deletes a text no row names any more, and the delete trigger
on `search_texts` removes its terms from the FTS5 index (the old text, as external content
needs). A count kept beside each text could drift from the rows; this cannot.

The upgrade reads each search row's text (unpacking it with the dictionaries in
`text_dictionaries`), keeps the first packed copy of each distinct text, and builds the
FTS5 index again from the distinct texts, all inside the one upgrade transaction (the runner backs
the file up first). The downgrade gives every search row its own copy again and rebuilds
the index over `search_rows`, as 0014 left it. PostgreSQL: nothing (`search_docs` is
unchanged). The codec and the hash are spelled out here, so this revision keeps doing what
it did when the search modules change.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import hashlib
from typing import Iterator, Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2000
FTS_OPTIONS = "tokenize='trigram', detail=full"
ROWS_TRIGGER = "search_rows_ad"
TEXTS_TRIGGER = "search_texts_ad"


def text_hash(text: str) -> bytes:
    """The key of one indexed text: BLAKE2b-128 of its UTF-8 bytes."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER {ROWS_TRIGGER}")
    op.execute("DROP TABLE search_fts")
    op.execute("DROP VIEW search_text")
    op.execute(
        "CREATE TABLE search_texts (id INTEGER PRIMARY KEY, hash BLOB NOT NULL, packed, "
        "CONSTRAINT uq_search_texts_hash UNIQUE (hash))"
    )
    op.execute("ALTER TABLE search_rows ADD COLUMN text_id INTEGER")
    _create_index("search_texts")
    _share_texts(bind)
    op.execute("ALTER TABLE search_rows DROP COLUMN packed")
    op.execute("CREATE INDEX ix_search_rows_text_id ON search_rows (text_id)")
    # One merged index, as `search --rebuild` leaves it: the batches wrote hundreds of small segments.
    op.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
    op.execute(
        f"CREATE TRIGGER {ROWS_TRIGGER} AFTER DELETE ON search_rows BEGIN "
        "DELETE FROM search_texts WHERE id = old.text_id "
        "AND NOT EXISTS (SELECT 1 FROM search_rows WHERE text_id = old.text_id); END"
    )
    op.execute(
        f"CREATE TRIGGER {TEXTS_TRIGGER} AFTER DELETE ON search_texts BEGIN "
        "INSERT INTO search_fts(search_fts, rowid, body) VALUES ('delete', old.id, sessionstore_unpack(old.packed)); END"
    )


def _create_index(table: str) -> None:
    """The view over `table`'s packed texts and the empty FTS5 index reading it.

    The index is filled from Python, not by FTS5's 'rebuild': that reads the view, whose
    function cannot unpack a text packed with a dictionary trained earlier in this same
    upgrade transaction (an upgrade from 0013 trains one in 0014).
    """
    op.execute(f"CREATE VIEW search_text (id, body) AS SELECT id, sessionstore_unpack(packed) FROM {table}")
    op.execute(
        f"CREATE VIRTUAL TABLE search_fts USING fts5(body, content='search_text', content_rowid='id', {FTS_OPTIONS})"
    )
    # As in 0002: merging runs after each catch-up, not on every insert.
    op.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('automerge', 0)")


def _share_texts(bind: sa.engine.Connection) -> None:
    """Each search row pointed at the one stored and indexed copy of its text (the first row's packed value)."""
    known: dict[bytes, int] = {}
    insert = sa.text("INSERT INTO search_texts (hash, packed) VALUES (:h, :p) RETURNING id")
    index = sa.text("INSERT INTO search_fts (rowid, body) VALUES (:r, :b)")
    update = sa.text("UPDATE search_rows SET text_id = :t WHERE id = :r")
    for rows in _packed_texts(bind, "search_rows"):
        links, new = [], []
        for rowid, packed, text in rows:
            key = text_hash(text)
            found = known.get(key)
            if found is None:
                found = known[key] = int(bind.execute(insert, {"h": key, "p": packed}).scalar_one())
                new.append({"r": found, "b": text})
            links.append({"t": found, "r": rowid})
        if new:
            bind.execute(index, new)
        bind.execute(update, links)


def _packed_texts(bind: sa.engine.Connection, table: str) -> Iterator[list[tuple[int, object, str]]]:
    """(id, packed value, text) of every row of `table`, in batches by id."""
    dicts = {
        int(i): zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(bytes(d)))
        for i, d in bind.execute(sa.text("SELECT id, data FROM text_dictionaries"))
    }
    plain = zstandard.ZstdDecompressor()
    select = sa.text(f"SELECT id, packed FROM {table} WHERE id > :after ORDER BY id LIMIT :k")
    after = 0
    while True:
        rows = bind.execute(select, {"after": after, "k": BATCH}).all()
        if not rows:
            return
        out: list[tuple[int, object, str]] = []
        for rowid, value in rows:
            if isinstance(value, (bytes, memoryview)):
                frame = bytes(value)[1:]
                dict_id = zstandard.get_frame_parameters(frame).dict_id
                text = (dicts[dict_id] if dict_id else plain).decompress(frame).decode("utf-8")
                out.append((int(rowid), bytes(value), text))
            else:
                out.append((int(rowid), value if value is not None else "", str(value or "")))
        yield out
        after = rows[-1][0]


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER {TEXTS_TRIGGER}")
    op.execute(f"DROP TRIGGER {ROWS_TRIGGER}")
    op.execute("DROP TABLE search_fts")
    op.execute("DROP VIEW search_text")
    op.execute("ALTER TABLE search_rows ADD COLUMN packed BLOB")
    op.execute("UPDATE search_rows SET packed = (SELECT t.packed FROM search_texts t WHERE t.id = search_rows.text_id)")
    op.execute("DROP INDEX ix_search_rows_text_id")
    op.execute("ALTER TABLE search_rows DROP COLUMN text_id")
    op.execute("DROP TABLE search_texts")
    _create_index("search_rows")
    index = sa.text("INSERT INTO search_fts (rowid, body) VALUES (:r, :b)")
    for rows in _packed_texts(bind, "search_rows"):
        bind.execute(index, [{"r": rowid, "b": text} for rowid, _, text in rows])
    op.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
    op.execute(
        f"CREATE TRIGGER {ROWS_TRIGGER} AFTER DELETE ON search_rows BEGIN "
        "INSERT INTO search_fts(search_fts, rowid, body) VALUES ('delete', old.id, sessionstore_unpack(old.packed)); END"
    )
