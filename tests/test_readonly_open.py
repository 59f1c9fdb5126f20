"""Read-only commands never upgrade: on a database at an older revision they refuse in one line
naming `sessionstore db upgrade`, write no backup and leave every row and the revision as they were;
writers still upgrade (with the backup). Both engines.

The old store is the previous revision's schema filled with raw SQL (tests/test_migration_safety).
"""

from __future__ import annotations


import pytest
from alembic.script import ScriptDirectory

from sessionstore import SessionStore
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.core.errors import SchemaOutdated
from sessionstore.storage.engine.migrate import alembic_config, current_revision, head_revision
from tests.support.cli import run_cli, run_cli_process
from tests.test_migration_safety import A, _backups, _build, _snapshot


def _previous_revision() -> str:
    """The revision just before head (0004's predecessor while 0004 is the head)."""
    script = ScriptDirectory.from_config(alembic_config())
    down = script.get_revision(head_revision()).down_revision
    assert isinstance(down, str)
    return down


OLD = _previous_revision()

READERS = [
    ["sessions"],
    ["sessions", "--json"],
    ["view", A],
    ["history", A],
    ["stats", A],
    ["search", "hello"],
    ["recall", A],
    ["export", A, "--format", "jsonl"],
    ["spill", "list", A],
    ["doctor"],
    ["secrets"],
]


def _state(url: str) -> tuple[str | None, dict]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            revision = current_revision(conn)
        return revision, _snapshot(engine)
    finally:
        engine.dispose()


@pytest.fixture
def old_store(empty_store_url: str) -> str:
    _build(empty_store_url, OLD)
    return empty_store_url


def _assert_untouched(url: str, before: tuple[str | None, dict]) -> None:
    assert _state(url) == before, "revision and rows unchanged"
    if url.startswith("sqlite"):
        assert _backups(url) == [], "no backup written"


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a))
def test_a_reader_refuses_in_one_line_naming_db_upgrade(
    capsys: pytest.CaptureFixture[str], old_store: str, args: list[str]
) -> None:
    before = _state(old_store)
    assert before[0] == OLD
    result = run_cli(capsys, *args, "--db", old_store)
    lines = result.err.strip().splitlines()
    assert result.code == 1 and len(lines) == 1, (result.code, result.err)  # the store's state: exit 1, not 2
    assert "sessionstore db upgrade" in lines[0] and OLD in lines[0]
    _assert_untouched(old_store, before)


def test_mcp_refuses_before_serving(old_store: str) -> None:
    before = _state(old_store)
    result = run_cli_process("mcp", "--db", old_store, input=b"")
    assert result.code == 1 and "sessionstore db upgrade" in result.err and "Traceback" not in result.err
    _assert_untouched(old_store, before)


def test_browse_and_the_api_raise_schema_outdated(old_store: str) -> None:
    from sessionstore.cli.browse.app import make_app

    before = _state(old_store)
    with pytest.raises(SchemaOutdated, match="sessionstore db upgrade"):
        make_app(old_store)
    with pytest.raises(SchemaOutdated):
        SessionStore.open(old_store, read_only=True)
    _assert_untouched(old_store, before)


def test_a_writer_still_upgrades_with_a_backup(capsys: pytest.CaptureFixture[str], old_store: str) -> None:
    result = run_cli(capsys, "new", "--title", "after", "--db", old_store)
    assert result.code == 0, result.err
    assert _state(old_store)[0] == head_revision()
    if old_store.startswith("sqlite"):
        assert len(_backups(old_store)) == 1
    after = run_cli(capsys, "view", A, "--db", old_store)
    assert after.code == 0, after.err


def test_an_empty_database_still_gets_its_schema_from_a_reader(
    capsys: pytest.CaptureFixture[str], empty_store_url: str
) -> None:
    with SessionStore.open(empty_store_url, read_only=True) as store:
        assert store.list() == []
    assert _state(empty_store_url)[0] == head_revision()
