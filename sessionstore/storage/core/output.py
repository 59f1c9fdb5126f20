"""Writing a file the user named: to exactly what the name points at, never around it.

Every writer (exports, `spill materialize`) goes through `open_output`:

- `-` (or no path) is stdout;
- a FIFO, a character device or a socket (`/dev/null`, `>(gzip)`, a named
  pipe) is written in place, streaming, as a shell redirection would;
- a regular file, or a name not yet taken, gets a temporary file beside it
  (created exclusively, never through a symlink planted under its name) that
  replaces it only once complete: an existing file keeps its mode and owner, a
  new one gets mode 0600 like the database (transcripts hold secrets); a
  symlink the user named is followed, so its target is what gets replaced;
- anything else (a directory, a missing parent folder, a closed /dev/fd/N)
  is an `OutputError`: one line saying what and where, nothing written.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO, Iterator, Literal, TextIO, overload

from .errors import SessionStoreError

STDIO = "-"
#: The mode of a file an export creates: the owner's only, like the database it comes from.
NEW_FILE_MODE = 0o600


class OutputError(SessionStoreError, OSError):
    """The named output cannot be written (a folder, a missing parent, a closed descriptor...)."""


@overload
def open_output(
    path: str | os.PathLike[str] | None, *, binary: Literal[False] = ...
) -> AbstractContextManager[TextIO]: ...
@overload
def open_output(path: str | os.PathLike[str] | None, *, binary: Literal[True]) -> AbstractContextManager[BinaryIO]: ...
@overload
def open_output(path: str | os.PathLike[str] | None, *, binary: bool) -> AbstractContextManager[IO[Any]]: ...
def open_output(path: str | os.PathLike[str] | None, *, binary: bool = False) -> AbstractContextManager[IO[Any]]:
    """A stream onto what `path` names (see the module docstring); the file is in place once the block ends."""
    return _open(path, binary)


@contextmanager
def _open(path: str | os.PathLike[str] | None, binary: bool) -> Iterator[IO[Any]]:
    if path is None or os.fspath(path) == STDIO:
        yield from _stdout(binary)
        return
    name = os.fspath(path)
    if not name:
        raise OutputError("no output file named (-o ''): give a file path, or - for stdout")
    target = _target(name)
    if target is None:
        yield from _stream(name, binary)
    else:
        yield from _replace(name, target, binary)


def _stdout(binary: bool) -> Iterator[IO[Any]]:
    """stdout, flushed at the end (text and bytes may share it)."""
    sys.stdout.flush()
    stream: IO[Any] = sys.stdout.buffer if binary else sys.stdout
    yield stream
    stream.flush()


def _target(name: str) -> Path | None:
    """The regular file to replace (symlinks resolved), or None for a stream-like target; checks the name."""
    if name.endswith(os.sep) and not os.path.isdir(name):
        raise OutputError(f"cannot write to {name}: not a folder (a trailing / names one)")
    try:
        info = os.stat(name)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"cannot write to {name}: {exc.strerror}") from exc
    if info is None:
        return _new_file(name)
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"cannot write to {name}: it is a folder; name a file inside it")
    if stat.S_ISREG(info.st_mode):
        return Path(os.path.realpath(name))
    if stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode) or stat.S_ISSOCK(info.st_mode):
        return None
    raise OutputError(f"cannot write to {name}: not a regular file, a pipe or a device")


def _new_file(name: str) -> Path:
    """Where a not-yet-existing name will be created; its folder must exist."""
    if _is_fd_path(name):
        raise OutputError(f"cannot write to {name}: no such open file descriptor")
    real = Path(os.path.realpath(name))
    folder = real.parent
    if not folder.is_dir():
        raise OutputError(f"cannot write to {name}: folder {folder} does not exist")
    return real


def _is_fd_path(name: str) -> bool:
    """/dev/fd/N, /proc/self/fd/N and friends: a descriptor, never a file to create."""
    parent = os.path.dirname(os.path.abspath(name))
    return parent in ("/dev/fd", "/proc/self/fd") or (parent.startswith("/proc/") and parent.endswith("/fd"))


def _stream(name: str, binary: bool) -> Iterator[IO[Any]]:
    """A pipe or a device: opened and written in place, like `> name` in a shell."""
    try:
        handle = open(name, "wb") if binary else open(name, "w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise OutputError(f"cannot write to {name}: {exc.strerror}") from exc
    try:
        with handle:
            yield handle
    except OSError as exc:
        raise OutputError(f"cannot write to {name}: {exc.strerror or exc}") from exc


def _replace(name: str, target: Path, binary: bool) -> Iterator[IO[Any]]:
    """A temporary file beside `target`, renamed over it once complete (keeping an existing file's mode, owner).

    A new file gets NEW_FILE_MODE. The temporary file has a random name, created exclusively and never
    through a symlink (mkstemp), so nothing planted beside the target is written through or blocks it.
    """
    existing = _existing(target)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"cannot write to {name}: {exc.strerror} ({target.parent})") from exc
    tmp = Path(tmp_name)
    try:
        if existing is not None:
            _keep_owner_and_mode(fd, existing)
        else:
            os.fchmod(fd, NEW_FILE_MODE)
        handle = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with handle:
            yield handle
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write to {name}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)


def _existing(target: Path) -> os.stat_result | None:
    """The status of the file about to be replaced, if there is one."""
    try:
        return os.stat(target)
    except FileNotFoundError:
        return None


def _keep_owner_and_mode(fd: int, existing: os.stat_result) -> None:
    """The replacement gets the replaced file's permission bits (and owner, where allowed)."""
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))
    if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, existing.st_uid, existing.st_gid)
        except PermissionError:
            pass


def write_into_folder(directory: str | os.PathLike[str], filename: str, data: bytes, *, mode: int = 0o600) -> Path:
    """Write `data` as `filename` directly inside `directory` (created if missing); returns the file's path.

    The file name is the program's, not the user's: a symlink planted under it is
    replaced, never followed, and the name cannot leave the folder.
    """
    folder = _folder(directory)
    target = folder / filename
    if target.parent != folder:
        raise OutputError(f"refusing to write outside {folder}")
    tmp = folder / f".{filename}.{os.getpid()}.partial"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _folder(directory: str | os.PathLike[str]) -> Path:
    """`directory` as an existing folder (made if missing), or an OutputError saying why it cannot be."""
    if not os.fspath(directory):
        raise OutputError("an empty path names no folder: give one ('.' for this one), or - for stdout")
    folder = Path(directory).expanduser()
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"cannot write into {directory}: it is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create folder {directory}: {exc.strerror or exc}") from exc
    return folder.resolve()
