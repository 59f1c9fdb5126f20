"""Fixtures: a store URL for every engine, a fresh store, the shared transcripts."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Iterator, NoReturn

import pytest

from sessionstore import SessionStore

PG_URL = os.environ.get("SESSIONSTORE_TEST_PG_URL")
# The shared real transcripts: shared/ laid beside the clone (as .ci/run has it), or SESSIONSTORE_TRANSCRIPTS.
TRANSCRIPTS = Path(
    os.environ.get("SESSIONSTORE_TRANSCRIPTS")
    or Path(__file__).resolve().parent.parent.parent / "shared" / "transcripts"
)
ENGINES = ["sqlite", "postgresql"]


def _pg_schema_url(base: str, create: str = 'CREATE SCHEMA "{schema}"') -> Iterator[str]:
    """A URL whose search_path is a new schema made by the SQL `create` (`{schema}`: its name), dropped afterwards."""
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:12]
    plain = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(create.replace("{schema}", schema).encode())
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


class Templates:
    """A migrated store per engine, made once per test process and copied for each test.

    Opening a new store runs every migration: about 0.1 s on SQLite and 0.4 s on PostgreSQL (some
    250 DDL statements), paid by hundreds of tests. A copy of a migrated template costs 2 ms on
    SQLite (the file) and 80 ms on PostgreSQL (the template schema's pg_dump, replayed under a new
    schema name). tests/test_store_templates.py checks a copy against a store migrated in place.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._sqlite: Path | None = None
        self._pg_sql: str | None = None
        self._pg_schema = ""

    def sqlite(self, target: Path) -> str:
        """A migrated SQLite store at `target` (a copy of the template file)."""
        if self._sqlite is None:
            path = self.root / "template.db"
            SessionStore.open(f"sqlite:///{path}").close()
            self._sqlite = path
        shutil.copyfile(self._sqlite, target)
        return f"sqlite:///{target}"

    def postgresql(self, base: str) -> Iterator[str]:
        """A URL to a new schema holding a migrated store, dropped afterwards."""
        if self._pg_sql is None:
            self._pg_sql, self._pg_schema = _pg_template_sql(base)
        yield from _pg_schema_url(base, self._pg_sql.replace(self._pg_schema, "{schema}"))


