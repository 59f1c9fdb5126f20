"""Fixtures: a store URL for every engine, a fresh store, the shared transcripts."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from sessionstore import SessionStore

PG_URL = os.environ.get("SESSIONSTORE_TEST_PG_URL")
TRANSCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "transcripts"
ENGINES = ["sqlite", "postgresql"]


def _pg_schema_url(base: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped afterwards."""
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:12]
    plain = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=ENGINES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL to an empty database, on SQLite and (when configured) PostgreSQL."""
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


@pytest.fixture
def transcripts_dir() -> Path:
    """The shared real transcripts, or a visible skip when the folder is absent."""
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"shared transcripts not found at {TRANSCRIPTS}")
    return TRANSCRIPTS


_WORKER_KILLS: list[tuple[str, str]] = []  # under pytest-xdist: the kills each worker reported when it finished


def _kills() -> list[tuple[str, str]]:
    import sys

    local = list(getattr(sys.modules.get("tests.test_fault_points"), "KILLS", None) or [])
    return local + _WORKER_KILLS


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist, in the controller: gather a finished worker's fault-point kills."""
    output = getattr(node, "workeroutput", None) or {}
    _WORKER_KILLS.extend((engine, point) for engine, point in output.get("kills", []))


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
    kills = _kills()
    if not kills:
        return
    from sessionstore.storage.faults import POINTS

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
