"""A restarted pipeline resumes from the state saved in the store: same decisions, no rescan of the view."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest

import sessionstore.compaction.pipeline as pipeline_mod
from sessionstore import SessionStore
from sessionstore.compaction import persisted
from sessionstore.compaction.pipeline import Pipeline
from tests.support.layers import assert_valid_view, tool_round, user
from tests.support.messages import conversation


def _steps() -> list[list[dict]]:
    """Chunks of a tool-heavy conversation, each followed by one over-budget result and an ack."""
    messages = list(conversation(420, seed=11))
    prompts = [i for i, m in enumerate(messages) if m["role"] == "user" and isinstance(m["content"], str)]
    cuts = prompts[::3]
    return [
        [*messages[a:b], *tool_round(f"big{n}", f"{n}" * 60_000, name="Bash"), user("ok")]
        for n, (a, b) in enumerate(pairwise(cuts))
    ]


def _saved(store: SessionStore, session_id: str) -> tuple[int, int]:
    row = store.db.one("SELECT view_version, scanned FROM pipeline_states WHERE session_id = :id", {"id": session_id})
    assert row is not None, "the pipeline saved its state"
    return int(row[0]), int(row[1])


def test_a_restarted_pipeline_decides_what_a_long_lived_one_does(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(persisted, "SAVE_EVERY", 1)
    with SessionStore.open(store_url) as store:
        lived, restarted = store.create_session(), store.create_session()
        pipe = Pipeline(store)
    acted = 0
    for step in _steps():
        with SessionStore.open(store_url) as store:  # a fresh process, as far as the store can tell
            a, b = store.get(lived.id), store.get(restarted.id)
            a.append_many(step)
            b.append_many(step)
            pipe.store = store
            kept = pipe.prepare(a)
            fresh = Pipeline(store).prepare(b)
            acted += fresh.acted
            assert fresh.messages == kept.messages == b.active_view()
            assert {k: (r.acted, r.items) for k, r in fresh.report.items()} == {
                k: (r.acted, r.items) for k, r in kept.report.items()
            }
            assert_valid_view(fresh.messages)
            # A rewrite that removed entries leaves no state to carry over: the next call rebuilds and saves it.
            assert not Pipeline(store).prepare(b).acted
            assert _saved(store, b.id) == (b.view_version, len(b.active_entries()))
    assert acted >= 3, "the layers had work to do along the way"


def test_the_first_call_after_a_restart_resumes_instead_of_rescanning(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = store.create_session()
    for step in _steps()[:4]:
        s.append_many(step)
        Pipeline(store).prepare(s)
    assert not Pipeline(store).prepare(s).acted  # settled, and the state of this version saved
    entries = len(s.active_entries())
    assert _saved(store, s.id) == (s.view_version, entries)
    full_loads: list[str] = []
    observed_from: list[int] = []
    real_observe = pipeline_mod.observe

    def spy_observe(state, view_entries, compactable):
        observed_from.append(state.scanned)
        return real_observe(state, view_entries, compactable)

    monkeypatch.setattr(pipeline_mod, "load_replacements", lambda db, sid: full_loads.append(sid) or {})
    monkeypatch.setattr(pipeline_mod, "observe", spy_observe)
    again = Pipeline(store).prepare(s)
    assert not again.acted and again.messages == s.active_view()
    assert full_loads == [], "no full read of every replacement decision"
    assert observed_from == [entries], "microcompact looks at no entry it saw before the restart"


def test_a_saved_state_of_another_version_or_configuration_is_ignored(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_steps()[0])
    Pipeline(store).prepare(s)
    version, scanned = _saved(store, s.id)
    assert persisted.load_state(s, version, scanned, store.config) is not None
    assert persisted.load_state(s, version + 1, scanned, store.config) is None
    assert persisted.load_state(s, version, scanned - 1, store.config) is None
    other = store.config.__class__(compactable_tools=("Read",))
    assert persisted.load_state(s, version, scanned, other) is None
    store.db.run_write(lambda db: db.execute("UPDATE pipeline_states SET state_json = '{broken'").close())
    assert persisted.load_state(s, version, scanned, store.config) is None
    assert Pipeline(store).prepare(s).messages == s.active_view(), "a damaged state is rebuilt, not trusted"
    assert json.loads(store.db.one("SELECT state_json FROM pipeline_states")[0])["config"]
