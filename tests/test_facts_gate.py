"""The facts gate: a model-written summary never loses a user message, a touched file, a failure or an open item.

The summaries come from the real SDK talking to the local Messages-API server,
scripted to leave out the facts of one kind at a time.
"""

from __future__ import annotations

import json
import random
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.facts import FACT_KINDS, GATE_HEADING, Facts, apply_gate, normalize, span_facts
from sessionstore.compaction.summarizers.anthropic import AnthropicSummarizer
from sessionstore.storage.read.history import boundaries
from sessionstore.storage.write.session import Session
from tests.support.cli import run_cli
from tests.support.convo import Convo, text, tool_result, tool_use
from tests.support.fakeapi import FakeAPI, start_fake_api

CWD = "/home/dev/proj"
FIRST_ASK = "Please make the importer skip blank lines; keep the CLI flags unchanged."
SECOND_ASK = "Also run the tests with -x and tell me what fails."
ABS_PATH = f"{CWD}/src/importer.py"
REL_PATH = "docs/usage.md"
FAILURE = "AssertionError: expected 3 rows, got 4"
OPEN_ITEM = "Document the --skip-blank flag"
BULK = " ".join(f"token{i}" for i in range(1500))

FACTS_BY_KIND = {
    "user_messages": [FIRST_ASK, SECOND_ASK],
    "paths": ["src/importer.py", REL_PATH],
    "failures": [FAILURE],
    "open_items": [OPEN_ITEM],
}


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    with start_fake_api() as server:
        yield server


def _work(session: Session) -> None:
    """A span with every fact kind: two asks, a read and an edit, a failing test run, a todo list."""
    session.append({"role": "user", "content": FIRST_ASK})
    session.append(
        {
            "role": "assistant",
            "content": [
                tool_use("t1", "Read", file_path=ABS_PATH),
                tool_use("t2", "Edit", file_path=REL_PATH, old_string="a", new_string="b"),
            ],
        }
    )
    session.append({"role": "user", "content": [tool_result("t1", "def load(): ... " + BULK), tool_result("t2", "ok")]})
    session.append({"role": "assistant", "content": "Edited."})
    session.append({"role": "user", "content": SECOND_ASK})
    session.append({"role": "assistant", "content": [tool_use("t3", "Bash", command="pytest -x")]})
    session.append(
        {"role": "user", "content": [tool_result("t3", f"Exit code 1\n\n{FAILURE}\nsecond line", is_error=True)]}
    )
    todos = [
        {"content": "Make the importer skip blank lines", "status": "completed"},
        {"content": OPEN_ITEM, "status": "pending"},
    ]
    session.append({"role": "assistant", "content": [tool_use("t4", "TodoWrite", todos=todos)]})
    session.append({"role": "user", "content": [tool_result("t4", "Todos updated")]})
    session.append({"role": "assistant", "content": "One test fails; details above."})


def _summary_holding(kinds: list[str]) -> str:
    """A model-like summary that mentions the facts of `kinds` only."""
    lines = ["1. Primary Request and Intent: fix the importer."]
    for kind in kinds:
        lines.extend(f"- {fact}" for fact in FACTS_BY_KIND[kind])
    return "<analysis>thinking</analysis><summary>\n" + "\n".join(lines) + "\n</summary>"


def _summarizer(api: FakeAPI) -> AnthropicSummarizer:
    return AnthropicSummarizer(api_key="sk-ant-test-gate", base_url=api.base_url, max_retries=0)


