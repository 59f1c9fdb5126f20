"""Recall: the exact messages before a boundary, bounded and paged; and the agent's recall tool end to end."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest

from sessionstore import Config, SessionStore
from sessionstore.agent.loop import Agent
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.storage.core.errors import MessageNotFound, SessionStoreError
from sessionstore.storage.read.history import BoundaryNotFound, view_before
from sessionstore.storage.read.recall import recall
from sessionstore.storage.read.recall import RecallError
from sessionstore.storage.write.session import Session
from tests.support.convo import tool_result, tool_use
from tests.support.fakeapi import RecordedRequest, Reply, start_fake_api

SECRET_LINE = "The staging database listens on port 48213 behind the VPN."


def _long_session(store: SessionStore, rounds: int = 40) -> Session:
    session = store.create_session(title="recall", cwd="/w")
    for i in range(rounds):
        session.append({"role": "user", "content": f"request {i}: " + "word " * 30})
        session.append({"role": "assistant", "content": [tool_use(f"t{i}", "Bash", command=f"echo {i}")]})
        body = SECRET_LINE if i == 7 else f"output {i} " + " ".join(f"x{j}" for j in range(300))
        session.append({"role": "user", "content": [tool_result(f"t{i}", body)]})
        session.append({"role": "assistant", "content": f"answer {i}"})
    compact(session)
    return session


def test_recall_pages_back_through_the_whole_view_exactly_once(store: SessionStore) -> None:
    session = _long_session(store)
    expected = [e.seq for e in view_before(session, 1)]
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        page = recall(session, 1, max_tokens=600, cursor=cursor)
        assert page.tokens <= 600, "a page, its note included, stays within the budget"
        seen = [m.seq for m in page.messages] + seen
        pages += 1
        if page.next_cursor is None:
            break
        assert f"cursor={page.next_cursor}" in page.text
        cursor = page.next_cursor
    assert seen == expected
    assert pages > 5
    assert page.earlier == 0


def test_recall_by_query_returns_the_exact_text(store: SessionStore) -> None:
    session = _long_session(store)
    found = recall(session, 1, query="PORT 48213")
    assert SECRET_LINE in found.text
    assert [m.seq for m in found.messages] == [31]
    assert found.mode == "query"
    none = recall(session, 1, query="no such words anywhere")
    assert none.messages == [] and "none found" in none.text


def test_recall_around_a_uuid_shows_its_neighbours(store: SessionStore) -> None:
    session = _long_session(store)
    target = next(m for m in session.transcript() if m.seq == 31)
    around = recall(session, 1, around_uuid=target.uuid, max_tokens=400)
    seqs = [m.seq for m in around.messages]
    assert 31 in seqs and min(seqs) < 31 < max(seqs)
    assert seqs == sorted(seqs) and seqs == list(range(seqs[0], seqs[-1] + 1))
    with pytest.raises(MessageNotFound):
        recall(session, 1, around_uuid="not-a-uuid")


def test_recall_shows_the_original_of_a_result_the_view_had_cleared(store: SessionStore) -> None:
    session = store.create_session(title="cleared")
    session.append({"role": "user", "content": "go"})
    for i in range(16):
        session.append({"role": "assistant", "content": [tool_use(f"r{i}", "Read", file_path=f"f{i}.py")]})
        session.append({"role": "user", "content": [tool_result(f"r{i}", f"contents of file {i} " + "y" * 50)]})
    Pipeline(store).prepare(session)
    cleared = [e for e in session.active_entries() if e.replaced]
    assert cleared, "microcompact cleared old results"
    compact(session)
    first = cleared[0]
    found = recall(session, 1, around_uuid=first.uuid, max_tokens=200)
    assert "contents of file 0 " in found.text
    assert "cleared or spilled in that view" in found.text


def test_recall_refuses_bad_requests_with_typed_errors(store: SessionStore) -> None:
    session = store.create_session(title="none")
    session.append({"role": "user", "content": "hi"})
    with pytest.raises(BoundaryNotFound):
        recall(session)
    session = _long_session(store, rounds=2)
    with pytest.raises(BoundaryNotFound):
        recall(session, 2)
    with pytest.raises(RecallError):
        recall(session, 1, max_tokens=5)
    with pytest.raises(RecallError):
        recall(session, 1, query="a", around_uuid="b")
    assert issubclass(RecallError, SessionStoreError)


def test_a_huge_message_is_cut_to_the_budget_with_a_note(store: SessionStore) -> None:
    session = store.create_session(title="huge")
    session.append({"role": "user", "content": "start " + " ".join(f"w{i}" for i in range(40_000))})
    session.append({"role": "assistant", "content": "ok"})
    compact(session)
    found = recall(session, 1, query="start", max_tokens=500)
    assert found.tokens <= 500
    found = recall(session, 1, max_tokens=500, cursor=recall(session, 1, max_tokens=500).next_cursor)
    assert found.messages[0].cut and "more characters of this message not shown" in found.text


def test_the_agent_recalls_a_detail_the_summary_dropped(tmp_path: Path, sqlite_url: str) -> None:
    """A scripted model reads a file, the session is compacted, then it calls recall and gets the exact line."""
    filler = "".join(f"filler line {i} about nothing in particular\n" for i in range(150))
    (tmp_path / "notes.txt").write_text("Deployment notes\n" + SECRET_LINE + "\n" + filler, encoding="utf-8")

    def model(request: RecordedRequest) -> Reply:
        first = json.dumps(request.messages[0]["content"])
        last = request.messages[-1]["content"]
        if "recall tool with boundary=1" not in first:
            if isinstance(last, str):
                return Reply.tool_use("Bash", {"command": "cat notes.txt"})
            return Reply.text("I have read the notes.")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return Reply.text("The port is in the recalled text.")
        return Reply.tool_use("recall", {"boundary": 1, "query": "port"})

    with start_fake_api(responder=model) as api, SessionStore.open(sqlite_url) as store:
        session = store.create_session(title="agent", cwd=str(tmp_path))
        client = anthropic.Anthropic(base_url=api.base_url, api_key="sk-ant-test-recall", max_retries=0)
        agent = Agent(session=session, pipeline=Pipeline(store, config=Config()), client=client, workdir=tmp_path)
        agent.ask("Show me notes.txt please.")
        compact(session, config=agent.pipeline.config)
        answer = agent.ask("Which port does staging use?")

        assert answer == "The port is in the recalled text."
        after = api.message_requests[-2:]
        summary_text = json.dumps(after[0].messages[0]["content"])
        assert "48213" not in summary_text, "the summary dropped the detail"
        assert any(t["name"] == "recall" for t in after[0].tools or [])
        results = [b for b in after[1].messages[-1]["content"] if b.get("type") == "tool_result"]
        assert len(results) == 1 and not results[0].get("is_error")
        assert SECRET_LINE in json.dumps(results[0]["content"], ensure_ascii=False).replace("\\n", "\n")


def test_the_summary_names_the_recall_tool_only_when_the_agent_has_it(store: SessionStore, tmp_path: Path) -> None:
    with_tool = store.create_session(title="with")
    without = store.create_session(title="without")
    for session in (with_tool, without):
        session.append({"role": "user", "content": "hello"})
        session.append({"role": "assistant", "content": " ".join(f"word{i}" for i in range(2000))})
    agent = Agent(session=with_tool, pipeline=Pipeline(store), client=None, workdir=tmp_path)
    compact(with_tool, config=agent.pipeline.config)
    compact(without)
    assert recall(with_tool).text and "boundary=1" in (with_tool.active_view()[0]["content"].splitlines()[-1])
    assert "recall" not in json.dumps(without.active_view()[0]["content"])


def test_the_cli_recalls_with_json_and_exits_2_on_a_miss(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.cli import run_cli

    session = _long_session(store, rounds=10)
    out = run_cli(capsys, "recall", session.id[:8], "--query", "48213", "--db", store.url, "--json")
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    assert SECRET_LINE in doc["text"] and doc["boundary"] == 1 and [m["seq"] for m in doc["messages"]] == [31]
    text = run_cli(capsys, "recall", session.id, "--max-tokens", "200", "--db", store.url)
    assert text.code == 0 and "for earlier ones call recall(boundary=1, cursor=" in text.out
    miss = run_cli(capsys, "recall", session.id, "-b", "3", "--db", store.url)
    assert miss.code == 2 and "there is no boundary 3" in miss.err


def test_an_earlier_summary_in_the_view_is_marked_as_one(store: SessionStore) -> None:
    session = _long_session(store, rounds=3)
    session.append({"role": "user", "content": "more work"})
    session.append({"role": "assistant", "content": "done " + " ".join(f"w{i}" for i in range(3000))})
    compact(session)
    found = recall(session, 2, max_tokens=20_000)
    assert "user (compact summary) uuid=" in found.text
    assert "system (compact_boundary) uuid=" in found.text


def test_the_whole_answer_stays_within_max_tokens_whatever_the_query(store: SessionStore) -> None:
    """The closing note repeats the query; a long query is clipped there and the note counts against the budget."""
    session = _long_session(store, rounds=12)
    long_query = "word " * 4_000
    for budget in (300, 600, 1_000, 4_000):
        for found in (
            recall(session, 1, max_tokens=budget),
            recall(session, 1, query="request", max_tokens=budget),
            recall(session, 1, query=long_query, max_tokens=budget),
        ):
            assert found.tokens <= budget, (budget, found.mode, found.tokens)
    assert len(recall(session, 1, query=long_query, max_tokens=300).text) < 2_000


def test_a_cursor_that_recall_never_gave_is_a_typed_error(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.cli import run_cli

    session = _long_session(store, rounds=3)
    for bad in (10**20, -(10**20), True, "12"):
        with pytest.raises(RecallError, match="not a cursor"):
            recall(session, 1, cursor=bad)  # type: ignore[arg-type]
    out = run_cli(capsys, "recall", session.id, "--cursor", "99999999999999999999", "--db", store.url)
    assert out.code == 2 and "not a cursor" in out.err and "Traceback" not in out.err


def test_the_agents_recall_tool_answers_a_bad_cursor_with_a_tool_error(store: SessionStore, tmp_path: Path) -> None:
    from sessionstore.agent.loop import ToolError

    session = _long_session(store, rounds=3)
    agent = Agent(session=session, pipeline=Pipeline(store), client=None, workdir=tmp_path)
    with pytest.raises(ToolError, match="not a cursor"):
        agent._recall({"boundary": 1, "cursor": 10**30})


def test_a_small_page_of_huge_messages_holds_few_of_them_in_memory(store: SessionStore) -> None:
    """Rows are read in growing batches, so a small page of a view of 300 kB messages holds a few of them.

    Reading 64 rows a query (as before) held about 30 of them: 9-11 MB here. Decoding, rendering and
    estimating one message takes a few copies of it, hence the bound of 16 messages.
    """
    import tracemalloc

    from sessionstore.storage.read.recall import view_before_page

    session = store.create_session(title="big rows")
    for i in range(40):
        session.append({"role": "user", "content": f"message {i} " + "z" * 300_000})
        session.append({"role": "assistant", "content": f"ok {i}"})
    compact(session)
    tracemalloc.start()
    try:
        view_before_page(session, 1, limit=1)
        recall(session, 1, max_tokens=200)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 300_000, f"peak {peak:,} bytes: more than a few messages were held"


def test_the_documented_path_and_signature(store: SessionStore) -> None:
    """`sessionstore.history.recall(session, boundary=K, query=None, around_uuid=None, max_tokens=4000)`."""
    from sessionstore import history

    session = _long_session(store, rounds=10)
    found = history.recall(session, boundary=1, query="48213", around_uuid=None, max_tokens=4000)
    assert SECRET_LINE in found.text and found.boundary == 1
    assert [e.seq for e in history.view_before(session, 1)] == [e.seq for e in view_before(session, 1)]
