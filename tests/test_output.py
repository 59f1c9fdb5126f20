"""`export -o` and `spill materialize` write to what the user named, and `-` is stdout/stdin.

A regular file is replaced atomically and keeps its mode; a symlink's target is
what gets replaced; pipes and devices are streamed into in place; a folder, a
missing parent or a closed /dev/fd/N is one `error:` line and exit 2, with
nothing written.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.storage.codecs.blobs import put_blob
from sessionstore.storage.core.output import OutputError, open_output
from sessionstore.storage.write.spill import spill_filename
from tests.support.cli import run_cli, run_cli_process

FORMATS = ["jsonl", "markdown", "html", "claude-code"]


@pytest.fixture
def session_id(sqlite_url: str) -> str:
    """A small session to export."""
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session(title="out")
        s.append_many([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}])
        return s.id


def export(capsys: pytest.CaptureFixture[str], url: str, sid: str, fmt: str, target: str):  # type: ignore[no-untyped-def]
    return run_cli(capsys, "export", sid, "-f", fmt, "-o", target, "--db", url)


def one_error_line(err: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_existing_file_is_replaced_keeping_its_mode(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path, fmt: str
) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    target.chmod(0o600)
    result = export(capsys, sqlite_url, session_id, fmt, str(target))
    assert result.code == 0, result.err
    assert b"hello" in target.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name != "sessions.db"] == ["out.txt"], "no leftover temp file"


def test_a_replaced_file_keeps_its_owner(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    target = tmp_path / "theirs.md"
    target.write_text("old")
    os.chown(target, 65534, 65534)
    assert export(capsys, sqlite_url, session_id, "markdown", str(target)).code == 0
    assert (target.stat().st_uid, target.stat().st_gid) == (65534, 65534)
    assert b"hello" in target.read_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_new_file_gets_mode_0600(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path, fmt: str
) -> None:
    """Transcripts hold secrets: a new export is the owner's only, like the database, whatever the umask."""
    old = os.umask(0o022)
    try:
        result = export(capsys, sqlite_url, session_id, fmt, str(tmp_path / "new.out"))
    finally:
        os.umask(old)
    assert result.code == 0
    assert stat.S_IMODE((tmp_path / "new.out").stat().st_mode) == 0o600


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_symlink_stays_and_its_target_is_written(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path, fmt: str
) -> None:
    real = tmp_path / "real" / "out.txt"
    real.parent.mkdir()
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    result = export(capsys, sqlite_url, session_id, fmt, str(link))
    assert result.code == 0, result.err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert b"hello" in real.read_bytes()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_dangling_symlink_creates_its_target(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path
) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "made.jsonl")
    assert export(capsys, sqlite_url, session_id, "jsonl", str(link)).code == 0
    assert link.is_symlink() and b"hello" in (tmp_path / "made.jsonl").read_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_fifo_is_streamed_into_not_replaced(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path, fmt: str
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = export(capsys, sqlite_url, session_id, fmt, str(fifo))
    reader.join(timeout=30)
    assert result.code == 0, result.err
    assert stat.S_ISFIFO(fifo.lstat().st_mode), "the FIFO is still a FIFO"
    assert received and b"hello" in received[0]


def test_a_device_is_written_in_place(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, session_id: str, tmp_path: Path
) -> None:
    """A character device of our own (a second node of the null device), never the system's /dev/null."""
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")
    before = os.stat(node)
    result = export(capsys, sqlite_url, session_id, "jsonl", str(node))
    assert result.code == 0, result.err
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_an_open_descriptor_is_written_through(sqlite_url: str, session_id: str) -> None:
    """`-o >(cmd)`: the shell passes /dev/fd/N, a pipe; the export goes into it."""
    read_end, write_end = os.pipe()
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionstore",
            "export",
            session_id,
            "-f",
            "markdown",
            "-o",
            f"/dev/fd/{write_end}",
            "--db",
            sqlite_url,
        ],
        pass_fds=(write_end,),
        capture_output=True,
        timeout=120,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    assert proc.returncode == 0, proc.stderr
    assert b"hello" in data


