"""`sessionstore eval` and `history --recompact`: strategies scored on real transcripts, nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.agent.evaluation import STRATEGIES, masked
from sessionstore.compaction.engine import compact
from sessionstore.compaction.facts import FACT_KINDS, GATE_HEADING
from sessionstore.interchange.importing import import_paths
from sessionstore.storage.codecs.tokens import estimate_content
from sessionstore.storage.read.history import boundaries
from sessionstore.storage.write.session import Session
from tests.support.apisession import make_api_session
from tests.support.cli import run_cli
from tests.support.convo import Convo, tool_result, tool_use
from tests.support.fakeapi import start_fake_api

CWD = "/srv/app"


def _fingerprint(store: SessionStore) -> list[Any]:
    """Everything a write would change: each session's counters and boundaries."""
    rows = store.list(limit=1000)
    return [
        (
            r["id"],
            r["messages"],
            r["view_tokens"],
            r["view_version"],
            r["updated_at"],
            len(boundaries(store.get(r["id"]))),
        )
        for r in rows
    ]


def _work(store: SessionStore) -> Session:
    session = store.create_session(title="eval", cwd=CWD)
    session.append({"role": "user", "content": "Fix the date parser in src/dates.py."})
    for i in range(7):
        session.append({"role": "assistant", "content": [tool_use(f"r{i}", "Read", file_path=f"{CWD}/src/m{i}.py")]})
        session.append({"role": "user", "content": [tool_result(f"r{i}", f"source of m{i} " + "tok " * 50)]})
    session.append({"role": "assistant", "content": [tool_use("b1", "Bash", command="pytest")]})
    session.append(
        {"role": "user", "content": [tool_result("b1", "Exit code 1\nValueError: bad month 13", is_error=True)]}
    )
    session.append({"role": "assistant", "content": "The month check is off by one."})
    return session


