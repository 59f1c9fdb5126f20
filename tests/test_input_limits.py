"""Inputs past what the databases take are refused in one line (issue 20, item 10).

More than MAX_TERMS search terms (SQLite's "Expression tree is too large" past ~1,000 clauses), a
50,000-character recall query (SQLite's "LIKE or GLOB pattern too complex") and arguments that are
not UTF-8 (lone surrogates, then UnicodeEncodeError) are each refused: a typed error from the API,
one line and exit 2 from the CLI, a tool error over MCP; on both engines.
"""

from __future__ import annotations

import itertools
import os
import string
from typing import Any

import pytest
from mcp import Client

from sessionstore import SessionStore
from sessionstore.agent.mcp_server import build_server
from sessionstore.compaction.engine import compact
from sessionstore.storage.read.recall import MAX_QUERY_CHARS, RecallError, recall
from sessionstore.storage.derived.search import MAX_TERMS, SearchQueryError
from tests.support.cli import Result, run_cli, run_cli_process

#: Distinct two-letter words: short terms are each a clause of their own in the SQLite query.
WORDS = ["".join(p) for p in itertools.product(string.ascii_lowercase + string.digits, repeat=2)]
TOO_MANY = " ".join(WORDS[:1_001])
TOO_LONG = "q" * 50_000


@pytest.fixture
def compacted(store: SessionStore) -> str:
    s = store.create_session(title="limits")
    for i in range(12):
        s.append({"role": "user", "content": f"question {i} about the parser " + "word " * 60})
        s.append({"role": "assistant", "content": f"answer {i} " + "text " * 60})
    compact(s)
    return s.id


def one_line_error(result: Result, *words: str) -> None:
    assert result.code == 2, (result.code, result.err[-500:])
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and not result.out
    for word in words:
        assert word in result.err, result.err


def test_too_many_search_terms_are_refused(
    store: SessionStore, compacted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SearchQueryError, match="1,001 words or phrases"):
        store.search(TOO_MANY)
    one_line_error(run_cli(capsys, "search", TOO_MANY, "--db", store.url), f"at most {MAX_TERMS}")
    assert run_cli(capsys, "search", " ".join(WORDS[:MAX_TERMS]), "--db", store.url).code == 0


def test_a_recall_query_past_the_pattern_limit_is_refused(
    store: SessionStore, compacted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    session = store.get(compacted)
    with pytest.raises(RecallError, match="too long"):
        recall(session, query=TOO_LONG)
    with pytest.raises(RecallError, match="too long"):
        recall(session, query="\x01" * 9_000)  # 9,000 characters, 54,000 once JSON-escaped
    one_line_error(run_cli(capsys, "recall", compacted, "--query", TOO_LONG, "--db", store.url), "too long")
    assert run_cli(capsys, "recall", compacted, "--query", "q" * MAX_QUERY_CHARS, "--db", store.url).code == 0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_over_mcp_each_limit_is_a_tool_error(store: SessionStore, compacted: str, anyio_backend: str) -> None:
    async with Client(build_server(store)) as client:
        searched: Any = await client.call_tool("search", {"query": TOO_MANY})
        assert searched.is_error and f"at most {MAX_TERMS}" in searched.content[0].text
        recalled: Any = await client.call_tool("recall", {"session": compacted, "query": TOO_LONG})
        assert recalled.is_error and "too long" in recalled.content[0].text


@pytest.mark.parametrize(
    "args",
    [
        ["new", "--title", "\udcff\udcfe title"],
        ["search", "caf\udce9"],
        ["view", "\udcff"],
        ["recall", "x", "--query", "\udcc3("],
    ],
)
def test_arguments_that_are_not_utf8_are_refused(sqlite_url: str, args: list[str]) -> None:
    """Python hands undecodable argv bytes over as lone surrogates; they used to end in UnicodeEncodeError."""
    run_cli_process("new", "--db", sqlite_url)
    result = run_cli_process(*args, "--db", sqlite_url, env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert result.code == 2, (result.code, result.err[-800:])
    assert result.err.startswith("error: argument ") and "not valid UTF-8" in result.err, result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert "\\xff" in result.err or "\\xe9" in result.err or "\\xc3" in result.err
