"""A session whose boundaries the Messages API made, through the local API server and the real SDK.

Three compactions, one of each API kind, in this order:

1. `api-on-demand`, trigger `manual`: `ServerCompactor.compact(trigger="manual")` after a
   first piece of work (a user request, a file read, a failing test run);
2. `api-threshold`, trigger `auto`: a turn sent with the `compact_20260112` edit whose
   trigger the prompt reaches, so the reply opens with the server's compaction block and
   goes on with the model's answer;
3. `api-background`, trigger `auto`: a request sent on a thread and held by the server while
   two more messages are appended, then swapped in (those two follow the block);

then one more threshold turn whose compaction fails (a block with null content, then the answer):
an ordinary message, no boundary.

Each summary is written by the server's summarizer, set here so a test knows what it kept:
`SUMMARY_LEAD` and every user request the compacted request held (never a path nor a failure).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import anthropic

from sessionstore import SessionStore
from sessionstore.compaction.server import THRESHOLD_BETA, ServerCompactor
from sessionstore.storage.write.session import Session
from tests.support.convo import tool_result, tool_use
from tests.support.fakeapi import FakeAPI

MODEL = "claude-opus-4-7"
CWD = "/srv/app"
SUMMARY_LEAD = "API summary"
#: What the user asked before each compaction (one user message each).
REQUESTS = (
    "Fix the zanzibar date parser in src/dates.py.",
    "Now make the pemba exporter stream its rows.",
    "Then document the mafia importer.",
)
FAILURE = "ValueError: bad month 13"
#: The model's answer after the threshold compaction block, in the same reply.
THRESHOLD_ANSWER = "Continuing: the pemba exporter now streams."
#: Appended while the background request was held by the server.
MEANWHILE = ("While you compact: also check the tests.", "Checking the tests now.")
#: The last request, and the answer after the failed compaction block in its reply.
LAST_REQUEST = "And after that?"
FAILED_ANSWER = "The tests pass; nothing was compacted this time."


@dataclass(frozen=True)
class ApiSession:
    """The session and what its three API boundaries are expected to show."""

    id: str
    #: (kind, trigger) of boundaries 1, 2, 3.
    kinds: tuple[tuple[str, str], ...]
    #: The summary text (the compaction block's content) of boundaries 1, 2, 3.
    summaries: tuple[str, ...]


def server_summary(messages: list[dict[str, Any]], instructions: str | None) -> str:
    """The summary the local server writes: SUMMARY_LEAD, then every user request it was sent, as typed."""
    asked = [m["content"] for m in messages if m["role"] == "user" and isinstance(m["content"], str)]
    return f"{SUMMARY_LEAD} of {len(messages)} messages.\n" + "\n".join(f"- {text}" for text in asked)


def client_of(api: FakeAPI) -> anthropic.Anthropic:
    """The real SDK pointed at the local server."""
    return anthropic.Anthropic(base_url=api.base_url, api_key="sk-ant-test-api-session", max_retries=0)


def make_api_session(store: SessionStore, api: FakeAPI) -> ApiSession:
    """Record the three API compactions described above in a new session of `store`."""
    api.summarize = server_summary
    client = client_of(api)
    session = store.create_session(title="api boundaries", cwd=CWD, model=MODEL)
    _first_piece_of_work(session)
    ServerCompactor(client, MODEL).compact(session, trigger="manual")
    _threshold_turn(session, client, api, REQUESTS[1], THRESHOLD_ANSWER)
    _background_swap(session, client, api)
    api.failing_compactions = 1
    _threshold_turn(session, client, api, LAST_REQUEST, FAILED_ANSWER)
    from sessionstore.storage.read.history import boundaries

    found = boundaries(session)
    return ApiSession(
        session.id,
        tuple((b.kind, b.trigger) for b in found),
        tuple(b.summary or "" for b in found),
    )


def _first_piece_of_work(session: Session) -> None:
    """A request, a file read and a failing test run, as an agent records them."""
    session.append({"role": "user", "content": REQUESTS[0]})
    session.append({"role": "assistant", "content": [tool_use("r1", "Read", file_path=f"{CWD}/src/dates.py")]})
    session.append({"role": "user", "content": [tool_result("r1", "def parse(text): ...")]})
    session.append({"role": "assistant", "content": [tool_use("b1", "Bash", command="pytest")]})
    session.append({"role": "user", "content": [tool_result("b1", f"Exit code 1\n{FAILURE}", is_error=True)]})
    session.append({"role": "assistant", "content": "The month check is off by one; fixed."})


def _threshold_turn(session: Session, client: anthropic.Anthropic, api: FakeAPI, asked: str, answer: str) -> None:
    """One turn sent with a compact edit the prompt reaches: the reply is the block, then `answer`."""
    api.script(answer)
    session.append({"role": "user", "content": asked})
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1}}
    reply = client.beta.messages.create(
        model=MODEL,
        max_tokens=256,
        messages=session.active_view(),
        context_management={"edits": [edit]},
        betas=[THRESHOLD_BETA],
    )
    session.append(reply)


def _background_swap(session: Session, client: anthropic.Anthropic, api: FakeAPI) -> None:
    """A background request held by the server while two messages are appended, then swapped in."""
    session.append({"role": "user", "content": REQUESTS[2]})
    session.append({"role": "assistant", "content": "The mafia importer is documented."})
    compactor = ServerCompactor(client, MODEL, mode="background")
    api.compaction_arrived.clear()
    api.compaction_gate = gate = threading.Event()
    try:
        assert compactor.start(session)
        assert api.compaction_arrived.wait(30), "the background request reached the server"
        session.append({"role": "user", "content": MEANWHILE[0]})
        session.append({"role": "assistant", "content": MEANWHILE[1]})
    finally:
        gate.set()
        api.compaction_gate = None
    assert compactor.finish(session, wait=True, timeout=30) is not None
