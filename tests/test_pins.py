"""Pinned messages: carried verbatim, in order, through every kind of compaction, within their own budget."""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.facts import GATE_HEADING
from sessionstore.compaction.pinning import PINS_HEADING, is_standing_instruction, split_pins
from sessionstore.storage.write.pins import PinBudgetExceeded
from sessionstore.storage.write.session import Session
from tests.support.cli import run_cli
from tests.support.convo import tool_result, tool_use
from tests.support.validity import assert_valid

RULE = "Never push to main; open a pull request instead."
LANGUAGE = "Answer in French from now on.\nKeep code comments in English."
BULK = "log line\n" * 2_000


def _work(session: Session, tag: str) -> list[str]:
    """A user ask, a long command output and a reply; the uuids."""
    stored = [
        session.append({"role": "user", "content": f"Task {tag}: look at the logs."}),
        session.append({"role": "assistant", "content": [tool_use(f"b{tag}", "Bash", command="make logs")]}),
        session.append({"role": "user", "content": [tool_result(f"b{tag}", BULK)]}),
        session.append({"role": "assistant", "content": f"Logs of {tag} read."}),
    ]
    return [m.uuid for m in stored]


def _user_texts(session: Session) -> list[str]:
    view = session.active_view()
    assert_valid(view)
    return [
        m["content"]
        if isinstance(m["content"], str)
        else "\n".join(b.get("text", "") for b in m["content"] if b.get("type") == "text")
        for m in view
        if m["role"] == "user"
    ]


def _carried(session: Session) -> str:
    """The pinned block of the view's summary message ("" when none)."""
    for text in _user_texts(session):
        if PINS_HEADING in text:
            return split_pins(text)[1]
    return ""


def test_pins_survive_full_partial_and_session_memory_compactions_verbatim_and_in_order(store: SessionStore) -> None:
    session = store.create_session()
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    lang = session.append({"role": "user", "content": LANGUAGE})
    session.append({"role": "assistant", "content": "D'accord."})
    session.pin(lang.uuid)
    _work(session, "one")
    compact(session)
    block = _carried(session)
    assert RULE in block and LANGUAGE in block and block.index(RULE) < block.index(LANGUAGE)
    second = _work(session, "two")
    compact(session, from_uuid=second[0])
    block = _carried(session)
    assert RULE in block and LANGUAGE in block
    third = _work(session, "three")
    compact(session, up_to_uuid=third[-1])
    block = _carried(session)
    assert RULE in block and LANGUAGE in block
    _work(session, "four")
    from sessionstore.compaction.session_memory import compact_with_memory
    from sessionstore.storage.write.memory import save_memory

    covered = session.active_entries()[-2]
    save_memory(
        session,
        "# Current State\nreading logs\n",
        covers_seq=covered.seq,
        covers_uuid=covered.uuid,
        tokens=0,
        tool_calls=0,
    )
    outcome = compact_with_memory(
        session, config=store.config.replace(memory_keep_min_tokens=10, memory_keep_min_text_messages=1)
    )
    assert outcome is not None and outcome.kind == "session-memory"
    block = _carried(session)
    assert RULE in block and LANGUAGE in block and block.index(RULE) < block.index(LANGUAGE)
    assert [p.text for p in session.pins()] == [RULE, LANGUAGE]


def test_a_pin_still_in_the_kept_part_is_not_carried_twice(store: SessionStore) -> None:
    session = store.create_session()
    _work(session, "one")
    rule = session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    _work(session, "two")
    compact(session, from_uuid=rule.uuid)
    texts = _user_texts(session)
    assert sum(t.count(RULE) for t in texts) == 1 and _carried(session) == ""


def test_an_unpinned_message_is_no_longer_carried(store: SessionStore) -> None:
    session = store.create_session()
    rule = session.append({"role": "user", "content": RULE, "metadata": {"pinned": True}})
    session.append({"role": "assistant", "content": "Understood."})
    _work(session, "one")
    compact(session)
    assert RULE in _carried(session)
    assert session.unpin(rule.uuid) is True and session.unpin(rule.uuid) is False
    _work(session, "two")
    compact(session)
    assert _carried(session) == "" and session.pins() == []


