"""Manual and partial compaction on a new user's input (issue 16, items 5, 6 and 7).

An empty pivot is refused; a pivot that has to move says where and why (and
`--json` names the real first and last kept messages); a pivot inside an API
round summarizes up to that round; a compaction that would not shrink the view
is declined (manual) or skipped (automatic) and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import MessageNotFound, SessionStore
from sessionstore.compaction.circuit import compact_failures
from sessionstore.compaction.engine import compact
from sessionstore.compaction.errors import CompactionWouldNotShrink
from sessionstore.compaction.full import NothingToCompact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.storage.read.history import boundaries
from tests.support.cli import run_cli
from tests.support.convo import tool_result, tool_use
from tests.support.validity import check_messages

WORDS = "the parser keeps every token of the input and reports each error with its line "


def _rounds(s: Any, rounds: int = 6) -> list[Any]:
    """A prompt, then `rounds` tool rounds with sizable output, then a closing text; returns the stored messages."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "fix the parser in src/parse.py"}]
    for r in range(rounds):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {r}: reading the next file."},
                    {"type": "tool_use", "id": f"t{r}", "name": "Read", "input": {"file_path": f"src/mod{r}.py"}},
                ],
            }
        )
        msgs.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{r}", "content": WORDS * 60}]}
        )
    msgs.append({"role": "assistant", "content": "The parser is fixed."})
    msgs.append({"role": "user", "content": "now run the tests"})
    msgs.append({"role": "assistant", "content": "All 40 tests pass."})
    return s.append_many(msgs)


def _state(s: Any) -> tuple[Any, ...]:
    state = s.refresh_state()
    return state.view_version, state.last_seq, state.view_tokens


# --- item 5: an empty pivot ------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--from", "--up-to"])
def test_cli_empty_pivot_exits_2_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, flag: str
) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        _rounds(s)
        before = _state(s)
    result = run_cli(capsys, "compact", s.id, flag, "", "--db", sqlite_url)
    assert result.code == 2
    assert result.err.startswith("error: ") and flag in result.err and "empty" in result.err
    assert len(result.err.strip().splitlines()) == 1
    with SessionStore.open(sqlite_url) as st:
        assert _state(st.get(s.id)) == before and boundaries(st.get(s.id)) == []


@pytest.mark.parametrize("pivot", ["", " \n\t"], ids=["empty", "blank"])
@pytest.mark.parametrize("key", ["from_uuid", "up_to_uuid"])
def test_api_empty_pivot_is_refused(store: SessionStore, key: str, pivot: str) -> None:
    """An empty or blank pivot is refused as empty (not looked up as a uuid no message has)."""
    s = store.create_session()
    _rounds(s)
    before = _state(s)
    with pytest.raises(MessageNotFound, match="empty"):
        compact(s, **{key: pivot})
    assert _state(s) == before and boundaries(s) == []


# --- item 6: the pivot moves, and says so -----------------------------------------------


def test_from_a_prompt_keeps_exactly_up_to_it(store: SessionStore) -> None:
    """A `from` pivot that splits no round does not move (the summarized part need not open with a user)."""
    s = store.create_session()
    stored = _rounds(s)
    pivot = stored[0]
    outcome = compact(s, from_uuid=pivot.uuid)
    assert outcome.last_kept_uuid == pivot.uuid and outcome.pivot_note is None
    assert outcome.messages_summarized == len(stored) - 1
    assert check_messages(s.active_view()) == []


