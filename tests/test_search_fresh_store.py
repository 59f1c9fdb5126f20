"""Search as a person first meets it: the installed console script on a brand-new store.

`sessionstore import` then `sessionstore search` (the first command after the import), a store of
appended messages, and the MCP server's `search` tool, each as a subprocess on a store made for the
test, on SQLite, PostgreSQL, and PostgreSQL as an ordinary role under row-level security. A search
opens the store read-only; the index it builds on first use may write the derived index tables and
nothing else (every other table is compared before and after), and on SQLite it still packs the
index's texts with a trained dictionary, as a build through a writable store does. A failure to
build or read the index is one line and exit 1 (CLI), a tool error (MCP), never a traceback; doctor
reports an index whose texts cannot be decoded and --repair rebuilds it.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import anyio
import pytest
import sqlalchemy as sa
import zstandard
from mcp import Client, StdioServerParameters
from rich.cells import cell_len

from sessionstore import SearchIndexError, SessionStore
from sessionstore.cli.searchcmd import PROGRESS_FROM
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.migrate import downgrade, upgrade
from tests.conftest import PG_URL, _pg_schema_url
from tests.support.pgadmin import admin_execute, admin_url, create_role, drop_role, url_for
from tests.support.tabledigest import table_digests

SESSIONSTORE = Path(sys.executable).parent / "sessionstore"
#: Queries a person might try first on the shared Claude Code transcripts (each has hits there).
QUERIES = ("error", "git status", "TypeError")
#: Tables a search may write: the derived index (and the usage counts, also derived).
DERIVED = ("search_", "usage_")
HITS = re.compile(r"^(\d+) hit\(s\) in (\d+) session\(s\)$", re.MULTILINE)
FAILING = "the disk refused the index write"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Fresh:
    """A brand-new store: the URL a person uses, the same store as its administrator sees it, the engine."""

    url: str
    admin: str
    engine: str
    home: Path
    #: How the store was made: sqlite, postgresql (the superuser's schema) or postgresql-role.
    kind: str = "sqlite"

    def env(self) -> dict[str, str]:
        """The environment of a person's shell: this store as the default, 80 columns, a home of its own."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONSTORE_")}
        env.update(
            SESSIONSTORE_DB_URL=self.url,
            HOME=str(self.home),
            XDG_DATA_HOME=str(self.home / "data"),
            XDG_CONFIG_HOME=str(self.home / "config"),
            COLUMNS="80",
            LINES="50",
        )
        return env

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`sessionstore ARGS` as the installed console script."""
        return subprocess.run(
            [str(SESSIONSTORE), *args], env=self.env(), capture_output=True, text=True, timeout=600, check=False
        )


@pytest.fixture(params=["sqlite", "postgresql", "postgresql-role"])
def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fresh]:
    """A brand-new store (no schema yet on SQLite and PostgreSQL; an ordinary role's, granted by its owner)."""
    home = tmp_path / "home"
    home.mkdir()
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'fresh.db'}"
        yield Fresh(url, url, "sqlite", home)
        return
    if not PG_URL:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    if request.param == "postgresql":
        for url in _pg_schema_url(PG_URL):
            yield Fresh(url, url, "postgresql", home, "postgresql")
        return
    yield from _role_store(PG_URL, home)


