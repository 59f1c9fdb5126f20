"""The summary budget: every summary within `summary_max_tokens`, the newest facts verbatim, the older
ones condensed into counts plus recall references that resolve to the original messages."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.commit import recall_line, summary_budget
from sessionstore.compaction.condense import fit_body, hold_to_budget, references_in
from sessionstore.compaction.engine import compact
from sessionstore.compaction.facts import GATE_HEADING, Condensed, Facts, missing_facts
from sessionstore.compaction.pinning import split_pins
from sessionstore.compaction.prompt import SUMMARY_SECTIONS, summary_message_text
from sessionstore.compaction.summarizers.anthropic import AnthropicSummarizer
from sessionstore.interchange.importing import import_paths
from sessionstore.storage.engine.config import Config
from sessionstore.storage.read.history import boundaries
from sessionstore.storage.read.recall import RecallError, recall
from sessionstore.storage.write.session import Session
from sessionstore.storage.codecs.tokens import estimate_text
from tests.support.cli import run_cli
from tests.support.convo import tool_result, tool_use
from tests.support.fakeapi import FakeAPI, start_fake_api

CWD = "/home/dev/proj"


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with start_fake_api() as server:
        yield server


def _paths(n: int, prefix: str = "src") -> tuple[str, ...]:
    return tuple(f"{CWD}/{prefix}/module_{i:04d}.py" for i in range(n))


def test_facts_over_the_budget_keep_the_newest_verbatim_and_condense_the_rest() -> None:
    paths = _paths(500)
    facts = Facts(
        paths=paths,
        user_messages=("Please keep the API stable.",),
        seqs={"paths": tuple(range(1, 501)), "user_messages": (7,)},
    )
    held = hold_to_budget(
        "1. Primary Request and Intent:\nrefactor the modules", facts, max_tokens=800, era_of=lambda seq: seq // 100 + 1
    )
    assert estimate_text(held.text) <= 800
    assert paths[-1] in held.text and paths[0] not in held.text
    assert "Please keep the API stable." in held.text
    listed = [p for p in paths if p in held.text]
    assert listed == list(paths[-len(listed) :]), "the newest are the ones listed"
    condensed = held.report.condensed["paths"]
    assert condensed == [p for p in paths if p not in listed]
    assert (
        f"- {len(condensed)} earlier files touched (recall -b 1..{len(condensed) // 100 + 1} --query PATH)" in held.text
    )
    assert held.facts.paths == tuple(listed)
    assert held.facts.condensed["paths"] == Condensed(len(condensed), 1, len(condensed))
    assert held.report.to_dict()["condensed"]["paths"] == len(condensed)


def test_a_summary_within_budget_holding_every_fact_is_returned_unchanged() -> None:
    summary = f"3. Files and Code Sections:\n- {CWD}/a.py: read\n6. All User Messages:\n- fix it"
    facts = Facts(paths=(f"{CWD}/a.py",), user_messages=("fix it",))
    held = hold_to_budget(summary, facts, max_tokens=1_000, era_of=lambda seq: 1)
    assert held.text == summary
    assert not held.report.appended and not held.report.condensed


def test_carried_condensed_groups_are_still_referenced_and_merged() -> None:
    facts = Facts(paths=(f"{CWD}/new.py",), seqs={"paths": (900,)}, condensed={"paths": Condensed(412, 10, 800)})
    held = hold_to_budget("summary", facts, max_tokens=1_000, era_of=lambda seq: seq // 20 + 1)
    assert f"{CWD}/new.py" in held.text
    assert "- 412 earlier files touched (recall -b 1..41 --query PATH)" in held.text
    assert held.facts.condensed["paths"] == Condensed(412, 10, 800)


@pytest.mark.parametrize("budget", [400, 1_000, 3_000])
def test_a_huge_body_is_cut_to_the_budget_section_by_section(budget: int) -> None:
    headings = [f"{i}. {name}:" for i, name in enumerate(SUMMARY_SECTIONS, 1)]
    sizes = [5, 300, 40, 120, 3, 200, 2, 60, 1]
    body = "\n\n".join(
        h + "\n" + "\n".join(f"- line {i}.{j} " + "word " * 20 for j in range(n))
        for i, (h, n) in enumerate(zip(headings, sizes, strict=True))
    )
    cut = fit_body(body, budget)
    assert estimate_text(cut) <= budget
    assert all(h in cut for h in headings), "every heading survives"
    assert "- line 8.0 " in cut or budget < 1_000, "a small section keeps its lines while large ones are cut"
    assert "lines cut to fit the summary budget" in cut


def test_the_gate_indexes_paths_whole() -> None:
    facts = Facts(paths=("src/a.py", f"{CWD}/b.py", "c.py"), cwd=CWD)
    missing = missing_facts("Read src/a.pyc, then b.py and (c.py).", facts)
    assert missing["paths"] == ["src/a.py"]


def _rounds(session: Session, count: int, prefix: str) -> list[str]:
    """`count` rounds each reading one new file; the paths, in order."""
    paths = []
    for i in range(count):
        path = f"{CWD}/{prefix}/file_{i:03d}.py"
        paths.append(path)
        session.append({"role": "assistant", "content": [tool_use(f"{prefix}{i}", "Read", file_path=path)]})
        session.append({"role": "user", "content": [tool_result(f"{prefix}{i}", "x = 1\n" * 40)]})
    session.append({"role": "assistant", "content": "Read them all."})
    return paths


def _bulk(session: Session, use_id: str) -> None:
    """A command with a long output: what a summary shrinks."""
    session.append({"role": "assistant", "content": [tool_use(use_id, "Bash", command="make logs")]})
    session.append({"role": "user", "content": [tool_result(use_id, "log line\n" * 2_000)]})
    session.append({"role": "assistant", "content": "Logs read."})


def _summary(session: Session, uuid: str) -> str:
    return split_pins(str(session.message(uuid).content))[0]


def test_every_path_is_verbatim_or_counted_by_a_reference_that_recall_resolves(store: SessionStore) -> None:
    session = store.create_session(cwd=CWD, context_window=10_000)  # default budget: 1,000 tokens
    everything: list[str] = []
    for part in range(3):
        session.append({"role": "user", "content": f"Read the files of part {part}."})
        everything += _rounds(session, 60, f"p{part}")
        outcome = compact(session)
        summary = _summary(session, outcome.summary_uuid)
        assert estimate_text(summary) <= 1_000
    verbatim = [p for p in everything if p in summary]
    ((count, first, last),) = [
        (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"- (\d+) earlier files touched \(recall -b (\d+)\.\.(\d+)", summary)
    ]
    assert verbatim and count == len(everything) - len(verbatim)
    for path in everything[:3] + everything[60:62]:
        found = recall(session, f"{first}..{last}", query=path)
        assert found.messages and all(m.role == "assistant" for m in found.messages)
        assert path in session.message(found.messages[-1].uuid).content[0]["input"]["file_path"]
    report = boundaries(session)[-1].metadata["facts_gate"]
    assert report["references"]["paths"]["count"] == count
    assert report["condensed"]["paths"] > 0 and report["condensed_items"]["paths"]


def test_a_model_summary_over_the_budget_is_cut_and_keeps_its_facts(store: SessionStore, api: FakeAPI) -> None:
    session = store.create_session(cwd=CWD, context_window=20_000)
    session.append({"role": "user", "content": "Read the files, then tell me what they do."})
    paths = _rounds(session, 30, "m")
    api.script(
        "<summary>1. Primary Request and Intent:\n"
        + "\n".join(f"- detail {i} " + "blah " * 30 for i in range(400))
        + "</summary>"
    )
    summarizer = AnthropicSummarizer(api_key="sk-ant-test-budget", base_url=api.base_url, max_retries=0)
    outcome = compact(session, summarizer=summarizer)
    summary = _summary(session, outcome.summary_uuid)
    assert estimate_text(summary) <= 2_000
    assert GATE_HEADING in summary and "Read the files, then tell me what they do." in summary
    assert all(p in summary for p in paths[-5:])
    assert boundaries(session)[-1].metadata["facts_gate"]["body_cut"] is True


def test_session_memory_compaction_is_held_to_the_budget(store: SessionStore) -> None:
    from sessionstore.compaction.session_memory import compact_with_memory
    from sessionstore.storage.write.memory import save_memory

    session = store.create_session(cwd=CWD, context_window=10_000)
    session.append({"role": "user", "content": "Read everything."})
    _rounds(session, 80, "s")
    for i in range(6):
        session.append({"role": "user", "content": f"later message {i} " + "words " * 30})
        session.append({"role": "assistant", "content": f"reply {i}"})
    covered = session.active_entries()[-6]
    save_memory(
        session,
        "# Current State\n" + "note " * 3_000,
        covers_seq=covered.seq,
        covers_uuid=covered.uuid,
        tokens=0,
        tool_calls=0,
    )
    config = store.config.replace(memory_keep_min_tokens=100, memory_keep_min_text_messages=2)
    outcome = compact_with_memory(session, config=config)
    assert outcome is not None
    assert estimate_text(_summary(session, outcome.summary_uuid)) <= 1_000


def test_range_recall_reads_original_messages_and_refuses_bad_ranges(
    store: SessionStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sessionstore.agent.loop import Agent, ToolError
    from sessionstore.compaction.pipeline import Pipeline

    session = store.create_session(cwd=CWD)
    session.append({"role": "user", "content": "Read one file."})
    (path,) = _rounds(session, 1, "r")
    _bulk(session, "b1")
    compact(session)
    session.append({"role": "user", "content": "And again."})
    _bulk(session, "b2")
    compact(session)
    found = recall(session, "1..2", query=path)
    assert [m.role for m in found.messages] == ["assistant"], "the summaries that quote it are not recalled"
    assert found.to_dict()["first_boundary"] == 1 and found.boundary == 2
    for bad in ("2..1", "0..2", "a..b", "1..2..3"):
        with pytest.raises(RecallError):
            recall(session, bad, query=path)
    shown = run_cli(capsys, "recall", session.id, "-b", "1..2", "--query", path, "--db", store.url, "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["messages"][0]["uuid"] == found.messages[0].uuid
    bad = run_cli(capsys, "recall", session.id, "-b", "1..9", "--query", path, "--db", store.url)
    assert bad.code == 2 and "Traceback" not in bad.err and len(bad.err.strip().splitlines()) == 1
    agent = Agent(session=session, pipeline=Pipeline(store), client=None, workdir=tmp_path)
    assert found.messages[0].uuid in agent._recall({"boundaries": "1..2", "query": path})
    with pytest.raises(ToolError, match="boundary range"):
        agent._recall({"boundaries": "2..1", "query": path})


def test_the_budgets_are_settings_with_window_shares_as_defaults() -> None:
    assert Config().summary_budget(200_000) == 20_000 and Config().pins_budget(200_000) == 10_000
    env = {
        "SESSIONSTORE_SUMMARY_MAX_TOKENS": "1234",
        "SESSIONSTORE_PINS_MAX_TOKENS": "99",
        "SESSIONSTORE_AUTO_PIN_INSTRUCTIONS": "1",
    }
    config = Config.from_env(env)
    assert config.summary_budget(200_000) == 1234 and config.pins_budget(200_000) == 99
    assert config.auto_pin_instructions is True and Config().auto_pin_instructions is False


def test_references_name_boundary_ranges() -> None:
    assert references_in("- 3 earlier files touched (recall -b 2..7 --query PATH)") == [(2, 7)]


def test_eval_gated_keeps_every_fact_on_the_shared_sessions(
    store: SessionStore, transcripts_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a 300-token budget the gated summaries shrink and still lose no fact: all verbatim or referenced."""
    import_paths(store, [transcripts_dir / "claude-code"], source="claude-code")
    import_paths(store, [transcripts_dir / "codex"], source="codex")
    monkeypatch.setenv("SESSIONSTORE_SUMMARY_MAX_TOKENS", "300")
    out = run_cli(capsys, "eval", "--all", "--db", store.url, "--json", "-s", "extractive", "-s", "gated")
    assert out.code == 0, out.err
    spans = json.loads(out.out)["spans"]
    assert len(spans) == 8
    shrunk = 0
    for span in spans:
        gated, extractive = span["strategies"]["gated"], span["strategies"]["extractive"]
        assert gated["tokens_after"] <= 320 and gated["lost_user_messages"] == 0
        assert all(v in (None, 1.0) for v in gated["retention"].values()), gated
        shrunk += gated["tokens_after"] < extractive["tokens_after"]
    assert shrunk >= 3, "some spans needed condensing to fit"


