"""The API's own compaction is a boundary (issue 38, part 2).

Appending a reply that holds a `compaction` block with a summary commits, in the
same transaction, a boundary of its own kind; the active view becomes that
message (byte-identical, signature included) and what follows it; the
transcript keeps everything, and `history`, `history -b K`, `search`, `recall`
and the jsonl export show the API's boundaries like ours. A block with null
content (failed compaction) is stored and changes no view.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic.types.beta as sdk_beta
import pytest
from anthropic._models import construct_type

from sessionstore import OrphanToolResult, SessionStore
from sessionstore.storage.read.history import boundaries, summarized_messages, view_before
from tests.support.validity import assert_valid

#: The issue's snippet: a threshold compaction reply, as a user of the SDK appends it.
SNIPPET = {
    "role": "assistant",
    "content": [
        {"type": "compaction", "content": "Summary of the session.", "signature": "EuYBCkQY"},
        {"type": "text", "text": "Continuing."},
    ],
}


def _conversation(session: Any, turns: int, word: str = "zanzibar") -> list[dict[str, Any]]:
    """Append `turns` user/assistant exchanges (the first names `word`); returns them as sent."""
    sent = []
    for i in range(turns):
        user = {"role": "user", "content": f"turn {i}: please look at the {word if i == 0 else 'next'} module"}
        reply = {"role": "assistant", "content": f"looked at part {i}"}
        session.append_many([user, reply])
        sent += [user, reply]
    return sent


def _on_demand_reply(summary: str | None, n: int = 1) -> dict[str, Any]:
    """An on-demand compaction response body (stop_reason "compaction", only the block)."""
    return {
        "id": f"msg_compact_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-7",
        "stop_reason": "compaction",
        "stop_sequence": None,
        "content": [
            {
                "type": "compaction",
                "content": summary,
                "encrypted_content": f"ZW5j{n}",
                "signature": f"c2ln{n}",
                "tool_changes": [],
            }
        ],
        "usage": {"input_tokens": 900, "output_tokens": 60},
    }


def test_issue_snippet_makes_the_reply_the_first_message_byte_identical(store: SessionStore) -> None:
    """The snippet is stored; the view opens with it exactly (also after a resume); the transcript keeps all."""
    session = store.create_session(title="snippet")
    before = _conversation(session, 2)
    stored = session.append(json.loads(json.dumps(SNIPPET)))
    view = session.active_view()
    assert json.dumps(view[0]) == json.dumps(SNIPPET)
    assert len(view) == 1
    assert_valid(view)
    session.append({"role": "user", "content": "and now?"})
    reopened = SessionStore.open(store.url)
    try:
        resumed = reopened.get(session.id)
        assert json.dumps(resumed.active_view()) == json.dumps([SNIPPET, {"role": "user", "content": "and now?"}])
        sent = [{"role": m.role, "content": m.content} for m in resumed.transcript() if m.role != "system"]
        assert sent == [*before, SNIPPET, {"role": "user", "content": "and now?"}]
        [found] = boundaries(resumed)
        assert (found.kind, found.trigger, found.summarizer) == ("api-threshold", "auto", "api")
        assert found.summary == "Summary of the session."
        assert found.summary_seq == stored.seq
        assert [{"role": e.role, "content": e.content} for e in view_before(resumed, 1)] == before
        assert [m.seq for m in summarized_messages(resumed, 1)] == [1, 2, 3, 4]
    finally:
        reopened.close()


def test_on_demand_reply_from_the_sdk_keeps_every_opaque_field(store: SessionStore) -> None:
    """An on-demand reply parsed by the SDK: encrypted_content, signature and tool_changes go back unchanged."""
    session = store.create_session(title="on-demand")
    _conversation(session, 3)
    body = _on_demand_reply("The user asked about zanzibar; three parts were read.")
    reply = construct_type(type_=sdk_beta.BetaMessage, value=json.loads(json.dumps(body)))
    session.append(reply)
    session.append_many([{"role": "user", "content": "go on"}, {"role": "assistant", "content": "going on"}])
    view = session.active_view()
    assert view[0] == {"role": "assistant", "content": body["content"]}
    assert_valid(view)
    [found] = boundaries(session)
    assert (found.kind, found.trigger) == ("api-on-demand", "manual")
    assert found.messages_summarized == 6


def test_failed_compaction_is_stored_and_changes_no_view(store: SessionStore) -> None:
    """Null content: the message is recorded and sent back as it came (a no-op for the server); no boundary."""
    session = store.create_session(title="failed")
    _conversation(session, 2)
    version = session.view_version
    failed = _on_demand_reply(None)
    session.append(failed)
    assert session.view_version == version
    assert boundaries(session) == []
    view = session.active_view()
    assert len(view) == 4
    assert view[-1]["content"][-1] == failed["content"][0]


def test_a_batch_around_the_compaction_is_one_transaction(store: SessionStore) -> None:
    """[question, threshold reply, next question]: the question is in the compacted request, the next one
    follows the reply; a bad message later in the batch writes nothing at all."""
    session = store.create_session(title="batch")
    _conversation(session, 1)
    question = {"role": "user", "content": "and the zanzibar tests?"}
    after = {"role": "user", "content": "thanks"}
    bad = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_none", "content": "x"}]}
    with pytest.raises(OrphanToolResult):
        session.append_many([question, SNIPPET, bad])
    assert [m.seq for m in session.transcript()] == [1, 2]
    assert boundaries(session) == []
    session.append_many([question, SNIPPET, after])
    assert session.active_view() == [SNIPPET, after]
    assert [e.content for e in view_before(session, 1)][-1] == question["content"]


def test_compactions_in_a_row_keep_the_view_short_and_every_past_request(store: SessionStore) -> None:
    """Ten on-demand compactions: the view never grows, each `history -b K` is the request compacted at K."""
    session = store.create_session(title="ten")
    requests = []
    for k in range(1, 11):
        _conversation(session, 2, word=f"word{k}")
        requests.append(session.active_view())
        session.append(_on_demand_reply(f"summary {k}", k))
        assert len(session.active_view()) == 1
    found = boundaries(session)
    assert [b.index for b in found] == list(range(1, 11))
    assert [b.summary for b in found] == [f"summary {k}" for k in range(1, 11)]
    for k, request in enumerate(requests, 1):
        past = view_before(session, k)
        from sessionstore.storage.records.view import to_api_messages

        assert to_api_messages(past) == request


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a person runs it."""
    exe = Path(sys.executable).parent / "sessionstore"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, check=False)