def _role_store(base: str, home: Path) -> Iterator[Fresh]:
    """A schema owned by an owner role that ran `db upgrade` and `db grant`; the store as the granted role."""
    owner, user = create_role(base, "t35own"), create_role(base, "t35usr")
    schema = "t35_" + uuid.uuid4().hex[:10]
    database = admin_url(base).rsplit("/", 1)[1]
    suffix = f"?options=-csearch_path%3D{schema}"
    try:
        admin_execute(base, database, f'CREATE SCHEMA "{schema}" AUTHORIZATION "{owner}"')
        owner_store = Fresh(url_for(base, user=owner) + suffix, "", "postgresql", home)
        for args in (["db", "upgrade"], ["db", "grant", user]):
            done = owner_store.cli(*args)
            assert done.returncode == 0, (args, done.stderr)
        yield Fresh(url_for(base, user=user) + suffix, url_for(base) + suffix, "postgresql", home, "postgresql-role")
    finally:
        admin_execute(base, database, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        drop_role(base, user, (database,))
        drop_role(base, owner, (database,))


def _clean(proc: subprocess.CompletedProcess[str], *, width: int | None = 80) -> None:
    """What a person must never see: a traceback, or a line wider than the 80-column terminal (`width` None:
    a command that prints one line per finding, unwrapped)."""
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    wide = [line for line in proc.stdout.splitlines() if width is not None and cell_len(line) > width]
    assert not wide, wide


def _hit_count(proc: subprocess.CompletedProcess[str]) -> int:
    """The hits `search` says it found (0 when it printed no summary line)."""
    found = HITS.search(proc.stdout)
    return int(found.group(1)) if found else 0


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


def _dictionary_tables(conn: sqlite3.Connection) -> list[str]:
    """The store's tables of zstd dictionaries, whatever the revision names them."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%dictionaries'")
    return [name for (name,) in rows]


def _search_packing(url: str) -> dict[str, int]:
    """SQLite: how the index's texts are stored: how many, how many packed with a dictionary the store
    holds, how many packed with one it lacks, and their bytes."""
    with sqlite3.connect(_sqlite_path(url)) as conn:
        held = {int(i) for table in _dictionary_tables(conn) for (i,) in conn.execute(f"SELECT id FROM {table}")}
        texts, with_dict, missing, stored = 0, 0, 0, 0
        for (value,) in conn.execute("SELECT packed FROM search_texts"):
            texts += 1
            stored += len(value.encode("utf-8") if isinstance(value, str) else value)
            if isinstance(value, bytes):
                dict_id = zstandard.get_frame_parameters(value[1:]).dict_id
                with_dict += dict_id in held and dict_id != 0
                missing += dict_id not in held and dict_id != 0
    return {"texts": texts, "with_dictionary": with_dict, "missing": missing, "bytes": stored}


def _import(fresh: Fresh, transcripts: Path) -> None:
    done = fresh.cli("import", "claude-code", str(transcripts / "claude-code"))
    assert done.returncode == 0, done.stderr[-3000:]
    _clean(done)


# ------------------------------------------------------------------ the first search after an import


def test_search_is_the_first_command_after_importing_the_shared_transcripts(
    fresh: Fresh, transcripts_dir: Path, tmp_path: Path
) -> None:
    _import(fresh, transcripts_dir)
    if fresh.engine == "sqlite":
        _copy(fresh.url, tmp_path / "writable.db")
    before = table_digests(fresh.admin, DERIVED)
    for query in QUERIES:
        found = fresh.cli("search", query)
        assert found.returncode == 0, (query, found.stderr[-3000:])
        _clean(found)
        assert _hit_count(found) > 0, (query, found.stdout[-2000:])
    as_json = json.loads(fresh.cli("search", "error", "--json", "--limit", "50").stdout)
    assert len(as_json["hits"]) == 50 and all(h["open"].startswith("sessionstore show ") for h in as_json["hits"])
    assert table_digests(fresh.admin, DERIVED) == before, "a search wrote outside the derived index tables"
    if fresh.engine == "sqlite":
        _assert_packed_as_a_writable_build(fresh.url, f"sqlite:///{tmp_path / 'writable.db'}")


def _copy(url: str, target: Path) -> None:
    """A copy of a SQLite store as it is now (SQLite's backup: the write-ahead log included)."""
    with sqlite3.connect(_sqlite_path(url)) as source, sqlite3.connect(target) as copy:
        source.backup(copy)


def _assert_packed_as_a_writable_build(read_only_url: str, copy_url: str) -> None:
    """The index a read-only first search built is packed with a trained dictionary, as small as the index a
    writable store builds from a copy of the same store (same sessions: the same batches train it)."""
    with SessionStore.open(copy_url) as store:
        assert store.search("error")
    read_only, built = _search_packing(read_only_url), _search_packing(copy_url)
    assert read_only["texts"] == built["texts"] > 0
    assert read_only["missing"] == 0
    assert read_only["with_dictionary"] >= 0.9 * built["with_dictionary"] > 0, (read_only, built)
    assert read_only["bytes"] <= 1.01 * built["bytes"], (read_only, built)


# ------------------------------------------------------------------ a store of appended messages


def _appended_messages(count: int) -> str:
    """JSONL of `count` alternating user and assistant messages, long enough to train a dictionary on."""
    lines = []
    for i in range(count):
        if i % 2 == 0:
            text = (
                f"step {i}: run the parser over src/module_{i % 17}.py and tell me how many warnings "
                f"it prints; the last run said {i * 7 % 113} warnings and one deprecation notice"
            )
            lines.append(json.dumps({"role": "user", "content": text}))
        else:
            text = (
                f"The parser printed {i % 29} warnings for src/module_{i % 17}.py. Most are unused imports; "
                f"the deprecation notice comes from the config loader (line {i % 400})."
            )
            lines.append(json.dumps({"role": "assistant", "content": [{"type": "text", "text": text}]}))
    return "\n".join(lines) + "\n"


def test_search_on_a_store_of_300_appended_messages(fresh: Fresh, tmp_path: Path) -> None:
    """300 messages are enough to train the search dictionary."""
    _search_appended(fresh, tmp_path, 300)


@pytest.mark.parametrize("fresh", ["sqlite", "postgresql-role"], indirect=True)
def test_search_on_a_store_of_5002_appended_messages_takes_the_progress_bar(fresh: Fresh, tmp_path: Path) -> None:
    """Past 5,000 waiting messages `search` shows a progress bar while it builds the index: the same build,
    through the same index connection, as any search."""
    assert 5_002 > PROGRESS_FROM
    _search_appended(fresh, tmp_path, 5_002)


def _search_appended(fresh: Fresh, tmp_path: Path, count: int) -> None:
    """`new`, `append` of `count` messages, then `search` as the first read: hits exact, nothing else written."""
    created = fresh.cli("new", "--title", "appended")
    assert created.returncode == 0, created.stderr
    source = tmp_path / "messages.jsonl"
    source.write_text(_appended_messages(count))
    appended = fresh.cli("append", created.stdout.strip(), str(source))
    assert appended.returncode == 0 and f"appended {count} message(s)" in appended.stdout, appended.stderr
    before = table_digests(fresh.admin, DERIVED)
    found = fresh.cli("search", "deprecation notice", "--limit", "5")
    assert found.returncode == 0, found.stderr[-3000:]
    _clean(found)
    assert _hit_count(found) == 5
    exact = fresh.cli("search", '"src/module_16.py"', "--json", "--limit", "1000")
    assert {h["seq"] for h in json.loads(exact.stdout)["hits"]} == {i + 1 for i in range(count) if i % 17 == 16}
    assert table_digests(fresh.admin, DERIVED) == before, "a search wrote outside the derived index tables"
    if fresh.engine == "sqlite":
        packing = _search_packing(fresh.url)
        assert packing["texts"] == count and packing["missing"] == 0
        assert packing["with_dictionary"] >= 0.9 * count, packing


# ------------------------------------------------------------------ the MCP server's search tool


def _server(fresh: Fresh) -> StdioServerParameters:
    """The installed console script's MCP server over stdio, on the person's store."""
    return StdioServerParameters(command=str(SESSIONSTORE), args=["mcp"], env=fresh.env(), cwd=str(fresh.home))


@pytest.mark.anyio
async def test_the_mcp_search_tool_on_a_fresh_import(fresh: Fresh, transcripts_dir: Path) -> None:
    _import(fresh, transcripts_dir)
    before = table_digests(fresh.admin, DERIVED)
    with anyio.fail_after(300):
        async with Client(_server(fresh)) as client:
            pages = {query: await client.call_tool("search", {"query": query, "limit": 5}) for query in QUERIES}
    for query, page in pages.items():
        assert not page.is_error, (query, page.content)
        assert page.structured_content is not None and page.structured_content["hits"], query
    assert table_digests(fresh.admin, DERIVED) == before, "a search wrote outside the derived index tables"
    if fresh.engine == "sqlite":
        packing = _search_packing(fresh.url)
        assert packing["texts"] > 0 and packing["missing"] == 0
        assert packing["with_dictionary"] >= 0.5 * packing["texts"], packing


# ------------------------------------------------------------------ an index that cannot be built or read


def _refuse_index_writes(fresh: Fresh) -> None:
    """Make the database refuse every index write (a trigger on `search_marks`, which each index batch writes)."""
    if fresh.engine == "sqlite":
        with sqlite3.connect(_sqlite_path(fresh.url)) as conn:
            conn.execute(
                f"CREATE TRIGGER t35_refuse BEFORE INSERT ON search_marks BEGIN SELECT RAISE(ABORT, '{FAILING}'); END"
            )
        return
    engine = sa.create_engine(fresh.admin)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "CREATE FUNCTION t35_refuse() RETURNS trigger LANGUAGE plpgsql AS "
                    f"$$ BEGIN RAISE EXCEPTION '{FAILING}'; END $$"
                )
            )
            conn.execute(
                sa.text(
                    "CREATE TRIGGER t35_refuse BEFORE INSERT ON search_marks FOR EACH ROW EXECUTE FUNCTION t35_refuse()"
                )
            )
    finally:
        engine.dispose()


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one `error: ...` line a failed command prints, after checking it is all it printed there."""
    _clean(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


@pytest.mark.anyio
async def test_an_index_that_cannot_be_built_is_one_line_and_exit_1(fresh: Fresh, tmp_path: Path) -> None:
    created = fresh.cli("new", "--title", "refused")
    source = tmp_path / "messages.jsonl"
    source.write_text(_appended_messages(40))
    assert fresh.cli("append", created.stdout.strip(), str(source)).returncode == 0
    _refuse_index_writes(fresh)
    failed = fresh.cli("search", "parser")
    assert failed.returncode == 1, (failed.returncode, failed.stderr[-3000:])
    line = _one_line_error(failed)
    assert "search index" in line and FAILING in line, line
    with anyio.fail_after(120):
        async with Client(_server(fresh)) as client:
            answer = await client.call_tool("search", {"query": "parser"})
            listed = await client.call_tool("list_sessions", {})
    assert answer.is_error
    text = " ".join(getattr(c, "text", "") for c in answer.content)
    assert "search index" in text and FAILING in text and "Traceback" not in text and "\n" not in text, text
    assert not listed.is_error, "the server goes on serving after a failed search"
    with SessionStore.open(fresh.url, read_only=True) as store:  # the Python API: the typed error
        with pytest.raises(SearchIndexError, match=FAILING):
            store.search("parser")


def _drop_search_dictionaries(url: str) -> int:
    """SQLite: delete the dictionaries the index's texts were packed with, from whichever table holds them."""
    with sqlite3.connect(_sqlite_path(url)) as conn:
        used = {
            zstandard.get_frame_parameters(bytes(v)[1:]).dict_id
            for (v,) in conn.execute("SELECT packed FROM search_texts WHERE typeof(packed) = 'blob'")
        } - {0}
        for table in _dictionary_tables(conn):
            conn.executemany(f"DELETE FROM {table} WHERE id = ?", [(i,) for i in used])
    return len(used)