@pytest.mark.parametrize("budget", [300, 500, 2_000])
@pytest.mark.parametrize("recall_note", [False, True])
def test_the_whole_summary_message_lead_and_recall_line_included_fits_the_budget(
    store: SessionStore, api: FakeAPI, budget: int, recall_note: bool
) -> None:
    """The message the model gets (its lead, the body, the recall line) is held to `summary_max_tokens`, not
    just the body: the gated text gets the budget less the lead and the recall line, so a body cut to its whole
    limit still leaves the message within the budget; and a model's long summary ends within it."""
    session = store.create_session(cwd=CWD, context_window=50_000)
    config = store.config.replace(summary_max_tokens=budget, recall_note=recall_note)
    limit = summary_budget(session, config).max_tokens
    lead = estimate_text(summary_message_text("", truncated=True))
    recall = estimate_text(recall_line(10**9)) if recall_note else 0
    assert limit + lead + recall <= budget
    session.append({"role": "user", "content": "Read the files, then tell me what they do."})
    _rounds(session, 12, "w")
    api.script("<summary>1. Primary Request and Intent:\n" + "- detail " * 3_000 + "</summary>")
    summarizer = AnthropicSummarizer(api_key="sk-ant-test-budget", base_url=api.base_url, max_retries=0)
    outcome = compact(session, summarizer=summarizer, config=config)
    assert estimate_text(split_pins(str(session.message(outcome.summary_uuid).content))[0]) <= budget