def _pg_template_sql(base: str) -> tuple[str, str]:
    """(SQL that recreates a freshly migrated store, the schema name to replace in it)."""
    import psycopg

    from tests.support.pgadmin import admin_url

    schema = "tmpl_" + uuid.uuid4().hex[:12]
    plain = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        SessionStore.open(f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}").close()
        dump = subprocess.run(
            ["pg_dump", "--dbname", admin_url(base), "--schema", schema, "--no-owner", "--no-privileges", "--inserts"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    # psql meta-commands (\restrict in newer pg_dump) are not SQL; the rest runs as one script.
    return "\n".join(line for line in dump.splitlines() if not line.startswith("\\")), schema


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    """This test process's migrated store templates (made on first use)."""
    return Templates(tmp_path_factory.mktemp("templates"))


@pytest.fixture(params=ENGINES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path, templates: Templates) -> Iterator[str]:
    """A URL to a new store, already migrated to head, on SQLite and (when configured) PostgreSQL."""
    if request.param == "sqlite":
        yield templates.sqlite(tmp_path / "sessions.db")
        return
    if not PG_URL:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    yield from templates.postgresql(PG_URL)


@pytest.fixture(params=ENGINES)
def empty_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty database (no schema yet: the first open migrates it), on each engine."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sessions.db'}"
        return
    if not PG_URL:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    yield from _pg_schema_url(PG_URL)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A URL to an empty SQLite database."""
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture
def store(store_url: str) -> Iterator[SessionStore]:
    """An open store on each engine."""
    s = SessionStore.open(store_url)
    try:
        yield s
    finally:
        s.close()


def missing(what: str, reason: str) -> NoReturn:
    """Skip visibly, or fail when `.ci/run` requires `what` (SESSIONSTORE_REQUIRE_<WHAT>=1): CI runs the whole suite."""
    if os.environ.get(f"SESSIONSTORE_REQUIRE_{what}"):
        pytest.fail(f"{reason}; SESSIONSTORE_REQUIRE_{what} is set, so this fails rather than skips", pytrace=False)
    pytest.skip(reason)


def shared_transcripts() -> Path:
    """The shared real transcripts (shared/ beside the clone), or a skip: a failure under `.ci/run`."""
    if not TRANSCRIPTS.is_dir():
        missing("TRANSCRIPTS", f"shared transcripts not found at {TRANSCRIPTS}")
    return TRANSCRIPTS


def absent(what: str, reason: str) -> object:
    """The one parameter of a test parametrized over files that are absent: skipped with `reason`, or under
    `.ci/run` (SESSIONSTORE_REQUIRE_<WHAT>=1) an error at collection, so the run fails."""
    if os.environ.get(f"SESSIONSTORE_REQUIRE_{what}"):
        pytest.fail(f"{reason}; SESSIONSTORE_REQUIRE_{what} is set, so this fails rather than skips", pytrace=False)
    return pytest.param(None, marks=pytest.mark.skip(reason=reason), id="absent")


@pytest.fixture
def transcripts_dir() -> Path:
    """The shared real transcripts, or a visible skip when the folder is absent (a failure under `.ci/run`)."""
    return shared_transcripts()


_WORKER_KILLS: list[tuple[str, str]] = []  # under pytest-xdist: the kills each worker reported when it finished
_ATTACKS: list[list[object]] = []  # under pytest-xdist: what each worker's attacker suite tried (tests/attack)


def _kills() -> list[tuple[str, str]]:
    import sys

    local = list(getattr(sys.modules.get("tests.test_fault_points"), "KILLS", None) or [])
    return local + _WORKER_KILLS


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist, in the controller: gather a finished worker's fault-point kills."""
    output = getattr(node, "workeroutput", None) or {}
    _WORKER_KILLS.extend((engine, point) for engine, point in output.get("kills", []))
    _ATTACKS.extend(output.get("attack_tried", []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under `.ci/run` (SESSIONSTORE_REQUIRE_PG=1) a run in which PostgreSQL did not run fails."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: the controller decides, over every worker's kills
        workeroutput["kills"] = _kills()
        return
    if not os.environ.get("SESSIONSTORE_REQUIRE_PG") or exitstatus not in (0, pytest.ExitCode.OK):
        return
    kills = _kills()
    missing = not PG_URL or (kills and "postgresql" not in {engine for engine, _ in kills})
    if missing:
        session.config.pg_missing = True  # type: ignore[attr-defined]  # read by the terminal summary
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a run that killed processes at named fault points: how many points, on which engines."""
    if getattr(terminalreporter.config, "pg_missing", False):
        terminalreporter.write_sep(
            "!",
            "PostgreSQL did not run (SESSIONSTORE_REQUIRE_PG is set): the run fails, "
            "since a green run must mean both engines ran",
            red=True,
        )
    _attack_summary(terminalreporter)
    kills = _kills()
    if not kills:
        return
    from sessionstore.storage.core.faults import POINTS

    engines = sorted({engine for engine, _ in kills})
    covered = {point for _, point in kills}
    line = (
        f"fault points: {len(kills)} kills = points x engines ({', '.join(engines)}); "
        f"{len(covered)} of the {len(POINTS)} named points reached"
    )
    missing = [p for p in POINTS if p not in covered]
    if missing:
        line += f"; not run here: {len(missing)} (deselected, or their engine's tests skipped)"
    terminalreporter.write_sep("-", line)


def _attack_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The attacker suite's objects and roles tried (tests/attack), when it ran."""
    import sys

    attack = sys.modules.get("tests.attack.conftest")
    lines = attack.summary_lines(_ATTACKS) if attack is not None else []  # type: ignore[attr-defined]
    if not lines and _ATTACKS:
        from tests.attack.conftest import summary_lines

        lines = summary_lines(_ATTACKS)  # type: ignore[arg-type]
    if lines:
        terminalreporter.write_sep("-", "attacker suite: catalogue objects tried, by store and role")
        for line in lines:
            terminalreporter.write_line(line)
