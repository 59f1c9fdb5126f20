"""The search index's copy of each indexed text on SQLite: zstd-packed, with a dictionary trained on it.

FTS5 keeps the trigram index only (revision 0014: an external-content table); the text it
was built from lives in `search_texts.packed`, once per distinct text (revision 0017: the
messages holding it name it by `search_rows.text_id`, `text_hash` is its key), in the
format of `textpack`: a TEXT value is the text itself, a BLOB is the byte PACKED and a
zstd frame naming its dictionary (0: none). So the SQL function `sessionstore_unpack`
every SQLite connection has (textpack.register) reads it back, in the `search_text` view FTS5 reads and in the delete trigger. The
dictionary is a row of the index's own table TABLE (revision 0018), never changed or deleted;
it is trained on the first catch-up batch with enough texts, in that batch's write. Being a
table of the index, it is written by whoever builds the index: a store opened read-only (the
`search` command, the MCP server) builds it through a connection that may write the derived
tables and nothing else, and trains the dictionary there like any writer.
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Sequence

import zstandard

from . import textpack

if TYPE_CHECKING:
    from ..engine.db import Database

#: The index's table of the search texts' dictionaries (the shape of `text_dictionaries`: textpack.DICTIONARY_TABLES).
TABLE = "search_dictionaries"
#: Their `column_name`.
COLUMN = "search_body"
#: Bytes of one text a dictionary is trained on (the start of a long tool result says what it is like).
SAMPLE_BYTES = 4096

_local = threading.local()


def text_hash(text: str) -> bytes:
    """The key of one indexed text in `search_texts` (revision 0017): BLAKE2b-128 of its UTF-8 bytes."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _compressor(dict_id: int, data: bytes | None) -> zstandard.ZstdCompressor:
    """This thread's compressor for a dictionary (0: none); a compressor is not thread-safe."""
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = {}
    found = cache.get(dict_id)
    if found is None:
        found = cache[dict_id] = textpack.compressor(zstandard.ZstdCompressionDict(data) if data else None)
    return found


class SearchPacker:
    """Packs search texts for one write transaction, with the store's search dictionary when it has one."""

    def __init__(self, db: "Database") -> None:
        row = db.one(
            f"SELECT id, data FROM {TABLE} WHERE column_name = :c ORDER BY created_at DESC, id DESC LIMIT 1",
            {"c": COLUMN},
        )
        self.db = db
        self.dict_id = int(row[0]) if row else 0
        if row is not None:
            textpack.remember(self.dict_id, bytes(row[1]))
        self._compressor = _compressor(self.dict_id, bytes(row[1]) if row else None)
        #: Text ids by hash met in this transaction (dropped with it: a rollback forgets the texts it stored).
        self.known: dict[bytes, int] = {}

    def pack(self, text: str) -> str | bytes:
        """`text` as stored: a PACKED BLOB when that is shorter, else the text itself."""
        return textpack.pack_with(self._compressor, text)

    def train(self, texts: Sequence[str]) -> bool:
        """Without a dictionary yet: train one on `texts` when they are enough, store and use it; True if so."""
        if self.dict_id:
            return False
        samples = (t.encode("utf-8")[:SAMPLE_BYTES] for t in texts if len(t) >= textpack.MIN_PACKED)
        dictionary = textpack.store_dictionary(self.db, COLUMN, samples, table=TABLE)
        if dictionary is None:
            return False
        self.dict_id = dictionary.dict_id()
        self._compressor = _compressor(self.dict_id, dictionary.as_bytes())
        return True
