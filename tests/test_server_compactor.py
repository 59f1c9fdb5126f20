"""The pipeline compacts through the Messages API when asked (issue 38, part 3).

A session driven through the local API server with the real SDK: on-demand compaction at the
threshold (50 of them), the fallback to our own compaction when the API gives no summary,
threshold compaction through `context_management`, and the background swap that keeps every
message appended while the request was in flight; on both engines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import anthropic
import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.compaction.server import ServerCompactor
from sessionstore.storage.core.errors import RewriteConflict
from sessionstore.storage.read.history import boundaries, view_before
from sessionstore.storage.records.view import to_api_messages
from tests.support.fakeapi import FakeAPI, Reply, start_fake_api
from tests.support.validity import assert_valid

MODEL = "claude-opus-4-7"
WINDOW = 40_000  # threshold 40,000 - 20,000 - 13,000 = 7,000 tokens
FILLER = " ".join(f"detail{i}" for i in range(600))


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = start_fake_api(default="noted")
    try:
        yield server
    finally:
        server.close()


def _client(api: FakeAPI) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=api.base_url, api_key="sk-ant-test-server-compactor", max_retries=0)


def _pipeline(store: SessionStore, compactor: ServerCompactor) -> Pipeline:
    config = store.config.replace(microcompact_enabled=False, snip_enabled=False, memory_init_tokens=10**9)
    return Pipeline(store, config=config, compactor=compactor)


def _turn(session: Any, pipeline: Pipeline, client: anthropic.Anthropic, text: str) -> Any:
    """One agent turn: append the prompt, prepare, call the model with what prepare says, append the reply."""
    session.append({"role": "user", "content": text})
    prepared = pipeline.prepare(session)
    kwargs: dict[str, Any] = {}
    if prepared.context_management:
        kwargs = {"context_management": prepared.context_management, "betas": prepared.betas}
    reply = client.beta.messages.create(model=MODEL, max_tokens=256, messages=prepared.messages, **kwargs)
    session.append(reply)
    return prepared


def _compaction_requests(api: FakeAPI) -> list[list[dict[str, Any]]]:
    return [r.messages for r in api.message_requests if "compaction" in r.body]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "sessionstore"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, check=False)


def test_fifty_on_demand_compactions_walk_back_exactly(api: FakeAPI, store: SessionStore, tmp_path: Path) -> None:
    """Every threshold crossing compacts through the API; history lists 50 API boundaries, -b K is the request
    compacted at K, search finds a summarized word with its boundary, and the jsonl export imports back to them."""
    client = _client(api)
    pipeline = _pipeline(store, ServerCompactor(client, MODEL, instructions="keep every marker word"))
    session = store.create_session(title="fifty", context_window=WINDOW, model=MODEL)
    turn = 0
    while len(boundaries(session)) < 50:
        turn += 1
        assert turn < 400, "the threshold is never crossed"
        _turn(session, pipeline, client, f"marker{turn} {FILLER}")
    found = boundaries(session)
    assert {b.kind for b in found} == {"api-on-demand"}
    sent = _compaction_requests(api)
    assert len(sent) == 50
    for k in (1, 2, 25, 50):
        assert to_api_messages(view_before(session, k)) == sent[k - 1]
    assert "keep every marker word" in (found[0].summary or "")
    assert_valid(session.active_view())
    hits = json.loads(_cli("search", "marker1", "--session", session.id, "--json", "--db", store.url).stdout)["hits"]
    assert any(h["boundary"] == 1 for h in hits)
    listing = _cli("history", session.id, "--limit", "100", "--db", store.url)
    assert listing.returncode == 0 and listing.stdout.count("api-on-demand") == 50
    out = tmp_path / "fifty.jsonl"
    out.write_text(_cli("export", session.id, "--format", "jsonl", "--db", store.url).stdout)
    target = f"sqlite:///{tmp_path / 'again.db'}"
    assert _cli("import", "jsonl", str(out), "--db", target).returncode == 0
    with SessionStore.open(target) as again:
        [row] = again.list()
        copy = again.get(row["id"])
        assert [(b.kind, b.summary) for b in boundaries(copy)] == [(b.kind, b.summary) for b in found]
        assert copy.active_view() == session.active_view()


def test_no_summary_falls_back_to_our_compaction_and_says_so(api: FakeAPI, store: SessionStore) -> None:
    """A failed server compaction writes no API boundary; our own compaction runs and the report names why."""
    client = _client(api)
    pipeline = _pipeline(store, ServerCompactor(client, MODEL))
    session = store.create_session(title="fallback", context_window=WINDOW, model=MODEL)
    api.failing_compactions = 1
    reports = []
    while not boundaries(session):
        reports.append(_turn(session, pipeline, client, f"step {len(reports)} {FILLER}").report["autocompact"])
    details = reports[-1].details
    assert "ServerCompactionFailed" in details["server_fallback"]
    [ours] = boundaries(session)
    assert not ours.kind.startswith("api-")
    [notice] = [m for m in session.transcript() if m.subtype == "compaction_fallback"]
    assert "ServerCompactionFailed" in notice.metadata["reason"]
    assert_valid(session.active_view())


def test_threshold_mode_records_the_replies_block_as_a_boundary(api: FakeAPI, store: SessionStore) -> None:
    """prepare() sends the compact_20260112 edit and our auto-compact stands aside; each reply that opens with the
    server's compaction becomes an api-threshold boundary whose past view is the request that was compacted."""
    client = _client(api)
    pipeline = _pipeline(store, ServerCompactor(client, MODEL, mode="threshold"))
    session = store.create_session(title="threshold", context_window=WINDOW, model=MODEL)
    sent_before: list[list[dict[str, Any]]] = []
    for step in range(40):
        prepared = _turn(session, pipeline, client, f"topic{step} {FILLER}")
        edit = prepared.context_management["edits"][-1]
        assert edit["type"] == "compact_20260112" and "compact-2026-01-12" in prepared.betas
        if len(boundaries(session)) > len(sent_before):
            sent_before.append(prepared.messages)
            assert session.active_view()[0]["content"][0]["type"] == "compaction"
    found = boundaries(session)
    assert len(found) >= 3 and {b.kind for b in found} == {"api-threshold"}
    assert len(sent_before) == len(found)
    for k, request in enumerate(sent_before, 1):
        assert to_api_messages(view_before(session, k)) == request
    assert_valid(session.active_view())


