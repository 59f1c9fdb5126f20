"""A person's store, made the way the README says: the installed `sessionstore` script on a new store.

Each engine's store is made once for the package (every shared transcript imported through the CLI) and
copied for the journeys that write. On PostgreSQL the store belongs to an owner role that ran
`db upgrade` and `db grant`, and every journey command logs in as an ordinary person role under
row-level security (docs/teams.md); both roles and the databases are dropped afterwards. Commands run with COLUMNS=80 in a temporary HOME.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest
from rich.cells import cell_len

from tests.conftest import PG_URL, shared_transcripts

SCRIPT = Path(sys.executable).parent / "sessionstore"
WIDTH = 80


@dataclass
class Ran:
    """What a person saw: the exit code, stdout and stderr of one command."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Person:
    """Someone at a terminal: a HOME of their own, the store URL they use, and the installed script."""

    home: Path
    url: str
    engine: str
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        """The environment of a fresh account: nothing of the test process's SESSIONSTORE_ settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONSTORE_")}
        env.update(
            HOME=str(self.home),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            XDG_STATE_HOME=str(self.home / ".local" / "state"),
            CLAUDE_CONFIG_DIR=str(self.home / ".claude"),
            CODEX_HOME=str(self.home / ".codex"),
            COLUMNS=str(WIDTH),
            LINES="24",
            SESSIONSTORE_DB_URL=self.url,
        )
        env.pop("TERM", None)
        env.update(self.extra_env)
        return env

    def run(self, *args: str, code: int | None = 0, input: str | None = None) -> Ran:
        """`sessionstore ARGS` as a subprocess; checks the exit code (unless None) and that no traceback shows."""
        proc = subprocess.run(
            [str(SCRIPT), *args],
            input=input.encode() if input is not None else None,
            capture_output=True,
            env=self.env(),
            cwd=self.home,
            timeout=300,
        )
        ran = Ran(
            tuple(args), proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
        )
        assert "Traceback" not in ran.out + ran.err, (
            f"sessionstore {' '.join(args)} ended in a traceback:\n{ran.err[-3000:]}"
        )
        if code is not None:
            assert ran.code == code, (
                f"sessionstore {' '.join(args)}: exit {ran.code}, expected {code}\n{ran.err[-2000:]}"
            )
        return ran


def too_wide(text: str) -> list[str]:
    """The lines of `text` wider than the 80-column terminal the person has (in cells: CJK is 2)."""
    return [line for line in text.splitlines() if cell_len(line) > WIDTH]


def fits(ran: Ran) -> Ran:
    """`ran` after checking that its stdout fits the 80-column terminal."""
    wide = too_wide(ran.out)
    assert not wide, f"sessionstore {' '.join(ran.args)}: {len(wide)} line(s) over {WIDTH} columns, e.g. {wide[0]!r}"
    return ran


# ----------------------------------------------------------------------------- stores


class Engine(ABC):
    """One engine's way to make the person's store and copy it."""

    name = ""

    @abstractmethod
    def new_url(self) -> str:
        """A URL to a brand-new, empty store the person may write."""

    @abstractmethod
    def copy(self, url: str) -> str:
        """A URL to a copy of the store at `url`, for a journey that writes."""

    def close(self) -> None:  # noqa: B027  (optional: an engine with nothing to drop keeps this one)
        """Drop what was made for the module (nothing, unless the engine made something)."""


class Sqlite(Engine):
    name = "sqlite"

    def __init__(self, root: Path) -> None:
        self.root = root

    def new_url(self) -> str:
        return f"sqlite:///{self.root / f'{uuid.uuid4().hex[:8]}.db'}"

    def copy(self, url: str) -> str:
        source = Path(url.removeprefix("sqlite:///"))
        target = self.root / f"{uuid.uuid4().hex[:8]}.db"
        shutil.copyfile(source, target)
        return f"sqlite:///{target}"


class Postgres(Engine):
    """A database owned by an owner role, `db upgrade` and `db grant` run by it, used by a person role."""

    name = "postgresql"

    def __init__(self, base: str, home: Path) -> None:
        from tests.support.pgadmin import create_role

        self.base = base
        self.owner = create_role(base, "jrn_own")
        self.person = create_role(base, "jrn_me")
        self.databases: list[str] = []
        self.home = home

    def _admin(self, sql: str) -> None:
        import psycopg

        from tests.support.pgadmin import admin_url

        with psycopg.connect(admin_url(self.base), autocommit=True) as conn:
            conn.execute(sql.encode())

    def new_url(self) -> str:
        """A database made as `createdb -O owner` makes it, upgraded and granted by the owner through the CLI."""
        from tests.support.pgadmin import admin_execute, url_for

        name = "jrn_" + uuid.uuid4().hex[:12]
        self._admin(f'CREATE DATABASE "{name}" OWNER "{self.owner}" TEMPLATE template0')
        self.databases.append(name)
        admin_execute(self.base, name, f'ALTER SCHEMA public OWNER TO "{self.owner}"')
        owner = Person(self.home, url_for(self.base, database=name, user=self.owner), self.name)
        assert "database at" in owner.run("db", "upgrade").out + owner.run("db", "current").out
        owner.run("db", "grant", self.person)
        return url_for(self.base, database=name, user=self.person)

    def copy(self, url: str) -> str:
        """A new database from the person's (CREATE DATABASE ... TEMPLATE): same rows, roles and policies."""
        from sqlalchemy.engine import make_url

        from tests.support.pgadmin import url_for

        source = make_url(url).database
        name = "jrn_" + uuid.uuid4().hex[:12]
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{source}" OWNER "{self.owner}"')
        self.databases.append(name)
        return url_for(self.base, database=name, user=self.person)

    def close(self) -> None:
        from tests.support.pgadmin import drop_role

        for name in self.databases:
            self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for role in (self.person, self.owner):
            drop_role(self.base, role)