@pytest.mark.parametrize("omitted", FACT_KINDS)
def test_a_summary_missing_one_kind_gets_exactly_that_kind_appended(
    store: SessionStore, api: FakeAPI, omitted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    session = store.create_session(title="gate", cwd=CWD)
    _work(session)
    api.script(_summary_holding([k for k in FACT_KINDS if k != omitted]))
    compact(session, summarizer=_summarizer(api))

    (b,) = boundaries(session)
    report = b.metadata["facts_gate"]
    assert report["missing"] == {k: (len(FACTS_BY_KIND[k]) if k == omitted else 0) for k in FACT_KINDS}
    assert report["checked"] == {k: len(v) for k, v in FACTS_BY_KIND.items()}
    assert report["appended"] is True
    summary = b.summary or ""
    tail = summary.split(GATE_HEADING, 1)[1]
    for kind, facts in FACTS_BY_KIND.items():
        for fact in facts:
            assert (normalize(fact) in normalize(tail)) == (kind == omitted), (kind, fact)
    first_view = session.active_view()[0]["content"]
    assert GATE_HEADING in json.dumps(first_view)

    shown = run_cli(capsys, "history", session.id, "--db", store.url, "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)[0]["facts_gate"]["missing"][omitted] == len(FACTS_BY_KIND[omitted])


def test_a_relative_path_counts_for_an_absolute_one_under_the_cwd(store: SessionStore, api: FakeAPI) -> None:
    session = store.create_session(title="gate", cwd=CWD)
    _work(session)
    api.script(_summary_holding(list(FACT_KINDS)))
    compact(session, summarizer=_summarizer(api))
    (b,) = boundaries(session)
    assert ABS_PATH not in (b.summary or "")
    assert b.metadata["facts_gate"]["appended"] is False
    assert GATE_HEADING not in (b.summary or "")


def test_a_second_compaction_keeps_what_the_first_summary_carried(store: SessionStore, api: FakeAPI) -> None:
    session = store.create_session(title="gate twice", cwd=CWD)
    _work(session)
    compact(session)
    session.append({"role": "user", "content": "Now rename load() to read_rows()."})
    session.append({"role": "assistant", "content": "Renamed. " + BULK})
    api.script("<summary>1. Primary Request and Intent: rename a function.</summary>")
    compact(session, summarizer=_summarizer(api))
    second = boundaries(session)[1]
    summary = normalize(second.summary or "")
    for facts in FACTS_BY_KIND.values():
        for fact in facts:
            assert normalize(fact) in summary, fact
    assert "Now rename load() to read_rows()." in summary
    assert second.metadata["facts_gate"]["checked"]["user_messages"] == 3


def test_the_gate_can_be_turned_off(store: SessionStore, api: FakeAPI) -> None:
    session = store.create_session(title="no gate", cwd=CWD)
    _work(session)
    api.script(_summary_holding([]))
    compact(session, summarizer=_summarizer(api), config=store.config.replace(facts_gate_enabled=False))
    (b,) = boundaries(session)
    assert "facts_gate" not in b.metadata
    assert GATE_HEADING not in (b.summary or "")


# ------------------------------------------------------------------ property

_words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


def _random_span(rng: random.Random, words: list[str]) -> Convo:
    """A random valid span: user asks, file reads/edits, failing and passing commands, a todo list."""
    convo = Convo()
    for i in range(rng.randint(1, 6)):
        convo.add("user", f"ask {i}: {rng.choice(words)}")
        calls, results = [], []
        for j in range(rng.randint(0, 3)):
            use_id = f"u{i}_{j}"
            pick = rng.random()
            if pick < 0.4:
                calls.append(
                    tool_use(
                        use_id,
                        rng.choice(["Read", "Edit", "Write"]),
                        file_path=f"/w/{rng.choice(words).strip() or 'x'}/{i}{j}.py",
                    )
                )
                results.append(tool_result(use_id, "ok"))
            elif pick < 0.8:
                failed = rng.random() < 0.5
                calls.append(tool_use(use_id, "Bash", command=f"make {j}"))
                output = f"Exit code 2\n{rng.choice(words)} failed {i}{j}" if failed else "fine"
                results.append(tool_result(use_id, output, is_error=failed))
            else:
                todos = [
                    {"content": f"task {k} {rng.choice(words)}", "status": rng.choice(["pending", "completed"])}
                    for k in range(rng.randint(1, 3))
                ]
                calls.append(tool_use(use_id, "TodoWrite", todos=todos))
                results.append(tool_result(use_id, "ok"))
        if calls:
            convo.add("assistant", [text("working"), *calls])
            convo.add("user", results)
        convo.add("assistant", "done")
    return convo


def _all_facts(facts: Facts) -> list[tuple[str, str]]:
    return [(kind, fact) for kind in FACT_KINDS for fact in facts.of(kind)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), words=st.lists(_words, min_size=1, max_size=6), keep=st.floats(0, 1))
def test_after_the_gate_every_fact_is_present(seed: int, words: list[str], keep: float) -> None:
    rng = random.Random(seed)
    facts = span_facts(_random_span(rng, words).entries)
    kept = [(kind, fact) for kind, fact in _all_facts(facts) if rng.random() < keep]
    summary = "Summary.\n" + "\n".join(f"* {fact}" for _, fact in kept)
    gated, report = apply_gate(summary, facts)
    for kind, fact in _all_facts(facts):
        assert normalize(fact) in normalize(gated), (kind, fact)
    for kind, fact in kept:
        assert fact not in report.missing[kind]
    assert gated.startswith(summary.rstrip())
    assert report.appended == (len(kept) < len(_all_facts(facts)) and gated != summary)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), words=st.lists(_words, min_size=1, max_size=6))
def test_a_summary_holding_every_fact_is_left_byte_identical(seed: int, words: list[str]) -> None:
    rng = random.Random(seed)
    facts = span_facts(_random_span(rng, words).entries)
    summary = "Summary:\n" + "\n\n".join(fact for _, fact in _all_facts(facts)) + "\n  trailing space  "
    gated, report = apply_gate(summary, facts)
    assert gated == summary
    assert not report.appended


def test_user_messages_beyond_the_budget_are_kept_by_their_first_line() -> None:
    convo = Convo()
    old = "Old request first line\n" + "padding " * 400
    convo.add("user", old)
    convo.add("assistant", "ok")
    convo.add("user", "Newest request")
    facts = span_facts(convo.entries, budget=50)
    assert facts.user_messages == ("Newest request", "Old request first line")


def _with_summary(convo: Convo, summary: str, facts: dict[str, Any] | None) -> None:
    convo.add("user", summary, is_compact_summary=True, metadata={"facts": facts} if facts else {})


