"""Session memory notes: template, truncation, the extractive updater, the trigger."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore.compaction.memory_notes import (
    EARLIER_MARK,
    NOTE_SECTIONS,
    SECTION_NAMES,
    TRUNCATION_MARK,
    count_tool_calls,
    empty_notes,
    estimate_tokens,
    is_empty_template,
    parse,
    render,
    should_update,
    truncate_sections,
    update_notes,
)
from sessionstore.compaction.rounds import group_rounds
from sessionstore.storage.core.types import ViewEntry
from tests.support.convo import Convo, text, thinking, tool_result, tool_use


def body(notes: str, name: str) -> str:
    """The body text of section `name` of some notes."""
    return next(s for s in parse(notes) if s.name == name).body_text()


def with_bodies(bodies: dict[str, str]) -> str:
    """Template notes with the given section bodies filled in."""
    sections = parse(empty_notes())
    for section in sections:
        if section.name in bodies:
            section.body = bodies[section.name].split("\n")
    return render(sections)


# --- template ---------------------------------------------------------------------


def test_template_has_every_section_in_order() -> None:
    """Ten markdown sections, each a heading then its italic description."""
    notes = empty_notes()
    headings = re.findall(r"^# (.+)$", notes, re.MULTILINE)
    assert headings == [
        "Session Title",
        "Current State",
        "Task specification",
        "Files and Functions",
        "Workflow",
        "Errors & Corrections",
        "Codebase and System Documentation",
        "Learnings",
        "Key results",
        "Worklog",
    ]
    assert list(SECTION_NAMES) == headings
    for name, description in NOTE_SECTIONS:
        assert f"# {name}\n_{description}_" in notes


def test_empty_template_detection() -> None:
    """Headings and descriptions alone are empty; any body text is not."""
    assert is_empty_template(empty_notes())
    assert is_empty_template("")
    assert is_empty_template(empty_notes().replace("\n\n", "\n\n\n"))
    assert not is_empty_template(with_bodies({"Learnings": "- use python3, not python"}))
    assert not is_empty_template("free text written before any heading\n" + empty_notes())


def test_parse_render_round_trip() -> None:
    """Rendering parsed notes gives the same notes; missing sections come back empty."""
    notes = with_bodies({"Worklog": "- one\n- two", "Current State": "busy"})
    assert render(parse(notes)) == notes
    partial = "# Learnings\n_x_\n- keep tests fast\n"
    names = [s.name for s in parse(partial)]
    assert names[0] == "Learnings" and set(names) == set(SECTION_NAMES)
    assert body(partial, "Learnings") == "- keep tests fast"


# --- truncation -------------------------------------------------------------------


def test_truncate_keeps_head_of_normal_sections_and_tail_of_logs() -> None:
    """Over 2,000 tokens a section keeps its first lines (logs: their last ones)."""
    lines = "\n".join(f"- line {k:04d} " + "x" * 60 for k in range(1000))
    notes = with_bodies({"Task specification": lines, "Worklog": lines, "Learnings": "short"})
    out = truncate_sections(notes)
    spec, log = body(out, "Task specification"), body(out, "Worklog")
    assert estimate_tokens(spec) <= 2_000 and estimate_tokens(log) <= 2_000
    assert spec.startswith("- line 0000") and spec.endswith(TRUNCATION_MARK)
    assert log.startswith(EARLIER_MARK) and log.endswith("- line 0999 " + "x" * 60)
    assert body(out, "Learnings") == "short"
    assert truncate_sections(out) == out


def test_truncate_fits_the_total_budget_with_a_fair_share() -> None:
    """Ten sections of ~1,900 tokens fit 12,000 in all; short sections are untouched."""
    big = "\n".join("y" * 75 for _ in range(100))
    bodies = {name: big for name in SECTION_NAMES[1:]}
    bodies["Session Title"] = "Caching fetcher"
    out = truncate_sections(with_bodies(bodies))
    assert estimate_tokens(out) <= 12_000
    assert body(out, "Session Title") == "Caching fetcher"
    sizes = {len(body(out, name)) for name in SECTION_NAMES[1:]}
    assert max(sizes) - min(sizes) <= 80
    assert truncate_sections(out) == out
    small = with_bodies({"Learnings": "fine"})
    assert truncate_sections(small) == small


def test_truncate_cuts_a_single_huge_line() -> None:
    """One line longer than the section budget is cut by characters."""
    out = truncate_sections(with_bodies({"Key results": "z" * 20_000}), per_section_tokens=100)
    result = body(out, "Key results")
    assert len(result) <= 400 and result.endswith(TRUNCATION_MARK) and result.startswith("zzz")


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(SECTION_NAMES),
        st.lists(st.text(alphabet="abc xyz-_\t", max_size=300), max_size=40).map("\n".join),
    ),
    st.integers(1, 400),
    st.integers(50, 3_000),
)
def test_truncate_always_within_budgets(bodies: dict[str, str], per: int, total: int) -> None:
    """Any notes: each section within `per`, all within `total` when possible, idempotent."""
    out = truncate_sections(with_bodies(bodies), per_section_tokens=per, total_tokens=total)
    for name in SECTION_NAMES:
        assert len(body(out, name)) <= per * 4
    skeleton = len(empty_notes())
    if skeleton // 4 + 20 < total:
        assert estimate_tokens(out) <= total
    assert truncate_sections(out, per_section_tokens=per, total_tokens=total) == out


# --- the extractive updater ---------------------------------------------------------


def first_batch() -> list[ViewEntry]:
    """A request, a read, a failing test run, an edit, a todo list, a status line."""
    c = Convo()
    c.user("Add retries to the HTTP client.\nUse exponential backoff.")
    c.assistant([thinking("plan")], "a1")
    c.assistant([tool_use("r1", "Read", file_path="/src/client.py")], "a1")
    c.user([tool_result("r1", "class Client: ...")])
    c.assistant([tool_use("b1", "Bash", command="pytest tests/test_client.py")], "a2")
    c.user([tool_result("b1", "Exit code 1\nE   TimeoutError: read timed out", is_error=True)])
    c.assistant(
        [
            tool_use("e1", "Edit", file_path="/src/client.py", old_string="a", new_string="b"),
            tool_use(
                "w1",
                "TodoWrite",
                todos=[
                    {"content": "Add backoff", "status": "completed", "activeForm": "Adding"},
                    {"content": "Cap retries", "status": "in_progress", "activeForm": "Capping"},
                ],
            ),
        ],
        "a3",
    )
    c.user([tool_result("e1", "updated"), tool_result("w1", "ok")])
    c.assistant([text("Backoff is in; now capping the retry count.")], "a4")
    return c.entries


def test_update_fills_each_section_from_its_source() -> None:
    """Files, errors, requests, state, worklog and title come from the entries."""
    entries = first_batch()
    notes = update_notes(empty_notes(), entries)
    assert not is_empty_template(notes)
    assert body(notes, "Session Title") == "Add retries to the HTTP client."
    assert body(notes, "Task specification") == "- Add retries to the HTTP client. Use exponential backoff."
    assert body(notes, "Files and Functions") == "- `/src/client.py`: read, edited"
    assert body(notes, "Workflow") == "- `pytest tests/test_client.py` → failed (exit 1)"
    errors = body(notes, "Errors & Corrections")
    assert "Bash `pytest tests/test_client.py` → failed (exit 1): E   TimeoutError: read timed out" in errors
    state = body(notes, "Current State")
    assert state.startswith("Backoff is in; now capping the retry count.")
    assert "- [in_progress] Cap retries" in state and "Add backoff" not in state
    worklog = body(notes, "Worklog").split("\n")
    assert len(worklog) == len([g for g in group_rounds(entries)])
    assert "Bash `pytest tests/test_client.py` ✗" in worklog[2]
    assert worklog[-1] == "- Backoff is in; now capping the retry count."
    for untouched in ("Codebase and System Documentation", "Learnings", "Key results"):
        assert body(notes, untouched) == ""


def test_update_is_deterministic_and_incremental() -> None:
    """Same input, same notes; a later batch merges into the ledger and appends to logs."""
    entries = first_batch()
    notes = update_notes("", entries)
    assert notes == update_notes(empty_notes(), entries)
    assert update_notes(notes, []) == notes
    c = Convo()
    c.user("Also log each retry.")
    c.assistant([tool_use("e2", "Edit", file_path="/src/client.py", old_string="c", new_string="d")], "b1")
    c.assistant([tool_use("w2", "Write", file_path="/src/log.py", content="LOG = []")], "b1")
    c.user([tool_result("e2", "updated"), tool_result("w2", "created")])
    c.assistant([tool_use("b2", "Bash", command="pytest tests/test_client.py")], "b2")
    c.user([tool_result("b2", "3 passed")])
    c.assistant([text("Retries are logged now.")], "b3")
    later = update_notes(notes, c.entries)
    assert body(later, "Session Title") == "Add retries to the HTTP client."
    assert body(later, "Files and Functions") == "- `/src/client.py`: read, edited\n- `/src/log.py`: written"
    assert body(later, "Workflow") == "- `pytest tests/test_client.py` → ok"
    assert body(later, "Task specification").endswith("- Also log each retry.")
    assert body(later, "Current State") == "Retries are logged now."
    assert "TimeoutError" in body(later, "Errors & Corrections")
    assert len(body(later, "Worklog").split("\n")) == len(group_rounds(first_batch())) + len(group_rounds(c.entries))


def test_update_keeps_hand_written_lines() -> None:
    """Lines a model or a person wrote into a section survive an update."""
    notes = with_bodies({"Files and Functions": "Client lives in src/.", "Learnings": "- python3 only"})
    out = update_notes(notes, first_batch())
    assert body(out, "Files and Functions") == "Client lives in src/.\n- `/src/client.py`: read, edited"
    assert body(out, "Learnings") == "- python3 only"


def test_update_stays_within_budgets_on_a_long_session() -> None:
    """Hundreds of rounds: every section <= 2,000 tokens and the notes <= 12,000."""
    c = Convo()
    for k in range(600):
        c.user(f"request {k}: " + "please do the thing " * 20)
        c.assistant([text(f"doing step {k} " * 30)], f"m{k}")
        c.assistant([tool_use(f"u{k}", "Write", file_path=f"/repo/file_{k}.py", content="x")], f"m{k}")
        c.user([tool_result(f"u{k}", "boom " * 50, is_error=k % 3 == 0)])
    notes = ""
    for start in range(0, len(c.entries), 400):
        notes = update_notes(notes, c.entries[start : start + 400])
    assert estimate_tokens(notes) <= 12_000
    for name in SECTION_NAMES:
        assert estimate_tokens(body(notes, name)) <= 2_000
    assert body(notes, "Worklog").startswith(EARLIER_MARK)
    assert "file_599.py" in body(notes, "Worklog")


def test_count_tool_calls() -> None:
    """Every tool_use block counts, parallel calls included."""
    assert count_tool_calls(first_batch()) == 4
    assert count_tool_calls([]) == 0


# --- the trigger -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("view_tokens", "expected"),
    [(0, False), (9_999, False), (10_000, True), (10_001, True)],
)
def test_first_update_at_ten_thousand_tokens(view_tokens: int, expected: bool) -> None:
    """Uninitialized: only the view size matters, inclusive at 10,000."""
    assert should_update(view_tokens, 0, 0, False) is expected
    assert should_update(view_tokens, 0, 50, False) is expected


@pytest.mark.parametrize(
    ("grown", "calls", "expected"),
    [
        (4_999, 3, False),
        (5_000, 3, True),
        (5_001, 3, True),
        (5_000, 2, False),
        (5_001, 4, True),
        (4_999, 100, False),
        (50_000, 2, False),
        (0, 0, False),
    ],
)
def test_later_updates_need_tokens_and_tool_calls(grown: int, calls: int, expected: bool) -> None:
    """Initialized: 5,000 more tokens AND 3 tool calls, both inclusive."""
    assert should_update(20_000 + grown, 20_000, calls, True) is expected


def test_trigger_thresholds_are_configurable() -> None:
    """The defaults can be overridden per call."""
    assert should_update(500, 0, 0, False, init_tokens=500)
    assert not should_update(1_100, 1_000, 1, True, update_tokens=100, update_tool_calls=2)
    assert should_update(1_100, 1_000, 2, True, update_tokens=100, update_tool_calls=2)