def test_a_pin_over_the_budget_is_refused_and_nothing_is_written(store: SessionStore) -> None:
    session = store.create_session(context_window=20_000)  # pin budget: 1,000 tokens
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    before = [m.uuid for m in session.transcript()]
    long_rule = "Always " + "follow the style guide " * 300
    with pytest.raises(PinBudgetExceeded) as refused:
        session.append({"role": "user", "content": long_rule}, pinned=True)
    assert refused.value.budget == 1_000
    assert [m.uuid for m in session.transcript()] == before, "the refused message was not appended either"
    plain = session.append({"role": "user", "content": long_rule})
    with pytest.raises(PinBudgetExceeded):
        session.pin(plain.uuid)
    assert [p.text for p in session.pins()] == [RULE]


def test_append_many_pins_the_messages_whose_metadata_asks_and_carries_them(store: SessionStore) -> None:
    session = store.create_session()
    stored = session.append_many(
        [
            {"role": "user", "content": RULE, "metadata": {"pinned": True}},
            {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": LANGUAGE, "metadata": {"pinned": True}},
            {"role": "assistant", "content": "D'accord."},
            {"role": "user", "content": "Unpinned: look around.", "metadata": {"pinned": False}},
            {"role": "assistant", "content": "Looked."},
        ]
    )
    assert [(p.uuid, p.text) for p in session.pins()] == [(stored[0].uuid, RULE), (stored[2].uuid, LANGUAGE)]
    _work(session, "one")
    compact(session)
    carried = _carried(session)
    assert RULE in carried and LANGUAGE in carried and carried.index(RULE) < carried.index(LANGUAGE)
    assert "Unpinned" not in carried


def test_append_many_over_the_pin_budget_writes_nothing_of_the_batch(store: SessionStore) -> None:
    session = store.create_session(context_window=20_000)  # pin budget: 1,000 tokens
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    before = [m.uuid for m in session.transcript()]
    half = "Always " + "follow the style guide " * 120  # ~540 tokens: each fits alone, the two together do not
    batch = [
        {"role": "user", "content": half, "metadata": {"pinned": True}},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": half + " twice", "metadata": {"pinned": True}},
        {"role": "assistant", "content": "Noted again."},
    ]
    with pytest.raises(PinBudgetExceeded) as refused:
        session.append_many(batch)
    assert refused.value.budget == 1_000 and refused.value.used > 0
    assert [m.uuid for m in session.transcript()] == before, "no message of the refused batch was written"
    assert [p.text for p in session.pins()] == [RULE]
    stored = session.append_many(batch[:2])
    assert [p.uuid for p in session.pins()][-1] == stored[0].uuid


def test_the_cli_pins_lists_and_unpins_and_refuses_over_budget_with_exit_2(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    session = store.create_session(context_window=20_000)
    rule = session.append({"role": "user", "content": RULE})
    session.append({"role": "assistant", "content": "Understood."})
    big = session.append({"role": "user", "content": "Always " + "follow the style guide " * 300})
    shown = run_cli(capsys, "pin", session.id, rule.uuid, "--db", store.url, "--json")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["uuid"] == rule.uuid
    listed = run_cli(capsys, "pins", session.id, "--db", store.url, "--json")
    assert [p["text"] for p in json.loads(listed.out)["pins"]] == [RULE]
    refused = run_cli(capsys, "pin", session.id, big.uuid, "--db", store.url)
    assert refused.code == 2 and "Traceback" not in refused.err
    assert len(refused.err.strip().splitlines()) == 1 and "pin refused" in refused.err
    missing = run_cli(capsys, "pin", session.id, "no-such-uuid", "--db", store.url)
    assert missing.code == 2 and "Traceback" not in missing.err
    gone = run_cli(capsys, "unpin", session.id, rule.uuid, "--db", store.url, "--json")
    assert json.loads(gone.out) == {"uuid": rule.uuid, "unpinned": True}
    assert session.pins() == []


@pytest.mark.parametrize(
    "text",
    [
        "Never push to main.",
        "Please always run the tests before committing.",
        "From now on, answer in French.",
        "Answer in French.",
        "Respond only in English, even when I write in German.",
        "Thanks. Don't ever commit generated files.",
        "You must never print secrets to the log.",
        "Make sure to always use type hints in new code.",
        "For the rest of this session, keep answers under five lines.",
        "Important: never touch the migrations folder",
    ],
)
def test_the_detector_finds_standing_instructions(text: str) -> None:
    assert is_standing_instruction(text)


@pytest.mark.parametrize(
    "text",
    [
        "Please fix the failing test in importer.py.",
        "Never mind, run the tests instead.",
        "Should we always run the linter?",
        "Can you answer in French?",
        "Read src/app.py and tell me what it does.",
        "It never worked on Windows, see the log.",
        "<command-name>/always</command-name>",
        "Always " + "x" * 500,
    ],
)
def test_the_detector_leaves_requests_and_questions_alone(text: str) -> None:
    assert not is_standing_instruction(text)


def test_automatic_pinning_is_off_by_default_and_pins_rules_when_on(store: SessionStore) -> None:
    for auto, expected in ((False, []), (True, [RULE])):
        session = store.create_session()
        session.append({"role": "user", "content": RULE})
        session.append({"role": "assistant", "content": "Understood."})
        _work(session, "one")
        compact(session, config=store.config.replace(auto_pin_instructions=auto))
        assert [p.text for p in session.pins()] == expected
        assert [p.source for p in session.pins()] == ["auto"] * len(expected)
        _work(session, "two")
        compact(session, config=store.config.replace(auto_pin_instructions=auto))
        assert (RULE in _carried(session)) is auto


def test_a_carried_pin_counts_as_held_so_the_gate_adds_no_copy(store: SessionStore) -> None:
    from tests.support.fakeapi import start_fake_api
    from sessionstore.compaction.summarizers.anthropic import AnthropicSummarizer

    session = store.create_session()
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    _work(session, "one")
    with start_fake_api() as api:
        api.script("<summary>1. Primary Request and Intent: reading logs.</summary>")
        outcome = compact(
            session, summarizer=AnthropicSummarizer(api_key="sk-ant-test-pins", base_url=api.base_url, max_retries=0)
        )
    summary, block = split_pins(str(session.message(outcome.summary_uuid).content))
    assert RULE in block and "Task one: look at the logs." in summary.partition(GATE_HEADING)[2]
    assert RULE not in summary, "the pinned rule is carried once, in the pinned block"


def test_a_pin_after_the_from_point_is_carried_in_the_pins_block(store: SessionStore) -> None:
    """`compact --from` summarizes what follows its point: a pin there goes into the summary's pinned block
    verbatim (not merely repeated among the summary's user messages, which a summarizer may shorten)."""
    session = store.create_session()
    first = _work(session, "one")
    _work(session, "two")
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    _work(session, "three")
    compact(session, from_uuid=first[-1])
    assert RULE in _carried(session)


@pytest.mark.parametrize("how", ["full", "from", "up_to"])
def test_a_compaction_with_no_pin_to_carry_adds_no_pins_block(store: SessionStore, how: str) -> None:
    """With nothing to carry the summary message ends with the summary itself: no heading, and no empty block
    (blank lines the model would read) where the pins would go."""
    session = store.create_session()
    first = _work(session, "one")
    second = _work(session, "two")
    pivot = {"full": {}, "from": {"from_uuid": first[-1]}, "up_to": {"up_to_uuid": second[0]}}[how]
    outcome = compact(session, **pivot)
    text = str(session.message(outcome.summary_uuid).content)
    assert PINS_HEADING not in text and text == text.rstrip()
    assert _carried(session) == ""