@dataclass
class World:
    """The person's store with every shared transcript imported, and what the import printed."""

    engine: Engine
    person: Person
    transcripts: Path
    imports: dict[str, Ran]
    sessions: list[dict[str, Any]]

    def source(self, source_id_prefix: str) -> dict[str, Any]:
        """The listed session whose source id starts with `source_id_prefix`."""
        rows = [r for r in self.sessions if (r.get("source_id") or "").startswith(source_id_prefix)]
        (row,) = [r for r in rows if re.fullmatch(r"[0-9a-f-]{36}", r["source_id"])] if len(rows) > 1 else rows
        return row

    def writable(self, home: Path) -> Person:
        """A copy of the imported store, for a journey that writes, used from a HOME of its own."""
        home.mkdir(parents=True, exist_ok=True)
        return Person(home, self.engine.copy(self.person.url), self.engine.name)


@pytest.fixture(scope="package", params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """Each engine's store, made once for the journeys: a brand-new store, then both shared folders imported."""
    transcripts = shared_transcripts()
    home = tmp_path_factory.mktemp(f"home-{request.param}")
    engine: Engine
    if request.param == "sqlite":
        engine = Sqlite(tmp_path_factory.mktemp("stores"))
    else:
        if not PG_URL:
            pytest.skip("PostgreSQL journeys need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
        engine = Postgres(PG_URL, home)
    try:
        person = Person(home, engine.new_url(), engine.name)
        imports = {kind: person.run("import", kind, str(transcripts / kind)) for kind in ("claude-code", "codex")}
        sessions = person.run("sessions", "--json", "--limit", "1000").json()
        yield World(engine, person, transcripts, imports, sessions)
    finally:
        engine.close()


@pytest.fixture
def anyio_backend() -> str:
    """The MCP client runs on asyncio (the server is a subprocess either way)."""
    return "asyncio"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (--dist loadgroup), one worker runs an engine's journeys, so its store is made once."""
    for item in items:
        spec = getattr(item, "callspec", None)
        if spec is not None and "world" in spec.params and "journeys" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group(f"journeys-{spec.params['world']}"))
