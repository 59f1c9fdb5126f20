"""History at the cost of one boundary: numbered boundaries, pages of them, past views from their floor."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact, make_summarizer
from sessionstore.storage.read import history as hist
from sessionstore.storage.write.apicompaction import commit_api_compaction
from sessionstore.storage.write.session import Session
from tests.support.cli import run_cli
from tests.support.messages import conversation


def _compacted(store: SessionStore, rounds: int = 7) -> tuple[Session, list[list[int]]]:
    """A session compacted `rounds` times, alternating full and partial-from (which keeps a prefix
    alive across versions); returns it with the view (seqs) in force just before each boundary."""
    s = store.create_session(title="history")
    summarizer = make_summarizer("extractive")
    before: list[list[int]] = []
    for r in range(rounds):
        s.append_many(_whole_turns(list(conversation(40, seed=r, prefix=f"round {r}: "))))
        before.append([e.seq for e in s.active_entries()])
        if r % 2:
            pivot = [
                e
                for e in s.active_entries()
                if e.role == "user" and isinstance(e.content, str) and not e.message.is_compact_summary
            ][0]
            compact(s, summarizer=summarizer, from_uuid=pivot.uuid)
        else:
            compact(s, summarizer=summarizer)
    return s, before


def _whole_turns(chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunk cut after its last final assistant text, so every tool_use has its result."""
    end = max(
        i
        for i, m in enumerate(chunk)
        if m["role"] == "assistant"
        and isinstance(m["content"], list)
        and all(b.get("type") == "text" for b in m["content"])
    )
    return chunk[: end + 1]


def _reference_view(s: Session, version: int) -> list[int]:
    """The past view by a scan of every row valid at `version` (no floor)."""
    rows = s.db.all(
        "SELECT seq FROM view_entries WHERE session_id = :id AND valid_from <= :v "
        "AND (valid_to IS NULL OR valid_to > :v) ORDER BY key",
        {"id": s.id, "v": version},
    )
    return [int(r[0]) for r in rows]


def test_each_boundary_is_found_by_its_number_and_its_past_view_is_exact(store: SessionStore) -> None:
    s, before = _compacted(store)
    listed = hist.boundaries(s)
    assert [b.index for b in listed] == list(range(1, len(before) + 1))
    for k, seqs in enumerate(before, 1):
        one = hist.boundary(s, k)
        assert one == listed[k - 1]
        assert [e.seq for e in hist.view_before(s, k)] == seqs == _reference_view(s, one.replaced_version)
        assert [e.seq for e in hist.view_at(s, one.replaced_version)] == seqs
    floors = [
        int(r[0])
        for r in s.db.all("SELECT view_floor FROM compactions WHERE session_id = :id ORDER BY ordinal", {"id": s.id})
    ]
    assert any(f < b.replaced_version for f, b in zip(floors, listed, strict=True)), "a kept prefix outlives a version"
    with pytest.raises(hist.BoundaryNotFound, match=f"has {len(before)} boundaries; there is no boundary 99"):
        hist.view_before(s, 99)
    with pytest.raises(hist.BoundaryNotFound):
        hist.summarized_messages(s, 0)


def test_pages_of_boundaries_preview_their_summaries(store: SessionStore) -> None:
    s, before = _compacted(store, rounds=5)
    full = hist.boundaries(s)
    page = hist.boundaries(s, limit=2, offset=1, summaries=False)
    assert [b.index for b in page] == [2, 3]
    for b in page:
        whole = full[b.index - 1].summary or ""
        assert b.summary is None and b.summary_preview
        assert whole.startswith(b.summary_preview), "the preview is the summary's start, decoded"
        assert b.to_dict(preview_chars=50)["summary"] == whole[:50] + "…"
    assert hist.boundaries(s, limit=10, offset=4) == full[4:]
    assert hist.boundaries(s, limit=3, offset=5) == []
    assert hist.boundaries(s, limit=10**20, offset=1, summaries=False) == hist.boundaries(s, offset=1, summaries=False)
    assert hist.boundaries(s, limit=10**20, offset=2**63 - 1) == [], "a page past every boundary, not an overflow"
    assert hist.boundary_count(s) == len(before)


@pytest.mark.parametrize(
    "prefix,expected",
    [
        ('[{"type":"text","text":"line one\\nline \\"two\\" \\u00e9', 'line one\nline "two" é'),
        ('[{"type":"text","text":"cut in an escape \\u00', "cut in an escape "),
        ('"plain string summary, cut', "plain string summary, cut"),
        ('[{"type":"text","text":"whole"}]', "whole"),
    ],
)
def test_preview_of_a_cut_summary(prefix: str, expected: str) -> None:
    assert hist._preview_of(prefix) == expected


