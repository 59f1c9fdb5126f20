"""A stateful property test: random appends, compactions of every kind, prepares and reopens.

After every step the design's invariants hold, checked against a plain in-memory
model of what was appended and of every view seen before a compaction.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sessionstore.compaction.engine import compact
from sessionstore.compaction.full import NothingToCompact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore import SessionStore
from sessionstore.storage.read.history import boundaries, view_before
from sessionstore.storage.write.memory import save_memory
from sessionstore.storage.records.view import to_api_messages
from tests.conftest import PG_URL, _pg_schema_url
from tests.support.validity import check_messages

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60).filter(str.strip)


class SessionMachine(RuleBasedStateMachine):
    """The store under test next to a model: appended messages and views before each boundary."""

    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.store = SessionStore.open(self.url)
        self.session = self.store.create_session(title="stateful", context_window=200_000)
        self.reader = self.store.get(self.session.id)
        self.appended: list[dict[str, Any]] = []
        self.views_before: list[list[int]] = []
        self.pending: list[str] = []

    def teardown(self) -> None:
        self.store.close()

    def _append(self, message: dict[str, Any], *, via_reader: bool = False) -> None:
        message = {**message, "uuid": str(uuid.uuid4())}
        (self.reader if via_reader else self.session).append(message)
        self.appended.append(message)

    @rule(text=TEXT)
    @precondition(lambda self: not self.pending)
    def user_says(self, text: str) -> None:
        self._append({"role": "user", "content": text}, via_reader=True)
        self._append({"role": "assistant", "content": f"ok: {text[:20]}"}, via_reader=True)

    @rule(
        n=st.integers(min_value=1, max_value=3), size=st.integers(min_value=0, max_value=3000), streamed=st.booleans()
    )
    @precondition(lambda self: not self.pending)
    def assistant_calls_tools(self, n: int, size: int, streamed: bool) -> None:
        self._append({"role": "user", "content": "please look"})
        api = f"msg-{uuid.uuid4().hex[:8]}"
        ids = [f"tu-{uuid.uuid4().hex[:10]}" for _ in range(n)]
        if streamed:
            self._append(
                {
                    "role": "assistant",
                    "api_message_id": api,
                    "content": [{"type": "thinking", "thinking": "plan", "signature": "s"}],
                }
            )
        self._append(
            {
                "role": "assistant",
                "api_message_id": api,
                "content": [
                    {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"{i}.py"}} for i in ids
                ],
            }
        )
        self.pending = ids
        self.result_size = size

    @rule()
    @precondition(lambda self: bool(self.pending))
    def tools_answer(self) -> None:
        self._append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": "y" * self.result_size} for i in self.pending
                ],
            }
        )
        self.pending = []
        self._append({"role": "assistant", "content": "done"})

    @rule(kind=st.sampled_from(["full", "from", "up_to", "memory"]), pick=st.integers(min_value=0, max_value=50))
    @precondition(lambda self: not self.pending)
    def compact_now(self, kind: str, pick: int) -> None:
        entries = self.session.active_entries()
        prompts = [
            e
            for e in entries
            if e.role == "user" and isinstance(e.content, str) and not e.message.is_compact_summary and e.type == "user"
        ]
        kwargs: dict[str, Any] = {}
        if kind in ("from", "up_to"):
            if not prompts:
                return
            pivot = prompts[pick % len(prompts)].uuid
            kwargs = {"from_uuid": pivot} if kind == "from" else {"up_to_uuid": pivot}
        elif kind == "memory":
            if len(entries) < 3:
                return
            covered = entries[-(1 + pick % (len(entries) - 1))]
            save_memory(
                self.session,
                "# Current State\nnotes\n",
                covers_seq=covered.seq,
                covers_uuid=covered.uuid,
                tokens=0,
                tool_calls=0,
            )
            kwargs = {"use_memory": True}
        before = [e.seq for e in entries]
        try:
            compact(self.session, **kwargs)
        except NothingToCompact:
            return
        self.views_before.append(before)

    @rule()
    def prepare(self) -> None:
        prepared = Pipeline(self.store).prepare(self.session)
        messages = prepared.messages
        assert not messages or check_messages(messages) == [] or self._only_pending_problem(messages)

    @rule()
    def reopen(self) -> None:
        view = self.session.active_view()
        self.store.close()
        self.store = SessionStore.open(self.url)
        self.session = self.store.get(self.session.id)
        self.reader = self.store.get(self.session.id)
        assert self.session.active_view() == view, "a reopened session shows the same view (invariant 6)"

    def _only_pending_problem(self, messages: list[dict[str, Any]]) -> bool:
        problems = check_messages(messages)
        return bool(self.pending) and all("not answered" in p for p in problems)

    @invariant()
    def nothing_recorded_is_lost(self) -> None:
        recorded = {m.uuid: m for m in self.session.transcript()}
        for message in self.appended:
            assert recorded[message["uuid"]].content == message["content"]
        order = [m.uuid for m in self.session.transcript() if m.uuid in {a["uuid"] for a in self.appended}]
        assert order == [a["uuid"] for a in self.appended]

    @invariant()
    def view_is_a_valid_request(self) -> None:
        view = self.session.active_view()
        assert not view or check_messages(view) == [] or self._only_pending_problem(view)

    @invariant()
    def past_views_are_exact(self) -> None:
        found = boundaries(self.session)
        assert len(found) == len(self.views_before)
        for k, seqs in enumerate(self.views_before, 1):
            assert [e.seq for e in view_before(self.session, k)] == seqs

    @invariant()
    def token_total_is_incremental_and_exact(self) -> None:
        entries = self.session.active_entries()
        assert self.session.view_tokens == sum(e.tokens for e in entries)
        stored = {m.seq: m.tokens for m in self.session.transcript()}
        assert all(e.tokens == stored[e.seq] for e in entries if not e.replaced)
        assert to_api_messages(entries) == self.session.active_view()

    @invariant()
    def both_cache_forms_send_the_same_messages(self) -> None:
        """The light (role, JSON) cache, kept current across appends and rewrites, matches the entries."""
        expected = to_api_messages(self.session.active_entries())
        assert self.reader.active_view() == expected
        assert self.store.get(self.session.id).active_view() == expected


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_invariants_hold_under_random_operations(engine: str, tmp_path: Path) -> None:
    if engine == "postgresql" and not PG_URL:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    counter = iter(range(10_000))

    def fresh_url() -> str:
        if engine == "sqlite":
            return f"sqlite:///{tmp_path / f'state-{next(counter)}.db'}"
        gen = _pg_schema_url(PG_URL or "")
        url = next(gen)
        cleanups.append(gen)
        return url

    cleanups: list[Any] = []

    class Machine(SessionMachine):
        def __init__(self) -> None:
            type(self).url = fresh_url()
            super().__init__()

    runner = Machine.TestCase
    runner.settings = settings(
        max_examples=25 if engine == "sqlite" else 10,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    try:
        runner().runTest()
    finally:
        for gen in cleanups:
            for _ in gen:
                pass