def test_cli_shows_api_boundaries_and_the_export_reimports_them(store: SessionStore, tmp_path: Path) -> None:
    """history lists the API boundary, -b 1 prints the compacted request, search and recall reach the summarized
    span, and a jsonl export imports back to the same boundaries and the same view."""
    session = store.create_session(title="cli")
    before = _conversation(session, 2)
    session.append(SNIPPET)
    session.append({"role": "user", "content": "next step"})
    listing = _cli("history", session.id, "--db", store.url)
    assert listing.returncode == 0, listing.stderr
    assert "api-threshold" in listing.stdout and "Summary of th" in listing.stdout
    assert all(len(line) <= 80 for line in listing.stdout.splitlines())
    past = _cli("history", session.id, "-b", "1", "--json", "--db", store.url)
    assert json.loads(past.stdout)["messages"] == before
    found = _cli("search", "zanzibar", "--session", session.id, "--json", "--db", store.url)
    hits = json.loads(found.stdout)["hits"]
    assert hits and all(h["boundary"] == 1 for h in hits)
    recalled = _cli("recall", session.id, "--boundary", "1", "--db", store.url)
    assert recalled.returncode == 0 and "zanzibar" in recalled.stdout
    out = tmp_path / "s.jsonl"
    exported = _cli("export", session.id, "--format", "jsonl", "--db", store.url)
    out.write_text(exported.stdout)
    target = f"sqlite:///{tmp_path / 'again.db'}"
    imported = _cli("import", "jsonl", str(out), "--json", "--db", target)
    assert imported.returncode == 0, imported.stderr
    again = SessionStore.open(target)
    try:
        [row] = again.list()
        copy = again.get(row["id"])
        assert [(b.kind, b.summary, b.messages_summarized) for b in boundaries(copy)] == [
            ("api-threshold", "Summary of the session.", 4)
        ]
        assert json.dumps(copy.active_view()) == json.dumps(session.active_view())
    finally:
        again.close()


def test_our_compaction_after_an_api_one_carries_its_summary(store: SessionStore) -> None:
    """When our compaction summarizes a view that opens with the API's compaction, the server's summary is
    carried into ours (it is the only record of what came before it in the view)."""
    from sessionstore.compaction.engine import compact

    session = store.create_session(title="ours after theirs")
    _conversation(session, 3)
    session.append(_on_demand_reply("The zanzibar ledger was reconciled; next: export it."))
    for i in range(40):
        session.append_many(
            [{"role": "user", "content": f"later question {i}"}, {"role": "assistant", "content": "y " * 300}]
        )
    compact(session)
    found = boundaries(session)
    assert [b.kind for b in found] == ["api-on-demand", "full"]
    assert "zanzibar ledger was reconciled" in (found[1].summary or "")
    assert_valid(session.active_view())