@pytest.mark.parametrize(
    "target,words",
    [
        ("adir/", "folder"),
        ("adir", "folder"),
        ("missing/dir/out.md", "does not exist"),
        ("/dev/fd/987", "no such open file descriptor"),
        ("afile/out.md", "cannot write"),
        ("", "no output file named"),
    ],
)
def test_impossible_targets_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    sqlite_url: str,
    session_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    words: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for fmt in FORMATS:
        result = export(capsys, sqlite_url, session_id, fmt, target)
        assert result.code == 2, (fmt, result)
        one_error_line(result.err)
        assert words in result.err and target.rstrip("/") in result.err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before, "nothing written"


def test_dash_is_stdout(
    capsys: pytest.CaptureFixture[str],
    sqlite_url: str,
    session_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli_process("export", session_id, "-f", "jsonl", "-o", "-", "--db", sqlite_url)
    assert result.code == 0, result.err
    assert not (tmp_path / "-").exists()
    assert [json.loads(line)["message"]["content"] for line in result.out.splitlines()] == ["hello", "hi there"]
    binary = run_cli_process("export", session_id, "-f", "claude-code", "-o", "-", "--db", sqlite_url)
    assert binary.code == 0 and '"hello"' in binary.out and not (tmp_path / "-").exists()


def test_import_dash_reads_stdin(sqlite_url: str, session_id: str, tmp_path: Path) -> None:
    exported = run_cli_process("export", session_id, "-f", "jsonl", "--db", sqlite_url)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    result = run_cli_process("import", "jsonl", "-", "--json", "--db", other, input=exported.out.encode())
    assert result.code == 0, result.err
    [row] = json.loads(result.out)["files"]
    assert row["status"] == "imported" and row["messages_added"] == 2 and row["path"] == "-"
    again = run_cli_process("export", row["session"], "-f", "jsonl", "--db", other)
    assert again.out == exported.out


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with open_output(target) as out:
            out.write("half")
            raise RuntimeError("export failed midway")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_output_errors_are_typed(tmp_path: Path) -> None:
    with pytest.raises(OutputError):
        with open_output(tmp_path):
            pass


# ----------------------------------------------------------- spill materialize


def _spilled(url: str) -> str:
    with SessionStore.open(url) as st:
        s = st.create_session()
        st.db.run_write(
            lambda db: db.execute(
                "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
                "created_at) VALUES (:s, 'toolu_X', 'spilled', 'x', :sha, 4, 0)",
                {"s": s.id, "sha": put_blob(db, b"data")},
            ).close()
        )
        return s.id


@pytest.mark.parametrize("kind", ["existing file", "under a file", "unwritable"])
def test_materialize_onto_an_impossible_folder(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path, kind: str
) -> None:
    sid = _spilled(sqlite_url)
    (tmp_path / "afile").write_text("x")
    target = {
        "existing file": tmp_path / "afile",
        "under a file": tmp_path / "afile" / "sub",
        "unwritable": Path("/proc/sessionstore-test"),
    }[kind]
    result = run_cli(capsys, "spill", "materialize", sid, "toolu_X", str(target), "--db", sqlite_url)
    assert result.code == 2, result
    one_error_line(result.err)
    assert str(target) in result.err
    assert (tmp_path / "afile").read_text() == "x"


def test_materialize_still_writes_a_fresh_file(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path
) -> None:
    sid = _spilled(sqlite_url)
    result = run_cli(capsys, "spill", "materialize", sid, "toolu_X", str(tmp_path / "new"), "--db", sqlite_url)
    assert result.code == 0, result.err
    path = Path(result.out.strip())
    assert path == (tmp_path / "new").resolve() / spill_filename("toolu_X") and path.read_bytes() == b"data"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_materialize_dash_is_stdout(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid = _spilled(sqlite_url)
    monkeypatch.chdir(tmp_path)
    result = run_cli_process("spill", "materialize", sid, "toolu_X", "-", "--db", sqlite_url)
    assert result.code == 0, result.err
    assert result.out == "data" and not (tmp_path / "-").exists()
