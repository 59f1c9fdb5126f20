"""Copies of an imported file: one source session reached through several paths.

A person restores `~/.claude` from a backup, moves it, or syncs it from
another machine: the same Claude Code session (or Codex rollout) then lives
in two files, one of them often longer. The store recognises the session by
its source identity and content, not by its path. `imports` holds one row per
session, the *source stream*: how many bytes and lines of the source are
stored, and the file that last fed it. `import_files` holds one row per file
with how much of that file is known to be in the stream. A file whose bytes
equal the stream's first bytes is a copy: behind or level, it adds nothing;
longer, its further lines extend the same session. A file that differs is
another conversation and is imported as a session of its own.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from sessionstore.storage.codecs.linepack import session_lines

if TYPE_CHECKING:
    from sessionstore.storage.engine.db import Database

#: Bytes hashed to recognise the same file grown (its first 64 KiB).
PREFIX_BYTES = 65536
#: Bytes compared per step.
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Stream:
    """A session's source stream: how much of its source is stored, and the file that last fed it."""

    session_id: str
    source: str
    source_key: str
    path: str
    bytes_done: int
    lines_done: int
    prefix_sha256: str

    @property
    def offsets(self) -> tuple[Any, ...]:
        """(session, bytes done, lines done, prefix digest): the shape of a file's offsets."""
        return (self.session_id, self.bytes_done, self.lines_done, self.prefix_sha256)


@dataclass(frozen=True)
class Match:
    """How far a file agrees with a stream: whole lines equal up to `bytes`/`lines`, and whether it then differs."""

    bytes: int
    lines: int
    diverges: bool


def prefix_sha(path: str, length: int) -> str:
    """sha256 of the file's first min(length, 64 KiB) bytes: recognizes the same file grown."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(min(length, PREFIX_BYTES))).hexdigest()


def stream_of(db: "Database", session_id: str) -> Stream | None:
    """The source stream of an imported session, else None."""
    row = db.one(
        "SELECT session_id, source, source_key, path, bytes_done, lines_done, prefix_sha256 FROM imports "
        "WHERE session_id = :id",
        {"id": session_id},
    )
    return (
        None
        if row is None
        else Stream(str(row[0]), str(row[1]), str(row[2]), str(row[3]), int(row[4]), int(row[5]), str(row[6]))
    )


def file_offsets(db: "Database", source: str, path: str) -> tuple[Any, ...] | None:
    """(session, bytes done, lines done, prefix digest) of a file read before, else None."""
    row = db.one(
        "SELECT session_id, bytes_done, lines_done, prefix_sha256 FROM import_files WHERE source = :s AND path = :p",
        {"s": source, "p": path},
    )
    return None if row is None else (row[0], int(row[1]), int(row[2]), row[3])


def file_session(db: "Database", path: str) -> tuple[str, str] | None:
    """(session, source) a file was last read into, by path alone (the one with the most read)."""
    row = db.one(
        "SELECT session_id, source FROM import_files WHERE path = :p ORDER BY bytes_done DESC LIMIT 1", {"p": path}
    )
    return None if row is None else (str(row[0]), str(row[1]))


def record_file(
    db: "Database",
    source: str,
    path: str,
    session_id: str,
    bytes_done: int,
    lines_done: int,
    sha: str | None = None,
) -> None:
    """Remember how much of `path` is in `session_id` (insert or move forward); `sha`: its prefix digest, when
    the caller knows it (lines fed from elsewhere than a file), else read from the file."""
    db.execute(
        "INSERT INTO import_files (source, path, session_id, bytes_done, lines_done, prefix_sha256, updated_at) "
        "VALUES (:s, :p, :id, :b, :n, :sha, :now) ON CONFLICT (owner, source, path) DO UPDATE SET "
        "session_id = excluded.session_id, bytes_done = excluded.bytes_done, lines_done = excluded.lines_done, "
        "prefix_sha256 = excluded.prefix_sha256, updated_at = excluded.updated_at",
        {
            "s": source,
            "p": path,
            "id": session_id,
            "b": bytes_done,
            "n": lines_done,
            "sha": sha if sha is not None else prefix_sha(path, bytes_done),
            "now": time.time(),
        },
    ).close()


def compare(db: "Database", stream: Stream, path: str, start: tuple[int, int], end: int) -> Match:
    """Compare the file's bytes from `start` (offset, lines before it) to `end` with the stream's same bytes.

    The stream's bytes come from the file that fed it when that file still
    holds them, else (Claude Code) from the raw lines the store keeps. When
    neither can be read (a Codex source whose file is gone), the file is taken
    as a copy if its first 64 KiB match the stream's.
    """
    theirs = _stream_chunks(db, stream, start[0], end)
    ours = _file_chunks(path, start[0], end)
    if theirs is None:
        if prefix_sha(path, stream.bytes_done) != stream.prefix_sha256:
            return Match(start[0], start[1], True)
        theirs = _file_chunks(path, start[0], end)
    return _agree(ours, theirs, start)


def _agree(ours: Iterator[bytes], theirs: Iterator[bytes], start: tuple[int, int]) -> Match:
    """Walk both byte streams together; stop at the first difference (or where either ends)."""
    offset, lines = start
    good_bytes, good_lines = start
    a, b = b"", b""
    while True:
        if not a:
            a = next(ours, b"")
        if not b:
            b = next(theirs, b"")
        if not a or not b:
            return Match(good_bytes, good_lines, False)
        n = min(len(a), len(b))
        x, y = a[:n], b[:n]
        if x != y:
            same = next(i for i in range(n) if x[i] != y[i])
            last = x.rfind(b"\n", 0, same)
            if last != -1:
                good_bytes, good_lines = offset + last + 1, lines + x.count(b"\n", 0, last + 1)
            return Match(good_bytes, good_lines, True)
        last = x.rfind(b"\n")
        if last != -1:
            good_bytes, good_lines = offset + last + 1, lines + x.count(b"\n", 0, last + 1)
        offset += n
        lines += x.count(b"\n")
        a, b = a[n:], b[n:]


def _file_chunks(path: str, start: int, end: int) -> Iterator[bytes]:
    """The file's bytes [start, end), in chunks."""
    with open(path, "rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            chunk = handle.read(min(_CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


def _stream_chunks(db: "Database", stream: Stream, start: int, end: int) -> Iterator[bytes] | None:
    """The stream's bytes [start, end): from its feeding file while it still holds them, else from kept raw lines."""
    feeder = stream.path
    try:
        usable = (
            os.path.getsize(feeder) >= stream.bytes_done
            and prefix_sha(feeder, stream.bytes_done) == stream.prefix_sha256
        )
    except OSError:
        usable = False
    if usable:
        return _file_chunks(feeder, start, min(end, stream.bytes_done))
    if stream.source == "claude-code":
        return _kept_lines(db, stream.session_id, start, min(end, stream.bytes_done))
    return None


def _kept_lines(db: "Database", session_id: str, start: int, end: int) -> Iterator[bytes]:
    """A Claude Code source's bytes [start, end) rebuilt from the raw lines the store keeps of it."""
    offset = 0
    for _, raw in session_lines(db, session_id):
        if offset + len(raw) > start:
            yield raw[max(0, start - offset) : end - offset]
        offset += len(raw)
        if offset >= end:
            return