def test_background_swap_keeps_every_message_appended_while_in_flight(api: FakeAPI, store: SessionStore) -> None:
    """The server holds the request; meanwhile the agent appends; the swap replaces exactly what was sent and
    every message appended since follows the block, in order."""
    client = _client(api)
    compactor = ServerCompactor(client, MODEL, mode="background", background_at=0.5)
    pipeline = _pipeline(store, compactor)
    session = store.create_session(title="background", context_window=WINDOW, model=MODEL)
    api.compaction_gate = gate = threading.Event()
    step = 0
    while not compactor.in_flight(session):
        step += 1
        assert step < 50
        _turn(session, pipeline, client, f"early{step} {FILLER}")
    assert api.compaction_arrived.wait(30)
    sent = compactor.sent(session)
    assert sent is not None
    for i in range(3):
        prepared = _turn(session, pipeline, client, f"while-in-flight {i}")
        assert prepared.view_version == 0 and compactor.in_flight(session)
    meanwhile = list(session.transcript(after_seq=sent.last_seq))
    assert len(meanwhile) == 7  # the reply to the turn that sent the request, then three more turns
    gate.set()
    stored = compactor.finish(session, wait=True, timeout=30)
    assert stored is not None
    entries = [e for e in session.active_entries() if e.role != "system"]
    assert entries[0].uuid == stored.uuid
    assert [e.uuid for e in entries[1:]] == [m.uuid for m in meanwhile]
    [found] = boundaries(session)
    assert found.kind == "api-background"
    assert to_api_messages(view_before(session, 1)) == _compaction_requests(api)[0]
    assert_valid(session.active_view())


