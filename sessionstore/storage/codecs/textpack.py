"""Message texts stored compressed on SQLite: zstd per value, with dictionaries trained on the store's own rows.

`messages.content_json`, `metadata_json` and `usage_json` hold JSON text. On SQLite
(which compresses nothing) a value long enough to gain is stored as a BLOB: one codec
byte (PACKED) and a zstd frame. The frame names the dictionary it was made with (0:
none); dictionaries are trained per column on the first import batch that has enough
values and kept in `text_dictionaries` (revision 0013), never changed or deleted, so
each id always means the same bytes (the search index's texts use the same format, with
dictionaries of their own in `search_dictionaries`, revision 0018: searchpack.py). A TEXT
value is the JSON itself: every row ever written stays readable and a store mixes both freely. PostgreSQL keeps TEXT (TOAST
compresses long values already).

Readers see JSON text: `loads_stored` decodes a BLOB first, and SQL that looks into a
value (LIKE, substr, length) writes `unpacked(column)`, which `Database.sql` turns into
a call of the `sessionstore_unpack` function registered on each SQLite connection.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import zstandard

from ..core.errors import SessionStoreError

if TYPE_CHECKING:
    from ..engine.db import Database

PACKED = 1
#: Columns of `messages` stored packed, and where `rows.message_row` puts them. A packed content is parsed
#: straight from its unpacked bytes (fastjson.loads_stored), which keeps a resume's decoding near a text's.
COLUMNS = {"usage_json": 9, "metadata_json": 12, "content_json": 13}
#: Columns packed only with a dictionary: a frame without one carries its own entropy tables, and building
#: them cost a resume (which decodes every content of the view) a third more on bench/storage.py's session
#: of appends. Until an import or `db vacuum` (repack) trains the column's dictionary, contents stay TEXT.
DICTIONARY_ONLY = frozenset({"content_json"})
#: Shorter values stay TEXT (a frame's header costs more than it saves on them).
MIN_PACKED = 64
LEVEL = 3
#: A column gets a dictionary from an import batch with at least this many values to train on.
TRAIN_MIN = 256
TRAIN_SAMPLES = 2000
DICT_BYTES = 32_768
#: The SQL function `unpacked(x)` becomes on SQLite.
SQL_FUNCTION = "sessionstore_unpack"
#: Where dictionaries are kept: the transcript columns' (revision 0013) and the search index's own (0018), which
#: any reader may write (the index is derived data a read-only store brings up to date). One id space: a frame
#: names its dictionary by zstd's id, whichever table holds it.
DICTIONARY_TABLES = ("text_dictionaries", "search_dictionaries")


class TextCorrupt(SessionStoreError):
    """A packed message text cannot be decoded (unknown codec, missing dictionary, damaged frame)."""


class StoredJsonCorrupt(TextCorrupt, ValueError):
    """A stored JSON text (packed or not) does not parse: the row was damaged outside sessionstore."""


class MessageCorrupt(TextCorrupt):
    """A transcript message whose stored texts cannot be read; names the message (`seq`, `uuid`)."""

    def __init__(self, seq: int, uuid: str, cause: Exception) -> None:
        super().__init__(f"message seq {seq} ({uuid}) is damaged in the database: {cause}")
        self.seq = seq
        self.uuid = uuid


_lock = threading.Lock()
#: Every dictionary this process has seen, by zstd id (a decompressor each per thread: they are not thread-safe).
_dicts: dict[int, zstandard.ZstdCompressionDict] = {}
_local = threading.local()
#: SQLite files whose dictionaries may be read on a miss (a dictionary another process trained after we opened).
_files: set[str] = set()


def remember(dict_id: int, data: bytes) -> None:
    """Make a dictionary known to this process (ids are zstd's random 32-bit ids: one id, one content)."""
    with _lock:
        if dict_id not in _dicts:
            _dicts[dict_id] = zstandard.ZstdCompressionDict(data)


def watch_file(path: str) -> None:
    """Let a miss look for dictionaries in this SQLite file too."""
    with _lock:
        _files.add(path)


def _fetch(dict_id: int) -> None:
    """Read a dictionary not seen yet from the known store files, by a connection of their own."""
    with _lock:
        paths = sorted(_files)
    for path in paths:
        data = _stored_dictionary(path, dict_id)
        if data is not None:
            remember(dict_id, data)
            return
    raise TextCorrupt(f"a stored text needs dictionary {dict_id}, which this store does not have")


def _stored_dictionary(path: str, dict_id: int) -> bytes | None:
    """The bytes of dictionary `dict_id` in one SQLite file, from whichever of DICTIONARY_TABLES holds it (a file
    older than a table has no such table: it is skipped)."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as conn:
            for table in DICTIONARY_TABLES:
                try:
                    row = conn.execute(f"SELECT data FROM {table} WHERE id = ?", (dict_id,)).fetchone()
                except sqlite3.OperationalError:
                    continue
                if row is not None:
                    return bytes(row[0])
    except sqlite3.Error:
        return None
    return None


def _decompressor(dict_id: int) -> zstandard.ZstdDecompressor:
    """This thread's decompressor for a dictionary id (0: none)."""
    cache: dict[int, zstandard.ZstdDecompressor] | None = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = {}
    found = cache.get(dict_id)
    if found is None:
        if dict_id == 0:
            found = zstandard.ZstdDecompressor()
        else:
            if dict_id not in _dicts:
                _fetch(dict_id)
            found = zstandard.ZstdDecompressor(dict_data=_dicts[dict_id])
        cache[dict_id] = found
    return found


def unpack_bytes(value: bytes) -> bytes:
    """The UTF-8 JSON a packed BLOB holds, as bytes (no str made: parsers and line splicing take bytes); raises
    TextCorrupt."""
    if not value or value[0] != PACKED:
        raise TextCorrupt(f"a stored message text has unknown codec {value[:1]!r}")
    frame = value[1:]
    try:
        return _decompressor(zstandard.get_frame_parameters(frame).dict_id).decompress(frame)
    except zstandard.ZstdError as exc:
        raise TextCorrupt(f"a stored message text does not decode: {exc}") from exc


def unpack(value: bytes) -> str:
    """The JSON text a packed BLOB holds; raises TextCorrupt."""
    try:
        return unpack_bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TextCorrupt(f"a stored message text does not decode: {exc}") from exc


def text_of(value: Any) -> Any:
    """A column value as JSON text: a packed BLOB decoded, anything else as it is (the SQL function's body)."""
    if value.__class__ is bytes:
        return unpack(value)
    return value


def sql_expression(column: str, sqlite: bool) -> str:
    """What `unpacked(column)` is in this engine's SQL."""
    if not sqlite:
        return column
    return f"(CASE WHEN typeof({column}) = 'blob' THEN {SQL_FUNCTION}({column}) ELSE {column} END)"


def register(dbapi_conn: Any) -> None:
    """Give a new SQLite connection the `sessionstore_unpack` function."""
    dbapi_conn.create_function(SQL_FUNCTION, 1, text_of, deterministic=True)


def unpack_failed(exc: BaseException) -> bool:
    """Whether a statement failed because `sessionstore_unpack` raised (a TextCorrupt: SQLite passes on only that
    a function raised, never what)."""
    return isinstance(exc, sqlite3.OperationalError) and "user-defined function raised exception" in str(exc)


class TextPacker:
    """Packs one store's message texts (SQLite), with each column's dictionary when it has one."""

    def __init__(self, db: "Database") -> None:
        self.db = db
        self._compressors: dict[str, zstandard.ZstdCompressor] | None = None
        #: The columns that had a dictionary when they were loaded, or got one since (no query per batch).
        self._with_dictionary: set[str] = set()

    def _load(self) -> dict[str, zstandard.ZstdCompressor]:
        """Each column's compressor: with its newest dictionary, else plain."""
        compressors = {}
        rows = self.db.all("SELECT id, column_name, data FROM text_dictionaries ORDER BY created_at, id")
        newest = {}
        for dict_id, column, data in rows:
            remember(int(dict_id), bytes(data))
            newest[column] = bytes(data)
        self._with_dictionary = set(newest)
        for column in COLUMNS:
            data = newest.get(column)
            compressors[column] = compressor(zstandard.ZstdCompressionDict(data) if data else None)
        return compressors

    def pack(self, column: str, text: str | None) -> str | bytes | None:
        """`text` as stored: a PACKED BLOB when that is shorter, else the text itself (a content too while its
        column has no dictionary)."""
        if text is None or len(text) < MIN_PACKED:
            return text
        if self._compressors is None:
            self._compressors = self._load()
        if column in DICTIONARY_ONLY and column not in self._with_dictionary:
            return text
        return pack_with(self._compressors[column], text)

    def pack_rows(self, rows: Sequence[tuple[Any, ...]], *, train: bool = False) -> Sequence[tuple[Any, ...]]:
        """`message_row` tuples (extra columns after them kept) with their texts packed; `train`: a column without
        a dictionary gets one from these rows when they are enough (an import batch). PostgreSQL: as they are."""
        if not self.db.is_sqlite or not rows:
            return rows
        if train:
            self._train(rows)
        out = []
        for row in rows:
            values = list(row)
            for column, index in COLUMNS.items():
                values[index] = self.pack(column, values[index])
            out.append(tuple(values))
        return out

    def has_dictionary(self, column: str) -> bool:
        """Whether the column's new values are packed with a dictionary."""
        if self._compressors is None:
            self._compressors = self._load()
        return column in self._with_dictionary

    def _train(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Train and store a dictionary for each column that has none and enough values here."""
        for column, index in COLUMNS.items():
            if not self.has_dictionary(column):
                self.train(column, [r[index] for r in rows if r[index] is not None])

    def train(self, column: str, texts: Sequence[str]) -> bool:
        """Train, store and use a dictionary for `column` from `texts` when they are enough; whether it did."""
        if self._compressors is None:
            self._compressors = self._load()
        dictionary = store_dictionary(self.db, column, (t.encode("utf-8") for t in texts if len(t) >= MIN_PACKED))
        if dictionary is None:
            return False
        self._with_dictionary.add(column)
        self._compressors[column] = compressor(dictionary)
        return True


def compressor(dictionary: zstandard.ZstdCompressionDict | None) -> zstandard.ZstdCompressor:
    """A compressor of the packed format: level LEVEL, the content size in each frame, `dictionary` or none."""
    return zstandard.ZstdCompressor(level=LEVEL, dict_data=dictionary, write_content_size=True)


def pack_with(packer: zstandard.ZstdCompressor, text: str) -> str | bytes:
    """`text` as stored: the byte PACKED and its frame when that is shorter, else the text itself."""
    if len(text) < MIN_PACKED:
        return text
    raw = text.encode("utf-8")
    frame = packer.compress(raw)
    if len(frame) + 1 >= len(raw):
        return text
    return bytes((PACKED,)) + frame


def store_dictionary(
    db: "Database", column: str, samples: Iterable[bytes], *, table: str = "text_dictionaries"
) -> zstandard.ZstdCompressionDict | None:
    """A dictionary trained on `samples`, stored in `table` (one of DICTIONARY_TABLES) under `column` (in the
    caller's write) and made known to this process; None when the samples are too few."""
    if table not in DICTIONARY_TABLES:
        raise ValueError(f"{table!r} is not a dictionary table")
    data = _trained(samples)
    if data is None:
        return None
    dictionary = zstandard.ZstdCompressionDict(data)
    db.execute(
        f"INSERT INTO {table} (id, column_name, created_at, data) VALUES (:id, :c, :t, :d)",
        {"id": dictionary.dict_id(), "c": column, "t": time.time(), "d": data},
    ).close()
    remember(dictionary.dict_id(), data)
    return dictionary


def _trained(samples: Iterable[bytes]) -> bytes | None:
    """A dictionary trained on `samples`, or None when they are too few (or zstd cannot train one)."""
    chosen = list(samples)[:TRAIN_SAMPLES]
    if len(chosen) < TRAIN_MIN:
        return None
    try:
        return zstandard.train_dictionary(DICT_BYTES, chosen, k=400, d=6, level=LEVEL).as_bytes()  # type: ignore[arg-type]
    except zstandard.ZstdError:
        return None


#: Rows `repack` reads and rewrites per write transaction.
REPACK_BATCH = 2000


def _update(column: str, rows: list[dict[str, Any]], db: "Database") -> None:
    db.executemany(f"UPDATE messages SET {column} = :v WHERE rowid = :r", rows)


def repack(db: "Database", column: str) -> int:
    """Pack the column's TEXT values, and the frames packed before it had a dictionary, with its dictionary
    (trained here when it has none and the store has enough values: a store that only ever had appends);
    returns how many rows changed.

    Each batch is one write: a row holds the same JSON before and after, so an interrupted run loses nothing
    and the next one goes on. SQLite only (`sessionstore db vacuum` runs it before VACUUM).
    """
    packer = db.text_packer
    if not packer.has_dictionary(column):
        rows = db.all(
            f"SELECT {column} FROM messages WHERE {column} IS NOT NULL AND length({column}) >= :n LIMIT :k",
            {"n": MIN_PACKED, "k": TRAIN_SAMPLES},
        )
        texts = [text_of(r[0]) for r in rows]
        db.run_write(lambda _db: packer.train(column, texts), point="vacuum.train")
        packer = db.text_packer  # a write that rolled back dropped the packer with its unstored dictionary
    with_dictionary = packer.has_dictionary(column)
    changed, after = 0, 0
    select = (
        f"SELECT rowid, {column} FROM messages WHERE rowid > :after AND {column} IS NOT NULL ORDER BY rowid LIMIT :k"
    )
    while rows := db.all(select, {"after": after, "k": REPACK_BATCH}):
        after = int(rows[-1][0])
        updates = []
        for rowid, value in rows:
            text = value
            if value.__class__ is bytes:
                if not with_dictionary or zstandard.get_frame_parameters(value[1:]).dict_id != 0:
                    continue
                text = unpack(value)
            packed = packer.pack(column, text)
            if packed.__class__ is bytes and len(packed) < len(value):
                updates.append({"v": packed, "r": rowid})
        if updates:
            db.run_write(partial(_update, column, updates), point="vacuum.repack")
            changed += len(updates)
    return changed