def _imported_summary_facts(summary: str) -> Facts:
    """The facts of a span holding one summary without gate metadata (as imported ones are)."""
    convo = Convo()
    _with_summary(convo, summary, None)
    convo.add("assistant", "ok")
    return span_facts(convo.entries)


def test_an_imported_summary_without_gate_metadata_is_read_by_its_sections() -> None:
    facts = _imported_summary_facts(
        "1. Primary Request and Intent:\nx\n\n3. Files and Code Sections:\n- /srv/app/main.py: edited\n\n"
        "6. All User Messages:\n- Keep the old API\n- Add a flag\n\n7. Pending Tasks:\n- [pending] Write docs\n"
    )
    assert facts.user_messages == ("Add a flag", "Keep the old API")
    assert facts.paths == ("/srv/app/main.py",)
    assert facts.open_items == ("Write docs",)


def test_two_extractive_compactions_keep_the_first_user_messages(store: SessionStore) -> None:
    session = store.create_session(title="twice", cwd=CWD)
    session.append({"role": "user", "content": "Keep the log output quiet while you work."})
    session.append({"role": "assistant", "content": "Understood."})
    _work(session)
    compact(session)
    session.append({"role": "user", "content": "Thanks, now the docs."})
    session.append({"role": "assistant", "content": "Writing docs. " + BULK})
    compact(session)
    summary = normalize(boundaries(session)[1].summary or "")
    for ask in ("Keep the log output quiet while you work.", FIRST_ASK, SECOND_ASK):
        assert normalize(ask) in summary, ask


def test_session_memory_notes_go_through_the_gate_too(store: SessionStore) -> None:
    from sessionstore.compaction.session_memory import compact_with_memory
    from sessionstore.storage.write.memory import save_memory

    session = store.create_session(title="notes", cwd=CWD)
    _work(session)
    for i in range(6):
        session.append({"role": "user", "content": f"later message {i} " + "words " * 30})
        session.append({"role": "assistant", "content": f"reply {i}"})
    covered = session.active_entries()[9]
    save_memory(
        session,
        "# Current State\nfixing the importer\n",
        covers_seq=covered.seq,
        covers_uuid=covered.uuid,
        tokens=0,
        tool_calls=0,
    )
    config = store.config.replace(memory_keep_min_tokens=100, memory_keep_min_text_messages=2)
    outcome = compact_with_memory(session, config=config)
    assert outcome is not None and outcome.kind == "session-memory"
    (b,) = boundaries(session)
    assert b.metadata["facts_gate"]["missing"]["user_messages"] == 2
    assert normalize(FIRST_ASK) in normalize(b.summary or "") and ABS_PATH in (b.summary or "")


@pytest.mark.parametrize(
    "output, line",
    [
        (
            "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nerror[E0425]: cannot find value `x`\n",
            "error[E0425]: cannot find value `x`",
        ),
        (
            "Chunk ID: d79dd3\nWall time: 1.1 seconds\nProcess exited with code 1\nOriginal token count: 12\nOutput:\n"
            "FAILED tests/test_a.py::test_b - KeyError: 'k'\n",
            "FAILED tests/test_a.py::test_b - KeyError: 'k'",
        ),
        ("Exit code 2\n\nmake: *** [all] Error 2", "make: *** [all] Error 2"),
    ],
)
def test_a_failure_is_its_first_informative_line_not_the_status_headers(output: str, line: str) -> None:
    """Codex puts Chunk ID / Wall time / exit status headers before the output: none of them is the failure."""
    from sessionstore.compaction.facts import failure_line

    assert failure_line(output) == line


@pytest.mark.parametrize(
    "summary, held",
    [
        ("Edited /repo/src/a.py and ran it.", True),
        ("Edited /repo/src/a.py.", True),
        ("See `src/a.py` (relative to the cwd).", True),
        ("Only /repo/src/a.pyc was built.", False),
        ("Edited /repo/src/a.py.bak by mistake.", False),
        ("Edited /repo/lib/src/a.py instead.", False),
        ("Read studio/src/a.pyx.", False),
    ],
)
def test_a_path_counts_only_where_it_stands_whole(summary: str, held: bool) -> None:
    """A path inside a longer path or name (a.py in a.pyc, src/a.py in lib/src/a.py) does not keep the file."""
    from sessionstore.compaction.facts import missing_facts

    facts = Facts(paths=("/repo/src/a.py",), cwd="/repo")
    assert (missing_facts(summary, facts)["paths"] == []) is held


def test_an_imported_summary_carries_its_failures_and_no_empty_items() -> None:
    """Claude Code writes "No pending tasks" and "None" as bullets: those are not open items or failures."""
    facts = _imported_summary_facts(
        "1. Primary Request and Intent:\nx\n\n4. Errors and fixes:\n"
        "- ImportError: no module named yaml; fixed by adding pyyaml\n- None other\n\n"
        "7. Pending Tasks:\n- No explicit pending tasks. The user has only asked for a review.\n"
    )
    assert facts.failures == ("ImportError: no module named yaml; fixed by adding pyyaml",)
    assert facts.open_items == ()
