"""Content-addressed blob store: large payloads (spilled tool results) stored once.

A blob is keyed by the sha256 of its bytes and kept zlib-compressed (or raw
when compression does not pay). Writing the same bytes twice is a no-op, so
callers never need to check first.
"""

from __future__ import annotations

import hashlib
import time
import zlib
from typing import TYPE_CHECKING

from ..core.errors import SessionStoreError

if TYPE_CHECKING:
    from ..engine.db import Database

ZLIB = "zlib"
RAW = "none"
ZLIB_LEVEL = 6


class BlobNotFound(SessionStoreError, LookupError):
    """No blob with that sha256 in the store."""


class BlobCorrupt(SessionStoreError):
    """A stored blob does not hash to its key (damaged storage)."""


def blob_sha(data: bytes) -> str:
    """The blob key of `data`: its sha256 in hex."""
    return hashlib.sha256(data).hexdigest()


def put_blob(db: "Database", data: bytes) -> str:
    """Store `data` once (idempotent) and return its sha256.

    Into a session shared with this role (PostgreSQL) the bytes go as they are: the database checks that a
    share writer's blob hashes to its key (revision 0019), and compresses it itself.
    """
    sha = blob_sha(data)
    packed = zlib.compress(data, ZLIB_LEVEL)
    compression = ZLIB
    if len(packed) >= len(data) or db.writing_shared:
        packed, compression = data, RAW
    db.execute(
        "INSERT INTO blobs (sha256, size, compression, data, created_at) "
        "VALUES (:sha, :size, :compression, :data, :now) ON CONFLICT DO NOTHING",
        {"sha": sha, "size": len(data), "compression": compression, "data": packed, "now": time.time()},
    ).close()
    return sha


def get_blob(db: "Database", sha: str) -> bytes:
    """The bytes stored under `sha`, verified against it; raises BlobNotFound."""
    row = db.one("SELECT compression, data, size FROM blobs WHERE sha256 = :sha", {"sha": sha})
    if row is None:
        raise BlobNotFound(f"no blob {sha}")
    compression, packed, size = row[0], bytes(row[1]), int(row[2])
    try:
        data = zlib.decompress(packed) if compression == ZLIB else packed
    except zlib.error as exc:
        raise BlobCorrupt(f"blob {sha} is damaged: its stored bytes do not decompress ({exc})") from exc
    if len(data) != size or blob_sha(data) != sha:
        raise BlobCorrupt(f"blob {sha} is damaged: it does not match its content")
    return data
