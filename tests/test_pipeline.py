"""The pipeline as a whole: thresholds, token count, no-op cost, dry runs, conflicts, the CLI."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import pairwise

import pytest

import sessionstore.compaction.pipeline as pipeline_mod
from sessionstore.compaction.pipeline import LAYERS, Pipeline
from sessionstore.compaction.pressure import Thresholds
from sessionstore import Config, RewriteConflict, SessionStore
from tests.support.cli import run_cli
from tests.support.layers import (
    T0,
    assert_transcript_kept,
    assert_valid_view,
    assistant,
    tool_round,
    transcript,
    user,
)
from tests.support.messages import conversation

WINDOW = 200_000  # default max output 32,000 -> reserve 20,000 -> effective 180,000


@pytest.mark.parametrize(
    "max_output, effective",
    [(8_000, 192_000), (19_999, 180_001), (20_000, 180_000), (20_001, 180_000), (64_000, 180_000)],
)
def test_effective_window_reserves_at_most_20000(max_output: int, effective: int) -> None:
    limits = Thresholds.for_window(WINDOW, Config(max_output_tokens=max_output))
    assert limits.effective_window == effective
    assert limits.autocompact_threshold == effective - 13_000
    assert limits.warning_at == effective - 20_000


def test_warning_and_threshold_boundaries(store: SessionStore) -> None:
    pipe = Pipeline(store)
    cases = {159_999: (False, False), 160_000: (True, False), 166_999: (True, False), 167_000: (True, True)}
    for total, (warning, above) in cases.items():
        s = store.create_session(context_window=WINDOW)
        # A reply big enough that a summary shrinks the view (a compaction that would grow it is skipped).
        s.append_many(
            [
                user("hi"),
                assistant(
                    "hello there, " * 2_000,
                    usage={
                        "input_tokens": total - 1_000,
                        "cache_creation_input_tokens": 300,
                        "cache_read_input_tokens": 600,
                        "output_tokens": 100,
                    },
                ),
            ]
        )
        prepared = pipe.prepare(s)
        layer = prepared.report["autocompact"]
        assert layer.tokens_before == total
        assert (prepared.warning, prepared.above_threshold) == (warning, above), total
        details = layer.details
        assert (details["autocompact_threshold"], details["warning_at"], details["effective_window"]) == (
            167_000,
            160_000,
            180_000,
        )
        assert layer.acted == above, "auto-compact fires at the threshold, not below"
        if above:
            assert prepared.tokens < total and details["compaction"]["trigger"] == "auto"
        else:
            assert prepared.tokens == total


def test_token_count_is_usage_plus_estimates_after_it(store: SessionStore) -> None:
    s = store.create_session()
    stored = s.append_many(
        [
            user("Look at the repo"),
            {
                "role": "assistant",
                "api_message_id": "msg_1",
                "usage": {"input_tokens": 2_000, "output_tokens": 80},
                "content": [{"type": "thinking", "thinking": "Read the config first.", "signature": "sig"}],
            },
            {
                "role": "assistant",
                "api_message_id": "msg_1",
                "content": [{"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "TODO"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py:3: TODO"}]},
            {"role": "system", "subtype": "hook_notice", "content": "Hook ran"},
            user("and the tests?"),
        ]
    )
    prepared = Pipeline(store).prepare(s)
    assert prepared.tokens == 2_080 + stored[3].tokens + stored[5].tokens
    empty = store.create_session()
    empty.append_many([user("one"), assistant("two"), user("three")])
    assert Pipeline(store).prepare(empty).tokens == empty.view_tokens


def test_credits_larger_than_the_usage_fall_back_to_estimates(store: SessionStore) -> None:
    s = store.create_session()
    s.append(user("read everything"))
    s.append_many([m for i in range(12) for m in tool_round(f"r{i}", f"line {i}\n" * 200, when=1)])
    s.append(assistant("Read them all.", when=2, usage={"input_tokens": 10, "output_tokens": 5}))
    prepared = Pipeline(store).prepare(s, now=T0 + timedelta(minutes=3))
    assert prepared.report["microcompact"].acted
    assert prepared.tokens == s.view_tokens


def test_nothing_acts_on_a_plain_conversation(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many([user("Explain the design"), assistant("It has layers."), user("Which ones?")])
    before = transcript(s)
    version = s.view_version
    prepared = Pipeline(store).prepare(s)
    assert list(prepared.report) == list(LAYERS)
    assert not prepared.acted
    assert prepared.messages == s.active_view()
    assert prepared.context_management is None and prepared.betas == []
    assert s.view_version == version and transcript(s) == before
    assert_valid_view(prepared.messages)


def test_realistic_conversation_stays_valid_and_settles(store: SessionStore) -> None:
    pipe = Pipeline(store)
    s = store.create_session()
    messages = list(conversation(400, seed=7))
    s.append_many(messages[:250])
    before = transcript(s)
    first = pipe.prepare(s)
    assert first.report["microcompact"].acted
    assert_valid_view(first.messages)
    assert first.messages == s.active_view()
    assert_transcript_kept(s, before)
    s.append_many(messages[250:])
    second = pipe.prepare(s)
    assert_valid_view(second.messages)
    third = pipe.prepare(s)
    assert not third.acted
    assert third.messages == second.messages == s.active_view()


@pytest.mark.parametrize("acks", [True, False], ids=["with-snips", "contents-only"])
def test_a_warm_pipeline_leaves_nothing_a_cold_one_would_do(store: SessionStore, acks: bool) -> None:
    pipe = Pipeline(store)
    s = store.create_session()
    messages = list(conversation(500, seed=5))
    prompts = [i for i, m in enumerate(messages) if m["role"] == "user" and isinstance(m["content"], str)]
    cuts = prompts[::3]
    acted: dict[str, int] = {}
    for n, (start, end) in enumerate(pairwise(cuts)):
        s.append_many(messages[start:end])
        s.append_many([*tool_round(f"big{n}", f"{n}" * 60_000, name="Bash"), *([user("ok")] if acks else [])])
        prepared = pipe.prepare(s)
        for name, layer in prepared.report.items():
            acted[name] = acted.get(name, 0) + layer.acted
        assert_valid_view(prepared.messages)
        assert prepared.messages == s.active_view()
        cold = Pipeline(store).prepare(s, dry_run=True)
        assert not cold.acted, {k: r.details for k, r in cold.report.items() if r.acted}
    assert acted["budget"] >= 5 and acted["microcompact"] >= 3 and (acted["snip"] >= 5) is acks


def test_dry_run_predicts_the_real_run(store: SessionStore) -> None:
    pipe = Pipeline(store)
    s = store.create_session()
    s.append_many([user("go"), *tool_round("huge", "h" * 80_000, when=1)])
    s.append_many([m for i in range(12) for m in tool_round(f"r{i}", f"file {i}\n" * 50, when=2)])
    s.append_many([user("ok"), user("Summarize what you found")])
    now = T0 + timedelta(minutes=5)
    before = transcript(s)
    dry = pipe.prepare(s, dry_run=True, now=now)
    assert transcript(s) == before
    real = pipe.prepare(s, now=now)
    assert {k: (r.acted, r.items) for k, r in dry.report.items()} == {
        k: (r.acted, r.items) for k, r in real.report.items()
    }
    assert dry.report["budget"].acted and dry.report["snip"].acted and dry.report["microcompact"].acted
    assert dry.messages == real.messages == s.active_view()
    assert dry.tokens == real.tokens
    assert_valid_view(real.messages)


def test_steady_state_neither_tokenizes_nor_reads_the_transcript(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = Pipeline(store)
    s = store.create_session()
    s.append_many(conversation(300, seed=3))
    pipe.prepare(s)
    pipe.prepare(s)
    statements: list[str] = []
    estimates: list[int] = []
    real_execute = s.db.execute

    def spy_execute(statement, params=None):
        statements.append(statement)
        return real_execute(statement, params)

    def no_estimate(content):
        estimates.append(1)
        return 0

    monkeypatch.setattr(s.db, "execute", spy_execute)
    monkeypatch.setattr("sessionstore.compaction.working.estimate_content", no_estimate)
    monkeypatch.setattr("sessionstore.storage.write.session.estimate_content", no_estimate)
    prepared = pipe.prepare(s)
    assert not prepared.acted
    assert estimates == []
    assert len(statements) == 1 and statements[0].lstrip().startswith("SELECT") and "FROM sessions" in statements[0]


def test_a_conflicting_rewrite_is_retried(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    s = store.create_session()
    s.append_many([user("go"), *tool_round("big", "b" * 60_000)])
    real = pipeline_mod.commit_working
    calls = []

    def flaky(session, work):
        calls.append(1)
        if len(calls) == 1:
            raise RewriteConflict("someone else won")
        return real(session, work)

    monkeypatch.setattr(pipeline_mod, "commit_working", flaky)
    prepared = Pipeline(store).prepare(s)
    assert len(calls) == 2 and prepared.report["budget"].acted
    assert_valid_view(prepared.messages)


def test_compaction_calls_are_reported_to_autocompact(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many([user("hi")])
    prepared = Pipeline(store).prepare(s, query_source="compact")
    assert prepared.report["autocompact"].details["query_source"] == "compact"


def test_cli_prepare(store: SessionStore, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = store.create_session()
    s.append_many([user("go"), *tool_round("big", "b" * 60_000)])
    version = s.view_version
    dry = run_cli(capsys, "prepare", s.id, "--db", store_url, "--dry-run", "--json")
    assert dry.code == 0
    report = json.loads(dry.out)
    assert report["dry_run"] is True and report["report"]["budget"]["acted"] is True
    assert "messages" not in report
    assert s.view_version == version
    table = run_cli(capsys, "prepare", s.id, "--db", store_url)
    assert table.code == 0 and "budget" in table.out and "threshold" in table.out
    assert s.view_version == version + 1
    full = json.loads(run_cli(capsys, "prepare", s.id, "--db", store_url, "--json", "--messages").out)
    assert full["report"]["budget"]["acted"] is False
    assert full["messages"] == s.active_view()
    bad = run_cli(capsys, "prepare", s.id, "--db", store_url, "--now", "yesterday")
    assert bad.code == 2 and "--now" in bad.err