def test_from_a_tool_use_keeps_its_result_and_says_so(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        stored = _rounds(s)
    use, result = stored[3], stored[4]  # round 1: assistant tool_use t1, user tool_result t1
    out = run_cli(capsys, "compact", s.id, "--from", use.uuid, "--json", "--db", sqlite_url)
    assert out.code == 0, out.err
    outcome = json.loads(out.out)
    assert outcome["pivot_uuid"] == use.uuid
    assert outcome["last_kept_uuid"] == result.uuid
    assert "tool_use t1" in outcome["pivot_note"] and result.uuid in outcome["pivot_note"]
    with SessionStore.open(sqlite_url) as st:
        view = st.get(s.id).active_view()
    assert check_messages(view) == []


def test_from_prints_the_move_in_the_table_output(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        stored = _rounds(s)
    out = run_cli(capsys, "compact", s.id, "--from", stored[3].uuid, "--db", sqlite_url)
    assert out.code == 0, out.err
    assert "note: the split moved" in out.out and "tool_use t1" in out.out


def test_up_to_a_tool_use_summarizes_up_to_that_round(store: SessionStore) -> None:
    """The issue: `--up-to` a tool_use uuid said "nothing to summarize"."""
    s = store.create_session()
    stored = _rounds(s)
    pivot = stored[5]  # round 2's assistant tool_use
    outcome = compact(s, up_to_uuid=pivot.uuid)
    assert outcome.first_kept_uuid == pivot.uuid and outcome.pivot_note is None
    assert outcome.messages_summarized == 5
    view = s.active_view()
    assert check_messages(view) == []
    assert view[1]["content"][-1]["id"] == "t2"


def test_up_to_a_tool_result_moves_to_its_round_and_says_why(store: SessionStore) -> None:
    s = store.create_session()
    stored = _rounds(s)
    use, result = stored[5], stored[6]
    outcome = compact(s, up_to_uuid=result.uuid)
    assert outcome.first_kept_uuid == use.uuid
    assert outcome.pivot_note is not None
    assert "tool_use t2" in outcome.pivot_note and use.uuid in outcome.pivot_note
    assert check_messages(s.active_view()) == []


def test_up_to_leaves_an_earlier_summary_out_of_the_kept_suffix(store: SessionStore) -> None:
    """After a `from` compaction its summary follows the kept prefix; an `up_to` pivot inside that prefix keeps
    the suffix without the old summary, so the new view holds one summary, the new one, right after its boundary."""
    s = store.create_session()
    stored = _rounds(s)
    compact(s, from_uuid=stored[4].uuid)  # keeps the prompt and rounds 0 and 1, then the summary
    s.append({"role": "assistant", "content": "Next I will run the tests."})
    old = [e.uuid for e in s.active_entries() if e.message.is_compact_summary]
    assert len(old) == 1
    outcome = compact(s, up_to_uuid=stored[3].uuid)  # round 1's tool_use
    view = s.active_entries()
    summaries = [e.uuid for e in view if e.message.is_compact_summary]
    assert summaries == [outcome.summary_uuid] and view[1].uuid == outcome.summary_uuid
    assert [e.uuid for e in view[2:]] == [stored[3].uuid, stored[4].uuid, view[-1].uuid]
    assert check_messages(s.active_view()) == []


# --- item 7: a compaction that would not shrink the view ----------------------------------


def _small(s: Any) -> None:
    s.append_many([{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "Hi! How can I help?"}])


def test_manual_compaction_that_grows_the_view_is_declined(store: SessionStore) -> None:
    s = store.create_session()
    _small(s)
    before = _state(s)
    transcript = [m.uuid for m in s.transcript()]
    with pytest.raises(NothingToCompact, match="would not shrink"):
        compact(s)
    assert _state(s) == before
    assert [m.uuid for m in s.transcript()] == transcript and boundaries(s) == []


def test_cli_declines_with_one_line(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        _small(s)
        before = _state(s)
    out = run_cli(capsys, "compact", s.id, "--db", sqlite_url)
    assert out.code == 2 and "would not shrink" in out.err and "nothing was written" in out.err
    assert len(out.err.strip().splitlines()) == 1
    with SessionStore.open(sqlite_url) as st:
        assert _state(st.get(s.id)) == before


def test_automatic_compaction_that_would_not_shrink_is_skipped(store: SessionStore) -> None:
    """Over the threshold, but the summary must carry the one big user message verbatim (its budget is large
    enough to hold it, so it is not condensed): skip, write nothing."""
    s = store.create_session(context_window=40_000)  # threshold 7,000
    s.append_many(
        [
            {"role": "user", "content": WORDS * 600},
            {"role": "assistant", "content": "Understood."},
            {"role": "user", "content": "continue"},
        ]
    )
    assert s.view_tokens > 7_000
    before = _state(s)
    pipeline = Pipeline(store, config=store.config.replace(microcompact_enabled=False, summary_max_tokens=40_000))
    prepared = pipeline.prepare(s)
    layer = prepared.report["autocompact"]
    assert not layer.acted and "would not shrink" in layer.details["skipped"]
    assert "failed" not in layer.details and compact_failures(s) == 0
    assert boundaries(s) == [] and _state(s)[1:] == before[1:]
    assert prepared.messages == s.active_view()


def test_the_boundary_counts_the_view_it_opens_re_read_files_included(store: SessionStore, tmp_path: Path) -> None:
    """The boundary's `post_tokens` is what follows it in the new view: the summary, the kept turn and the
    files re-read from disk, each counted once and added (the boundary's own line is its `pre -> post`)."""
    s = store.create_session(cwd=str(tmp_path))
    s.append({"role": "user", "content": "read the modules"})
    for i in range(3):
        (tmp_path / f"mod{i}.py").write_text(f"# module {i}\n" + WORDS * 20)
        s.append({"role": "assistant", "content": [tool_use(f"r{i}", "Read", file_path=f"mod{i}.py")]})
        s.append({"role": "user", "content": [tool_result(f"r{i}", WORDS * 80)]})
    s.append({"role": "assistant", "content": "All three modules read."})
    s.append({"role": "user", "content": "now fix them"})
    outcome = compact(s)
    assert outcome.attachments == 3
    view = s.active_entries()
    assert [e.uuid for e in view[:2]] == [outcome.boundary_uuid, outcome.summary_uuid]
    metadata = s.message(outcome.boundary_uuid).metadata
    assert metadata["pre_tokens"] == outcome.pre_tokens
    assert metadata["post_tokens"] == sum(e.tokens for e in view[1:]) == outcome.post_tokens - view[0].tokens


def test_a_compaction_is_written_only_when_it_shrinks_the_view(store: SessionStore) -> None:
    """Across views just under, at and just over what their summary costs: one that would come out as big or
    bigger (the boundary line counted) is declined and writes nothing, and every one written made the view
    smaller; the sweep crosses the point where the two meet."""
    outcomes: set[str] = set()
    for words in range(100, 150):
        s = store.create_session()
        s.append_many(
            [
                {"role": "user", "content": "hello there"},
                {"role": "assistant", "content": [tool_use("t1", "Bash", command="ls")]},
                {"role": "user", "content": [tool_result("t1", "x " * words)]},
                {"role": "assistant", "content": "done"},
            ]
        )
        before = _state(s)
        try:
            outcome = compact(s)
        except CompactionWouldNotShrink as declined:
            outcomes.add("declined")
            assert declined.pre_tokens == before[2] and declined.post_tokens >= declined.pre_tokens
            assert _state(s) == before and boundaries(s) == []
            continue
        outcomes.add("written")
        assert outcome.pre_tokens == before[2] and outcome.post_tokens < outcome.pre_tokens, words
        assert _state(s)[2] == outcome.post_tokens == sum(e.tokens for e in s.active_entries())
    assert outcomes == {"declined", "written"}