def test_background_swap_refuses_after_a_concurrent_rewrite(api: FakeAPI, store: SessionStore) -> None:
    """Our own compaction lands while the API request is in flight: the swap raises RewriteConflict, writes
    nothing, and no message is lost."""
    client = _client(api)
    compactor = ServerCompactor(client, MODEL, mode="background")
    session = store.create_session(title="conflict", context_window=WINDOW, model=MODEL)
    for i in range(6):
        session.append_many([{"role": "user", "content": f"q{i} {FILLER}"}, {"role": "assistant", "content": "a"}])
    api.compaction_gate = gate = threading.Event()
    assert compactor.start(session)
    assert api.compaction_arrived.wait(30)
    compact(session)
    count = sum(1 for _ in session.transcript())
    view = session.active_view()
    gate.set()
    with pytest.raises(RewriteConflict):
        compactor.finish(session, wait=True, timeout=30)
    assert sum(1 for _ in session.transcript()) == count
    assert session.active_view() == view
    assert [b.kind for b in boundaries(session)] == ["full"]


def _merged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive same-role messages as one, as the API reads them (it combines consecutive turns)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        blocks = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else list(m["content"])
        if out and out[-1]["role"] == m["role"]:
            out[-1]["content"] += blocks
        else:
            out.append({"role": m["role"], "content": blocks})
    return out


def test_the_view_after_an_api_compaction_is_what_the_sdk_tool_runner_sends(store: SessionStore) -> None:
    """The SDK's own tool runner, told compact_before_next_turn(), and the store fed the same replies send the same
    request after the compaction (the runner's separate assistant turns read as one, as the API combines them)."""
    from anthropic import beta_tool

    @beta_tool
    def lookup(name: str) -> str:
        """Look a name up."""
        return f"{name}: 3 ports"

    server = start_fake_api(validate=False)
    try:
        server.script(
            Reply.tool_use("lookup", {"name": "zanzibar"}), Reply.tool_use("lookup", {"name": "pemba"}), "Done."
        )
        runner = _client(server).beta.messages.tool_runner(
            model=MODEL,
            max_tokens=256,
            tools=[lookup],
            thread=False,
            betas=["compact-2026-09-04"],
            messages=[{"role": "user", "content": "how many ports has zanzibar?"}],
        )
        replies = []
        for reply in runner:
            replies.append(reply)
            if len(replies) == 1:
                runner.compact_before_next_turn()
        requests = [r.messages for r in server.message_requests]
    finally:
        server.close()
    assert [r.stop_reason for r in replies] == ["tool_use", "compaction", "tool_use", "end_turn"]
    session = store.create_session(title="runner")
    session.append(requests[0][0])
    session.append(replies[0])
    session.append(requests[1][-1])
    session.append(replies[1])
    assert session.active_view() == requests[2]
    assert_valid(session.active_view())
    session.append(replies[2])
    session.append(requests[3][-1])
    assert session.active_view() == _merged(requests[3])
    [found] = boundaries(session)
    assert to_api_messages(view_before(session, 1)) == requests[1]


def test_pinned_rules_travel_in_the_instructions_into_the_servers_summary(api: FakeAPI, store: SessionStore) -> None:
    """A pinned standing rule is sent in the compaction's instructions, so the summary that replaces the view
    carries it (the view after an API compaction is the block alone)."""
    client = _client(api)
    session = store.create_session(title="pins", context_window=WINDOW, model=MODEL)
    session.append({"role": "user", "content": "Always run the linter before committing."}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    stored = ServerCompactor(client, MODEL, instructions="be brief").compact(session)
    [request] = [r for r in api.message_requests if "compaction" in r.body]
    instructions = request.body["compaction"]["instructions"]
    assert "be brief" in instructions and "Always run the linter before committing." in instructions
    assert "Always run the linter before committing." in stored.content[0]["content"]
    assert session.active_view() == [{"role": "assistant", "content": stored.content}]
