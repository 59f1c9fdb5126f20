"""The credentials never land anywhere on the working path either: a successful chat turn and a
successful Anthropic compaction, against the local fake API, on both engines.

The key and the token are set to values that do not look like keys (no `sk-ant-`, no `Bearer`),
so a pattern-based redaction cannot hide a missing explicit one. Every file under the sandbox,
every row of the database, stdout and stderr are searched afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import sqlalchemy as sa

from sessionstore import SessionStore
from sessionstore.storage.codecs import textpack
from sessionstore.storage.engine.db import make_engine
from tests.support.fakeapi import start_fake_api
from tests.support.outside import private_folders

ROOT = Path(__file__).resolve().parent.parent
KEY = f"plainvalue{uuid.uuid4().hex}"
TOKEN = f"tokenvalue{uuid.uuid4().hex}"
PAD = "The long explanation goes on with more detail than any summary keeps. " * 12


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A private HOME/XDG tree and an environment holding only the two credentials that matter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "SESSIONSTORE_DB"))}
    env.update(private_folders(tmp_path, ("TMPDIR", "tmp")))
    env.update(PYTHONPATH=str(ROOT), ANTHROPIC_API_KEY=KEY, ANTHROPIC_AUTH_TOKEN=TOKEN)
    (tmp_path / "work").mkdir()
    yield tmp_path, env


def _leaks(data: bytes) -> list[str]:
    return [
        name
        for name, value in (("api key", KEY), ("auth token", TOKEN))
        if value.encode() in data or value[-24:].encode() in data
    ]


def _run(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "sessionstore", *args],
        input=stdin.encode(),
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=180,
    )


def _database_rows(url: str) -> bytes:
    """Every row of every table, as text, packed message texts unpacked (the PostgreSQL store has no file of its
    own to search). The store's own engine: SQLite's search table reads its texts through `sessionstore_unpack`."""
    engine = make_engine(url)
    out = []
    try:
        with engine.connect() as conn:
            for name in sa.inspect(conn).get_table_names():
                rows = conn.execute(sa.text(f'SELECT * FROM "{name}"'))
                out += [repr(tuple(_readable(value) for value in row)) for row in rows]
    finally:
        engine.dispose()
    return "\n".join(out).encode("utf-8", "surrogateescape")


def _readable(value: object) -> object:
    """A packed message text as its JSON (a credential in it would not show in the frame); anything else as is."""
    if isinstance(value, bytes) and value[:1] == bytes((textpack.PACKED,)):
        try:
            return textpack.unpack(value)
        except textpack.TextCorrupt:
            return value
    return value


def test_a_successful_chat_turn_and_anthropic_compaction_write_no_credential(
    sandbox: tuple[Path, dict[str, str]], store_url: str
) -> None:
    root, env = sandbox
    outputs: list[tuple[str, bytes]] = []
    with start_fake_api() as api:
        env["ANTHROPIC_BASE_URL"] = api.base_url
        api.script("First answer. " + PAD * 10, "Second answer. " + PAD * 10)
        chat = _run(
            env,
            "chat",
            "--new",
            "--workdir",
            str(root / "work"),
            "--db",
            store_url,
            stdin="first question\nsecond question\n",
        )
        assert chat.returncode == 0, chat.stderr.decode()
        assert b"First answer." in chat.stdout and b"Second answer." in chat.stdout
        outputs += [("chat stdout", chat.stdout), ("chat stderr", chat.stderr)]
        with SessionStore.open(store_url) as store:
            (row,) = store.list()
            session_id = row["id"]
        api.script("<summary>The user asked two questions; both were answered.</summary>")
        # The compaction authenticates with the token alone, so the token's path is the one taken.
        token_only = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
        done = _run(token_only, "compact", session_id, "--summarizer", "anthropic", "--db", store_url)
        assert done.returncode == 0, done.stderr.decode()
        outputs += [("compact stdout", done.stdout), ("compact stderr", done.stderr)]
        sent = api.message_requests
        assert len(sent) == 3, "two chat turns and one summary request reached the API"
        # The credentials did travel where they belong: in the request headers, to the API.
        assert any(KEY in value for value in sent[0].headers.values())
        assert any(TOKEN in value for value in sent[-1].headers.values())
    with SessionStore.open(store_url) as store:
        summary = store.get(session_id).active_view()[0]
        assert "both were answered" in str(summary["content"]), "the Anthropic summary is in the view"
        for fmt in ("jsonl", "markdown", "html", "claude-code"):
            exported = _run(env, "export", session_id, "--format", fmt, "-o", "-", "--db", store_url)
            assert exported.returncode == 0, exported.stderr.decode()
            outputs += [(f"export {fmt}", exported.stdout + exported.stderr)]
    for where, data in outputs:
        assert not _leaks(data), f"a credential leaked into {where}"
    files = sorted(p for p in root.rglob("*") if p.is_file())
    assert files or not store_url.startswith("sqlite"), "the sandbox holds the SQLite store's files"
    for path in files:
        assert not _leaks(path.read_bytes()), f"a credential leaked into {path}"
    assert not _leaks(_database_rows(store_url)), "a credential leaked into the database"