def test_eval_over_every_shared_transcript(
    store: SessionStore, transcripts_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import_paths(store, [transcripts_dir / "claude-code"], source="claude-code")
    import_paths(store, [transcripts_dir / "codex"], source="codex")
    before = _fingerprint(store)
    assert len(before) == 8

    every = [arg for name in STRATEGIES for arg in ("--strategy", name)]
    with start_fake_api(default="<summary>1. Primary Request and Intent: the work so far.</summary>") as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-eval-all")
        out = run_cli(capsys, "eval", "--all", "--db", store.url, "--json", *every)
        assert out.code == 0, out.err
        requests = len(api.message_requests)
    report = json.loads(out.out)
    assert _fingerprint(store) == before, "eval wrote nothing"

    expected_spans = {r["id"]: max(1, len(boundaries(store.get(r["id"])))) for r in store.list()}
    spans = report["spans"]
    assert {s["session"] for s in spans} == set(expected_spans)
    assert len(spans) == sum(expected_spans.values())
    imported_boundaries = 0
    for span in spans:
        names = set(span["strategies"])
        imported_boundaries += span["boundary"] is not None
        assert span["imported"] == (span["boundary"] is not None), "every boundary here came from a tool's file"
        assert names == set(STRATEGIES) - ({"recorded"} if span["boundary"] is None else set())
        for score in span["strategies"].values():
            assert set(score["checked"]) == set(FACT_KINDS) == set(score["retention"])
            assert score["tokens_before"] > 0 and score["tokens_after"] >= 0
            for kind in FACT_KINDS:
                share = score["retention"][kind]
                assert (share is None) == (score["checked"][kind] == 0)
                assert share is None or 0 <= share <= 1
        assert span["strategies"]["extractive"]["retention"]["user_messages"] in (None, 1.0)
    assert imported_boundaries == 3, "two Claude Code compactions and one Codex compaction"
    assert requests == len(spans), "one summary request per span for the anthropic strategy"
    assert all(s["strategies"]["anthropic"]["retention"]["paths"] in (None, 0.0) for s in spans)
    median = report["median"]
    assert set(median) == set(STRATEGIES)
    assert median["recorded"]["spans"] == 3
    assert median["user-only"]["retention"]["paths"] == 0.0
    assert median["extractive"]["ratio"] < median["mask"]["ratio"] <= 1.0

    table = run_cli(capsys, "eval", "--all", "--db", store.url)
    assert table.code == 0 and "user-only" in table.out and "anthropic" not in table.out, "anthropic only when asked"


def test_eval_of_a_native_boundary_and_the_anthropic_strategy(
    store: SessionStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _work(store)
    compact(session)
    before = _fingerprint(store)
    with start_fake_api(default="<summary>Fix the date parser in src/dates.py. Read src/m0.py.</summary>") as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-eval")
        out = run_cli(
            capsys,
            "eval",
            session.id,
            "--strategy",
            "anthropic",
            "--strategy",
            "recorded",
            "-s",
            "mask",
            "--db",
            store.url,
            "--json",
        )
        assert out.code == 0, out.err
        assert len(api.message_requests) == 1
    assert _fingerprint(store) == before
    (span,) = json.loads(out.out)["spans"]
    assert set(span["strategies"]) == {"anthropic", "mask"}, "recorded only for imported boundaries"
    model = span["strategies"]["anthropic"]
    assert model["checked"] == {"user_messages": 1, "paths": 7, "failures": 1, "open_items": 0}
    assert model["retention"] == {
        "user_messages": 1.0,
        "paths": pytest.approx(1 / 7, abs=1e-3),
        "failures": 0.0,
        "open_items": None,
    }
    mask = span["strategies"]["mask"]
    assert mask["retention"]["failures"] == 1.0, "the failing run is among the last five results"
    assert mask["tokens_after"] < mask["tokens_before"]


def test_mask_keeps_the_last_five_tool_results() -> None:
    convo = Convo()
    convo.add("user", "go")
    for i in range(8):
        convo.add("assistant", [tool_use(f"t{i}", "Bash", command="ls")])
        convo.add("user", [tool_result(f"t{i}", f"out {i}")])
    shown = [
        b["content"]
        for e in masked(convo.entries)
        if isinstance(e.content, list)
        for b in e.content
        if b.get("type") == "tool_result"
    ]
    assert shown[3:] == [f"out {i}" for i in range(3, 8)]
    assert all("cleared" in c for c in shown[:3])


def test_bad_eval_arguments_exit_2(store: SessionStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "eval", "--db", store.url).code == 2
    bad = run_cli(capsys, "eval", "--all", "--strategy", "magic", "--db", store.url)
    assert bad.code == 2 and "unknown strategy 'magic'" in bad.err


def test_recompact_shows_a_gated_summary_and_a_diff_and_writes_nothing(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _work(store)
    compact(session)
    before = _fingerprint(store)
    same = run_cli(
        capsys, "history", session.id, "--boundary", "1", "--recompact", "extractive", "--db", store.url, "--json"
    )
    assert same.code == 0, same.err
    doc = json.loads(same.out)
    assert doc["summary"] == doc["recorded"] and doc["diff"] == ""

    other = run_cli(
        capsys, "history", session.id, "--boundary", "1", "--recompact", "user-only", "--db", store.url, "--json"
    )
    doc = json.loads(other.out)
    assert doc["facts_gate"]["missing"] == {"user_messages": 0, "paths": 7, "failures": 1, "open_items": 0}
    assert GATE_HEADING in doc["summary"] and f"{CWD}/src/m6.py" in doc["summary"]
    assert doc["diff"].startswith("--- boundary 1 (extractive)\n+++ boundary 1 (user-only)\n")
    assert "-1. Primary Request and Intent:" in doc["diff"]
    assert _fingerprint(store) == before

    text = run_cli(capsys, "history", session.id, "--boundary", "1", "--recompact", "user-only", "--db", store.url)
    assert text.code == 0 and "the facts gate added 7 paths, 1 failures" in text.out
    bad = run_cli(capsys, "history", session.id, "--recompact", "user-only", "--db", store.url)
    assert bad.code == 2 and "--recompact needs --boundary K" in bad.err
    bad = run_cli(capsys, "history", session.id, "-b", "1", "--recompact", "recorded", "--db", store.url)
    assert bad.code == 2


def test_eval_scores_the_apis_boundaries_and_their_summaries(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Boundaries the API made through the local server are scored like ours, with their kind and trigger, and
    `recorded` scores the compaction block's own summary: what it kept of the request it replaced."""
    with start_fake_api(default="noted") as api:
        made = make_api_session(store, api)
    before = _fingerprint(store)
    out = run_cli(capsys, "eval", made.id, "--db", store.url, "--json")
    assert out.code == 0, out.err
    assert _fingerprint(store) == before, "eval wrote nothing"
    spans = json.loads(out.out)["spans"]
    assert [(s["boundary"], s["kind"], s["trigger"]) for s in spans] == [
        (1, "api-on-demand", "manual"),
        (2, "api-threshold", "auto"),
        (3, "api-background", "auto"),
    ]
    for span, summary in zip(spans, made.summaries, strict=True):
        assert set(span["strategies"]) == {"extractive", "gated", "recorded", "mask", "user-only"}
        recorded = span["strategies"]["recorded"]
        assert recorded["tokens_after"] == estimate_content(summary), "the block's content is what is scored"
        assert recorded["tokens_after"] < recorded["tokens_before"]
        assert recorded["checked"]["user_messages"] == 1 and recorded["retention"]["user_messages"] == 1.0
    first = spans[0]["strategies"]["recorded"]
    assert first["checked"]["failures"] == 1 and first["retention"]["failures"] == 0.0, "the server kept no failure"
    assert spans[0]["strategies"]["extractive"]["retention"]["failures"] == 1.0

    table = run_cli(capsys, "eval", made.id, "--db", store.url)
    assert table.code == 0, table.err
    assert "boundary 1 (api-on-demand, manual)" in table.err and "boundary 3 (api-background, auto)" in table.err
    assert "recorded" in table.out and "scored no span" not in table.err