def test_history_cli_pages(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with SessionStore.open(sqlite_url) as store:
        s, before = _compacted(store, rounds=4)
    got = run_cli(capsys, "history", s.id, "--limit", "2", "--offset", "1", "--json", "--db", sqlite_url)
    page = json.loads(got.out)
    assert got.code == 0 and [b["index"] for b in page] == [2, 3] and all(b["summary"] for b in page)
    got = run_cli(capsys, "history", s.id, "--limit", "3", "--db", sqlite_url)
    assert got.code == 0 and "4 boundaries" in got.out and "showing 1-3" in got.out
    got = run_cli(capsys, "history", s.id, "--boundary", "3", "--json", "--db", sqlite_url)
    assert got.code == 0 and [e["seq"] for e in json.loads(got.out)["entries"]] == before[2]
    assert run_cli(capsys, "history", s.id, "--limit", "0", "--db", sqlite_url).code == 2


@pytest.mark.parametrize("index", [0, -1, 2**63, 10**20, 2**63 - 1])
def test_a_boundary_number_no_column_holds_is_not_found(store: SessionStore, index: int) -> None:
    s, _ = _compacted(store, rounds=2)
    for read in (hist.boundary, hist.view_before, hist.boundary_floor, hist.summarized_messages):
        with pytest.raises(hist.BoundaryNotFound, match=f"there is no boundary {index}"):
            read(s, index)


def test_each_listed_boundary_names_its_summary_segment_and_facts_gate(store: SessionStore) -> None:
    """`history --json` points at the summary message, gives the prefix a partial compaction kept
    (none for a full one) and the facts-gate report: all read from the boundary's row."""
    s, _ = _compacted(store, rounds=2)
    full, partial = hist.boundaries(s)
    after = {1: hist.view_before(s, 2), 2: s.active_entries()}
    for b in (full, partial):
        assert b.summary_seq is not None and b.summary_seq > b.boundary_seq
        summary = next(e for e in after[b.index] if e.seq == b.summary_seq)
        assert summary.message.is_compact_summary
        gate = b.to_dict()["facts_gate"]
        assert gate is not None and gate["checked"]["user_messages"] >= 1, "the gate checked the user's requests"
    assert full.to_dict()["preserved_segment"] is None
    view = after[2]
    at_summary = next(i for i, e in enumerate(view) if e.seq == partial.summary_seq)
    assert partial.to_dict()["preserved_segment"] == {
        "head_uuid": view[1].uuid,
        "anchor_uuid": partial.boundary_uuid,
        "tail_uuid": view[at_summary - 1].uuid,
    }
    with pytest.raises(hist.BoundaryNotFound, match="has 2 boundaries; there is no boundary 3"):
        hist.summarized_messages(s, 3)


def test_a_boundary_without_a_recorded_floor_opens_from_the_start(store: SessionStore) -> None:
    """A compaction row with no view_floor (the column is nullable; 0004 fills it only where it finds
    rows) still opens: its past view is read from the first version, exactly."""
    s, before = _compacted(store, rounds=3)
    s.db.run_write(
        lambda db: db.execute("UPDATE compactions SET view_floor = NULL WHERE session_id = :id", {"id": s.id}).close()
    )
    for k, seqs in enumerate(before, 1):
        assert hist.boundary_floor(s, k)[1] == 0
        assert [e.seq for e in hist.view_before(s, k)] == seqs


def _api_reply(name: str) -> dict[str, Any]:
    """An on-demand compaction reply as the Messages API returns it."""
    return {
        "id": f"msg_{name}",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-7",
        "stop_reason": "compaction",
        "content": [{"type": "compaction", "content": f"Summary {name}.", "signature": "c2ln"}],
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def test_a_background_api_boundary_opens_on_the_request_it_sent(store: SessionStore) -> None:
    """Before a background API compaction the model saw the request it sent, not what was appended
    while it was in flight; a foreground one replaced the whole view and names no request end."""
    s = store.create_session(title="api")
    s.append_many(_whole_turns(list(conversation(30, seed=1))))
    foreground_view = [e.seq for e in s.active_entries()]
    commit_api_compaction(s, _api_reply("foreground"))
    s.append_many(_whole_turns(list(conversation(30, seed=2, prefix="later: "))))
    sent = s.snapshot()
    meanwhile = s.append({"role": "user", "content": "appended while the request was in flight"})
    commit_api_compaction(s, _api_reply("background"), sent=sent, background=True)
    foreground, background = hist.boundaries(s)
    assert (foreground.kind, background.kind) == ("api-on-demand", "api-background")
    assert foreground.sent_through is None and background.sent_through == sent.last_seq
    assert [e.seq for e in hist.view_before(s, 1)] == foreground_view
    assert [e.seq for e in hist.view_before(s, 2)] == [e.seq for e in sent.entries]
    assert meanwhile.seq not in [e.seq for e in hist.view_before(s, 2)]
    assert s.active_entries()[-1].seq == meanwhile.seq, "it follows the compaction message"
