"""The Claude Agent SDK's SessionStore on a sessionstore database (sessionstore.integrations.agent_sdk).

The SDK's own conformance suite runs against the adapter with no optional method skipped, on
SQLite and PostgreSQL (as an ordinary role under row-level security, where a second role sees
nothing of the first through any method); entries come back exactly; a retried batch adds nothing;
two processes appending to one key lose nothing; importing sessionstore never imports the SDK.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk.testing import run_session_store_conformance  # noqa: E402

from sessionstore import SessionStore  # noqa: E402
from sessionstore.integrations.agent_sdk import AgentSdkStore  # noqa: E402
from tests.conftest import PG_URL, Templates  # noqa: E402

KEY = {"project_key": "proj", "session_id": "sess"}


class Fresh:
    """New, migrated stores for the conformance suite (one per contract), closed at the end."""

    def __init__(self, templates: Templates, tmp_path: Path) -> None:
        self.templates, self.tmp_path = templates, tmp_path
        self.adapters: list[AgentSdkStore] = []
        self.pg_schemas: list[Iterator[str]] = []

    def sqlite(self) -> AgentSdkStore:
        url = self.templates.sqlite(self.tmp_path / f"c{len(self.adapters)}.db")
        self.adapters.append(AgentSdkStore.open(url))
        return self.adapters[-1]

    def postgresql(self) -> AgentSdkStore:
        schema = self.templates.postgresql(PG_URL or "")
        self.pg_schemas.append(schema)
        self.adapters.append(AgentSdkStore.open(next(schema)))
        return self.adapters[-1]

    def close(self) -> None:
        for adapter in self.adapters:
            adapter.close()
        for schema in self.pg_schemas:
            next(schema, None)


@pytest.fixture
def fresh(templates: Templates, tmp_path: Path) -> Iterator[Fresh]:
    made = Fresh(templates, tmp_path)
    try:
        yield made
    finally:
        made.close()


def test_conformance_on_sqlite_with_no_optional_method_skipped(fresh: Fresh) -> None:
    asyncio.run(run_session_store_conformance(fresh.sqlite))


def test_conformance_on_postgresql_as_superuser(fresh: Fresh) -> None:
    if not PG_URL:
        pytest.skip("needs SESSIONSTORE_TEST_PG_URL")
    asyncio.run(run_session_store_conformance(fresh.postgresql))


def test_every_optional_method_is_implemented() -> None:
    """The suite skips an optional contract when the store inherits the protocol's default: none is inherited."""
    from claude_agent_sdk import SessionStore as Protocol

    for method in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
        assert getattr(AgentSdkStore, method) is not getattr(Protocol, method), method


ODD_ENTRIES: list[dict[str, Any]] = [
    {"type": "x", "n": 1},  # no uuid: appended every time
    {"type": "x", "uuid": "u1", "text": 'caf\u00e9 \u2028 \U0001f600 \x00 \x1f \\ "', "f": 1.5, "big": 10**30},
    {"type": "x", "uuid": "u2", "nested": {"a": [1, None, True, {"b": []}], "": {}}, "neg": -0.0, "e": 1e-7},
    {"type": "x", "uuid": "u3", "lone": "\ud800 and \udfff", "keys": {"z": 1, "a": 2}},
    {"type": "x", "n": 1},
]


def test_entries_come_back_exactly_and_a_retried_batch_adds_nothing(store_url: str) -> None:
    async def run() -> None:
        with AgentSdkStore.open(store_url) as adapter:
            await adapter.append(KEY, ODD_ENTRIES)
            await adapter.append(KEY, ODD_ENTRIES[1:4])  # the SDK retrying a batch that did land
            await adapter.append(KEY, [])
            await adapter.append(KEY, [{"type": "x", "uuid": "u4"}, {"type": "x", "uuid": "u4", "dup": True}])
            loaded = await adapter.load(KEY)
        expected = [*ODD_ENTRIES, {"type": "x", "uuid": "u4"}]
        assert loaded == expected
        assert [list(e) for e in loaded] == [list(e) for e in expected]  # key order kept too
        assert json.dumps(loaded) == json.dumps(expected)

    asyncio.run(run())


def test_a_batch_stored_whole_adds_nothing_when_sent_again_but_entries_without_uuid_are_never_merged(
    store_url: str,
) -> None:
    batch = [{"type": "mode", "mode": "plan"}, {"type": "x", "uuid": "w1"}, {"type": "tag", "tag": "t"}]

    async def run() -> tuple[Any, Any]:
        with AgentSdkStore.open(store_url) as adapter:
            await adapter.append(KEY, batch)
            await adapter.append(KEY, batch)  # the retry of a batch whose append landed
            other = {**KEY, "session_id": "other"}
            await adapter.append(other, [{"type": "x", "n": 1}])
            await adapter.append(other, [{"type": "x", "n": 1}])  # no uuid: a second entry, as in memory
            return await adapter.load(KEY), await adapter.load(other)

    once, twice = asyncio.run(run())
    assert once == batch
    assert twice == [{"type": "x", "n": 1}, {"type": "x", "n": 1}]


APPENDER = """
import asyncio, sys
from sessionstore.integrations.agent_sdk import AgentSdkStore

async def main():
    with AgentSdkStore.open(sys.argv[1]) as adapter:
        for i in range(int(sys.argv[3])):
            await adapter.append({"project_key": "proj", "session_id": "sess"},
                                 [{"type": "x", "uuid": f"{sys.argv[2]}-{i}"}, {"type": "x", "who": sys.argv[2]}])

asyncio.run(main())
"""


def test_two_processes_appending_to_one_key_lose_nothing(store_url: str) -> None:
    rounds = 40
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, store_url, who, str(rounds)], stderr=subprocess.PIPE)
        for who in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    with AgentSdkStore.open(store_url) as adapter:
        loaded = asyncio.run(adapter.load(KEY)) or []
    assert len(loaded) == 4 * rounds
    for who in ("a", "b"):
        mine = [e for e in loaded if e.get("who") == who or str(e.get("uuid", "")).startswith(f"{who}-")]
        # each batch stays whole and in its process's order
        assert mine == [
            e for i in range(rounds) for e in ({"type": "x", "uuid": f"{who}-{i}"}, {"type": "x", "who": who})
        ]


def test_importing_sessionstore_or_running_a_command_never_imports_the_sdk(
    tmp_path: Path, templates: Templates
) -> None:
    probe = (
        "import sys\n"
        "import sessionstore, sessionstore.integrations\n"
        "from sessionstore.cli.app import main\n"
        "for command in (['sessions'], ['doctor'], ['search', 'x']):\n"
        "    try:\n"
        "        main([*command, '--db', sys.argv[1]])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code in (0, None), (command, exc.code)\n"
        "assert 'claude_agent_sdk' not in sys.modules, 'imported the SDK'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, templates.sqlite(tmp_path / "s.db")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_adapter_from_a_url_opens_and_closes_its_store(store_url: str) -> None:
    adapter = AgentSdkStore(store_url)
    asyncio.run(adapter.append(KEY, [{"type": "x", "uuid": "a"}]))
    adapter.close()
    with AgentSdkStore(store_url) as again:
        assert asyncio.run(again.load(KEY)) == [{"type": "x", "uuid": "a"}]


def test_adapter_from_an_open_store_leaves_it_open(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        adapter = AgentSdkStore(store)
        asyncio.run(adapter.append(KEY, [{"type": "x", "uuid": "a"}]))
        adapter.close()
        assert store.db.one("SELECT count(*) FROM agent_sdk_entries")[0] == 1