@pytest.mark.parametrize("fresh", ["sqlite"], indirect=True)  # only SQLite packs the index's texts
def test_doctor_reports_and_repairs_index_texts_it_cannot_decode(fresh: Fresh, transcripts_dir: Path) -> None:
    _import(fresh, transcripts_dir)
    assert _hit_count(fresh.cli("search", "error")) > 0
    assert _drop_search_dictionaries(fresh.url) >= 1
    broken = fresh.cli("search", "error")
    assert broken.returncode == 1 and "doctor --repair" in _one_line_error(broken), broken.stderr[-3000:]
    checked = fresh.cli("doctor")
    _clean(checked, width=None)
    assert checked.returncode == 1 and "search texts" in checked.stdout and "--repair fixes this" in checked.stdout, (
        checked.stdout[-3000:] + checked.stderr[-3000:]
    )
    repaired = fresh.cli("doctor", "--repair")
    _clean(repaired, width=None)
    assert repaired.returncode == 0 and "rebuilt the search index" in repaired.stdout, (
        repaired.stdout[-3000:] + repaired.stderr[-3000:]
    )
    assert _search_packing(fresh.url)["missing"] == 0
    again = fresh.cli("search", "error")
    assert again.returncode == 0 and _hit_count(again) > 0, again.stderr[-3000:]


