"""`sessionstore mcp`: the read-only MCP server, through the official SDK's own client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from sessionstore import SessionStore
from sessionstore.agent.mcp_server import GATE_ITEMS, build_server, encode_cursor
from sessionstore.compaction.summarizers.base import SummaryResult
from sessionstore.compaction.engine import compact
from sessionstore.storage.read.history import view_before
from sessionstore.storage.write.session import Session
from tests.support.convo import tool_result, tool_use
from tests.support.mcpstdio import stdio_server

SECRET = "The release branch is cut from commit 9f1c2ab."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _session(store: SessionStore, rounds: int = 30, title: str = "mcp") -> Session:
    session = store.create_session(title=title, cwd="/w")
    for i in range(rounds):
        session.append({"role": "user", "content": f"step {i} " + "word " * 20})
        session.append({"role": "assistant", "content": [tool_use(f"b{i}", "Bash", command=f"echo {i}")]})
        body = SECRET if i == 4 else f"out {i} " + " ".join(f"v{j}" for j in range(200))
        session.append({"role": "user", "content": [tool_result(f"b{i}", body)]})
        session.append({"role": "assistant", "content": f"done {i}"})
    compact(session)
    return session


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.anyio
async def test_every_tool_answers_bounded_pages_with_cursors(store: SessionStore) -> None:
    session = _session(store)
    for n in range(3):
        store.create_session(title=f"extra {n}")
    expected = [e.seq for e in view_before(session, 1)]
    async with Client(build_server(store), raise_exceptions=True) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"search", "list_sessions", "history", "view_before", "recall", "spill_cat"}
        assert all(t.annotations and t.annotations.read_only_hint for t in (await client.list_tools()).tools)

        ids, cursor = [], None
        while True:
            page = await _call(client, "list_sessions", limit=2, **({"cursor": cursor} if cursor else {}))
            assert len(page["sessions"]) <= 2
            ids += [s["id"] for s in page["sessions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(ids) == sorted(r["id"] for r in store.list())

        hist = await _call(client, "history", session=session.id[:8])
        assert [b["index"] for b in hist["boundaries"]] == [1]
        assert hist["boundaries"][0]["facts_gate"]["checked"]["user_messages"] == 30
        assert hist["boundaries"][0]["summary_preview"].startswith("This session is being continued")

        seqs, cursor = [], None
        while True:
            page = await _call(
                client, "view_before", session=session.id, boundary=1, limit=7, **({"cursor": cursor} if cursor else {})
            )
            assert len(page["entries"]) <= 7
            seqs += [e["seq"] for e in page["entries"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seqs == expected

        found = await _call(client, "recall", session=session.id, query="release branch")
        assert SECRET in found["text"]
        last = await _call(client, "recall", session=session.id, max_tokens=300)
        assert last["next_cursor"] and "done 29" in last["text"]
        earlier = await _call(client, "recall", session=session.id, max_tokens=300, cursor=last["next_cursor"])
        assert "done 29" not in earlier["text"]


@pytest.mark.anyio
async def test_misses_and_foreign_cursors_are_tool_errors_the_model_can_read(store: SessionStore) -> None:
    session = _session(store, rounds=2)
    async with Client(build_server(store)) as client:
        missing = await client.call_tool("history", {"session": "no-such-session"})
        assert missing.is_error and "no session" in missing.content[0].text
        foreign = await _call(client, "list_sessions", limit=1)
        assert foreign["next_cursor"] is None
        bad = await client.call_tool("view_before", {"session": session.id, "boundary": 1, "cursor": "bm9wZQ"})
        assert bad.is_error and "not a cursor of view_before" in bad.content[0].text
        nope = await client.call_tool("recall", {"session": session.id, "boundary": 9})
        assert nope.is_error and "there is no boundary 9" in nope.content[0].text
        spill = await client.call_tool("spill_cat", {"session": session.id, "tool_use_id": "b0"})
        assert spill.is_error and "was not spilled" in spill.content[0].text
        for tool, value in (
            ("view_before", 10**30),
            ("recall", "abc"),
            ("history", -3),
            ("list_sessions", 1.5),
            ("search", True),
            ("spill_cat", None),
        ):
            forged = encode_cursor(tool, value)
            args: dict[str, Any] = {"cursor": forged}
            if tool in ("view_before", "recall", "history", "spill_cat"):
                args["session"] = session.id
            if tool == "view_before":
                args["boundary"] = 1
            if tool == "spill_cat":
                args["tool_use_id"] = "b0"
            if tool == "search":
                args["query"] = "step"
            answer = await client.call_tool(tool, args)
            assert answer.is_error and f"not a cursor of {tool}" in answer.content[0].text, (tool, value)


@pytest.mark.anyio
async def test_spill_cat_returns_the_original_in_chunks(store: SessionStore) -> None:
    from sessionstore.compaction.pipeline import Pipeline

    session = store.create_session(title="spill")
    big = "".join(f"line {i} é\n" for i in range(12_000))
    session.append({"role": "user", "content": "go"})
    session.append({"role": "assistant", "content": [tool_use("big1", "Bash", command="cat big")]})
    session.append({"role": "user", "content": [tool_result("big1", big)]})
    Pipeline(store).prepare(session)
    async with Client(build_server(store), raise_exceptions=True) as client:
        text, cursor, chunks = "", None, 0
        while True:
            chunk = await _call(
                client, "spill_cat", session=session.id, tool_use_id="big1", **({"cursor": cursor} if cursor else {})
            )
            text += chunk["text"]
            chunks += 1
            cursor = chunk["next_cursor"]
            if cursor is None:
                break
    assert text == big and chunks > 1


@pytest.mark.anyio
async def test_the_cli_serves_over_stdio_to_the_sdk_client(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mcp.db'}"
    with SessionStore.open(url) as store:
        session = _session(store, rounds=6)
    params = stdio_server(url)
    with anyio.fail_after(60):
        async with Client(params) as client:
            found = await _call(client, "recall", session=session.id, query="release branch")
            sessions = await _call(client, "list_sessions")
            hits = await _call(client, "search", query="release branch")
    assert SECRET in found["text"]
    assert [h["boundary"] for h in hits["hits"]] == [1]
    assert [s["id"] for s in sessions["sessions"]] == [session.id]


@pytest.mark.anyio
async def test_search_finds_compacted_messages_pages_and_leads_to_recall(store: SessionStore) -> None:
    session = _session(store, rounds=12)
    session.append({"role": "user", "content": "Is the release branch ready?"})
    async with Client(build_server(store), raise_exceptions=True) as client:
        hits, cursor, pages = [], None, 0
        while True:
            page = await _call(
                client,
                "search",
                query="release branch",
                session=session.id[:8],
                limit=1,
                **({"cursor": cursor} if cursor else {}),
            )
            assert len(page["hits"]) <= 1
            hits += page["hits"]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 2 and {h["seq"] for h in hits} == {19, 51}
        compacted = next(h for h in hits if h["boundary"] == 1)
        active = next(h for h in hits if h["boundary"] is None)
        assert active["recall"] is None and "«release» «branch»" in compacted["snippet"]
        assert compacted["recall"] == (f"recall(session={session.id!r}, boundary=1, around_uuid={compacted['uuid']!r})")
        only = await _call(client, "search", query="release branch", place="compacted")
        assert [h["seq"] for h in only["hits"]] == [19]
        context = await _call(
            client, "recall", session=session.id, boundary=1, around_uuid=compacted["uuid"], max_tokens=300
        )
        assert SECRET in context["text"]
        bad = await client.call_tool("search", {"query": "x", "cursor": "bm9wZQ"})
        assert bad.is_error


@pytest.mark.anyio
async def test_history_pages_boundaries(store: SessionStore) -> None:
    session = store.create_session(title="many")
    for i in range(5):
        session.append({"role": "user", "content": f"round {i}"})
        session.append({"role": "assistant", "content": f"ok {i} " + " ".join(f"w{j}" for j in range(1500))})
        compact(session)
    async with Client(build_server(store), raise_exceptions=True) as client:
        indexes, cursor = [], None
        while True:
            page = await _call(client, "history", session=session.id, limit=2, **({"cursor": cursor} if cursor else {}))
            assert len(page["boundaries"]) <= 2
            indexes += [b["index"] for b in page["boundaries"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert indexes == [1, 2, 3, 4, 5]


class _Forgetful:
    """A summarizer that keeps nothing, so the facts gate has every fact to add."""

    name = "forgetful"

    def summarize(
        self, entries: Any, *, custom_instructions: str | None = None, truncated: bool = False
    ) -> SummaryResult:
        return SummaryResult(text="Work went on.", raw="Work went on.")


@pytest.mark.anyio
async def test_history_lists_a_bounded_number_of_missing_facts(store: SessionStore) -> None:
    """A gate that added hundreds of facts is reported with its counts whole and a few items per kind."""
    session = store.create_session(title="gate", cwd="/w")
    for i in range(60):
        session.append({"role": "user", "content": f"instruction {i}: keep file f{i}.py tidy"})
        session.append(
            {
                "role": "assistant",
                "content": [tool_use(f"e{i}", "Edit", file_path=f"/w/f{i}.py", old_string="a", new_string="b")],
            }
        )
        session.append({"role": "user", "content": [tool_result(f"e{i}", f"error: f{i}.py is locked", is_error=True)]})
    compact(session, summarizer=_Forgetful())
    async with Client(build_server(store), raise_exceptions=True) as client:
        page = await _call(client, "history", session=session.id)
    gate = page["boundaries"][0]["facts_gate"]
    assert gate["missing"]["paths"] == 60 and gate["missing"]["failures"] == 60
    assert all(len(items) <= GATE_ITEMS for items in gate["missing_items"].values())
    assert gate["missing_items"]["paths"], "the first few are still listed"


def _condensing_session(store: SessionStore) -> tuple[Session, str, list[str]]:
    """Three compactions of file-reading rounds under a 300-token summary budget; (session, summary, paths)."""
    session = store.create_session(title="condensed", cwd="/w", context_window=3_000)
    paths = []
    for part in range(3):
        session.append({"role": "user", "content": f"Part {part}: read the files."})
        for i in range(30):
            path = f"/w/pkg{part}/module_{i}.py"
            paths.append(path)
            session.append({"role": "assistant", "content": [tool_use(f"r{part}_{i}", "Read", file_path=path)]})
            session.append({"role": "user", "content": [tool_result(f"r{part}_{i}", f"def f{i}():\n    return {i}\n")]})
        session.append({"role": "assistant", "content": f"Read part {part}."})
        outcome = compact(session)
    content = session.message(outcome.summary_uuid).content
    assert isinstance(content, str)
    return session, content, paths


@pytest.mark.anyio
async def test_recall_follows_a_summarys_condensed_reference_by_boundary_range(store: SessionStore) -> None:
    from sessionstore.compaction.condense import references_in

    session, summary, paths = _condensing_session(store)
    ranges = references_in(summary)
    assert ranges, "a 300-token budget over 90 files condenses them into a recall reference"
    first, last = ranges[0]
    condensed = [p for p in paths if p not in summary]
    assert condensed
    async with Client(build_server(store), raise_exceptions=True) as client:
        for path in (condensed[0], condensed[-1]):
            found = await _call(client, "recall", session=session.id, boundary=f"{first}..{last}", query=path)
            assert path in found["text"], path
            assert (found["first_boundary"], found["boundary"]) == (first, last)
            assert found["mode"] == "range-query"
        one = await _call(client, "recall", session=session.id, boundary=str(last))
        assert one["first_boundary"] is None and one["boundary"] == last


@pytest.mark.anyio
async def test_a_malformed_or_missing_boundary_range_is_a_tool_error(store: SessionStore) -> None:
    session = _session(store, rounds=2)
    async with Client(build_server(store)) as client:
        for boundary, says in (
            ("1..9", "there is no boundary 9"),
            ("2..1", "the first not after the last"),
            ("0..1", "must run from 1 upwards"),
            ("1..", "boundary"),
            ("one..two", "boundary"),
        ):
            answer = await client.call_tool("recall", {"session": session.id, "boundary": boundary, "query": "step"})
            assert answer.is_error and says in answer.content[0].text, (boundary, answer.content)