# ------------------------------------------------------------------ revision 0018


def test_0018_moves_the_search_dictionaries_into_the_index_and_its_downgrade_moves_them_back(
    tmp_path: Path,
) -> None:
    """The search texts' dictionary is a row of `search_dictionaries` at head and of `text_dictionaries` (as
    `search_body`) at 0017; either way every text unpacks and the hits are the same, in a process that has
    seen no dictionary yet."""
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    with SessionStore.open(url) as writer:
        writer.create_session(title="moved").append_many(
            json.loads(line) for line in _appended_messages(300).splitlines()
        )
    with SessionStore.open(url, read_only=True) as reader:
        hits = [h.to_dict() for h in reader.search("deprecation notice", limit=1000)]
    assert len(hits) == 300

    def rows(table: str) -> list[tuple[int, str]]:
        with sqlite3.connect(path) as conn:
            return [(int(i), c) for i, c in conn.execute(f"SELECT id, column_name FROM {table} ORDER BY id")]

    trained = rows("search_dictionaries")
    assert [c for _, c in trained] == ["search_body"] and all(c != "search_body" for _, c in rows("text_dictionaries"))
    for revision, table in (("0017", "text_dictionaries"), ("head", "search_dictionaries")):
        engine = make_engine(url)
        try:
            (downgrade if revision == "0017" else upgrade)(engine, revision)
        finally:
            engine.dispose()
        assert [r for r in rows(table) if r[1] == "search_body"] == trained, revision
        assert _search_packing(url)["missing"] == 0
    with sqlite3.connect(path) as conn:
        assert [i for (i,) in conn.execute("SELECT id FROM text_dictionaries WHERE column_name = 'search_body'")] == []
    again = Fresh(url, url, "sqlite", tmp_path).cli("search", "deprecation notice", "--json", "--limit", "1000")
    assert again.returncode == 0 and json.loads(again.stdout)["hits"] == hits, again.stderr
