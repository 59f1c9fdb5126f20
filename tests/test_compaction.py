"""Compaction as transactional rewrites: every kind, history, export, snapshots and conflicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

from sessionstore.compaction.engine import compact
from sessionstore.compaction.full import NothingToCompact, compact_full
from sessionstore.compaction.session_memory import compact_with_memory, maybe_update_memory
from sessionstore.compaction.summarizers.base import SummaryResult
from sessionstore.compaction.summarizers.extractive import ExtractiveSummarizer
from sessionstore import RewriteConflict, SessionStore
from sessionstore.storage.read.history import boundaries, summarized_messages, view_before
from sessionstore.storage.write.memory import save_memory
from sessionstore.storage.write.rewrite import TAIL_SCAN, Add, Keep, commit_rewrite
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.errors import InvalidMessage
from sessionstore.storage.core.types import ViewEntry
from sessionstore.storage.records.validate import NewMessage, normalize
from sessionstore.storage.upkeep.doctor import check
from tests.support.cli import run_cli
from tests.support.messages import conversation
from tests.support.validity import check_messages

ROOT = Path(__file__).resolve().parent.parent


def _complete(n: int, seed: int = 0, prefix: str = "") -> list[dict[str, Any]]:
    """A conversation of about n messages that ends on a finished assistant turn."""
    msgs = list(conversation(n, seed=seed, prefix=prefix))
    while msgs and not (
        msgs[-1]["role"] == "assistant" and all(b.get("type") != "tool_use" for b in msgs[-1]["content"])
    ):
        msgs.pop()
    return msgs


def _view_json(capsys: pytest.CaptureFixture[str], url: str, sid: str) -> dict[str, Any]:
    result = run_cli(capsys, "view", sid, "--json", "--db", url)
    assert result.code == 0, result.err
    return json.loads(result.out)


def _export(capsys: pytest.CaptureFixture[str], url: str, sid: str) -> list[dict[str, Any]]:
    result = run_cli(capsys, "export", sid, "--format", "jsonl", "--db", url)
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.out.splitlines()]


def test_every_kind_keeps_view_valid_history_exact_and_export_complete(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    """full, partial from / up_to and session-memory, each checked through the CLI."""
    with SessionStore.open(store_url) as st:
        s = st.create_session(title="kinds")
        appended = _complete(120, seed=1)
        s.append_many(appended)
        sid = s.id
        snapshots = []
        steps = ["full", "from", "up_to", "session-memory"]
        for step in steps:
            snapshots.append(_view_json(capsys, store_url, sid))
            entries = s.active_entries()
            if step == "full":
                args = []
            elif step == "from":
                pivot = next(
                    e
                    for e in entries
                    if e.role == "user" and isinstance(e.content, str) and not e.message.is_compact_summary
                )
                args = ["--from", pivot.uuid]
            elif step == "up_to":
                users = [
                    e
                    for e in entries
                    if e.role == "user" and isinstance(e.content, str) and not e.message.is_compact_summary
                ]
                args = ["--up-to", users[-1].uuid]
            else:
                last = entries[-1]
                save_memory(
                    s,
                    "# Session Title\nkinds\n# Current State\nworking on request 9\n",
                    covers_seq=entries[-4].seq,
                    covers_uuid=entries[-4].uuid,
                    tokens=0,
                    tool_calls=0,
                )
                args = ["--memory"]
                assert last
            result = run_cli(capsys, "compact", sid, *args, "--json", "--db", store_url)
            assert result.code == 0, result.err
            outcome = json.loads(result.out)
            assert (
                outcome["kind"]
                == {
                    "full": "full",
                    "from": "partial-from",
                    "up_to": "partial-up_to",
                    "session-memory": "session-memory",
                }[step]
            )
            after = _view_json(capsys, store_url, sid)
            assert check_messages(after["messages"]) == [], step
            more = _complete(40, seed=len(appended), prefix=f"{step}-")
            if after["messages"][-1]["role"] == "user":
                more = more[1:]
            s.append_many(more)
            appended += more

        exported = _export(capsys, store_url, sid)
        plain = [e for e in exported if e["subtype"] != "compact_boundary" and not e["is_compact_summary"]]
        assert [e["message"]["content"] for e in plain] == [m["content"] for m in appended]
        assert sum(1 for e in exported if e["subtype"] == "compact_boundary") == len(steps)

        listed = json.loads(run_cli(capsys, "history", sid, "--json", "--db", store_url).out)
        assert [b["index"] for b in listed] == [1, 2, 3, 4]
        for k, snap in enumerate(snapshots, 1):
            shown = json.loads(run_cli(capsys, "history", sid, "--boundary", str(k), "--json", "--db", store_url).out)
            assert {key: shown[key] for key in snap} == snap, f"boundary {k}"
            assert shown["summarized"], f"boundary {k} summarized something"
        summary = run_cli(capsys, "history", sid, "--boundary", "4", "--summary", "--db", store_url).out
        assert "working on request 9" in summary


def test_full_compaction_cuts_tokens_and_keeps_every_user_message_and_path(store: SessionStore) -> None:
    s = store.create_session()
    msgs = _complete(2000, seed=5)
    s.append_many(msgs)
    assert len(s.active_entries()) >= 1990
    before = s.view_tokens
    outcome = compact_full(s, ExtractiveSummarizer())
    assert outcome.post_tokens <= before * 0.15, (before, outcome.post_tokens)
    summary = boundaries(s)[0].summary or ""
    for m in msgs:
        if m["role"] == "user" and isinstance(m["content"], str):
            assert m["content"] in summary
        if m["role"] == "assistant":
            for b in m["content"]:
                if b.get("type") == "tool_use" and "file_path" in b["input"]:
                    assert b["input"]["file_path"] in summary
    assert check_messages(s.active_view()) == []


def test_in_flight_turn_stays_verbatim(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_complete(30, seed=2))
    s.append({"role": "user", "content": "now read the config"})
    s.append(
        {
            "role": "assistant",
            "api_message_id": "live",
            "content": [{"type": "tool_use", "id": "live-1", "name": "Read", "input": {"file_path": "c.py"}}],
        }
    )
    compact(s)
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "live-1", "content": "x=1"}]})
    view = s.active_view()
    assert check_messages(view) == []
    assert view[-1]["content"][0]["tool_use_id"] == "live-1"


def test_preserved_segments(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_complete(80, seed=3))
    entries = s.active_entries()
    pivot = [e for e in entries if e.role == "user" and isinstance(e.content, str)][2]
    compact(s, from_uuid=pivot.uuid)
    b = boundaries(s)[0]
    view = s.active_entries()
    assert view[0].uuid == b.boundary_uuid and b.anchor_uuid == b.boundary_uuid
    assert view[1].uuid == b.head_uuid == entries[0].uuid
    kept_tail = next(i for i, e in enumerate(view) if e.uuid == b.tail_uuid)
    assert view[kept_tail + 1].message.is_compact_summary
    prompts = [
        e
        for e in s.active_entries()
        if e.role == "user" and isinstance(e.content, str) and not e.message.is_compact_summary
    ]
    compact(s, up_to_uuid=prompts[-1].uuid)
    b2 = boundaries(s)[1]
    view = s.active_entries()
    assert [view[0].uuid, view[1].uuid] == [b2.boundary_uuid, b2.anchor_uuid]
    assert view[2].uuid == b2.head_uuid and view[-1].uuid == b2.tail_uuid
    assert not any(e.subtype == "compact_boundary" for e in view[2:]), "old boundaries dropped from the kept suffix"
    assert check_messages(s.active_view()) == []


def test_nothing_to_compact_is_a_clear_error(store: SessionStore) -> None:
    s = store.create_session()
    with pytest.raises(NothingToCompact):
        compact(s)


class AppendingSummarizer:
    """A summarizer that, while it 'thinks', has another process append to the session."""

    name = "appending"

    def __init__(self, url: str, session_id: str, count: int):
        self.url, self.session_id, self.count = url, session_id, count

    def summarize(
        self, entries: Sequence[ViewEntry], *, custom_instructions: str | None = None, truncated: bool = False
    ) -> SummaryResult:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.support.appender", self.url, self.session_id, "late", str(self.count)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return SummaryResult(text="summary written while others appended", raw="")


class RewritingSummarizer:
    """A summarizer during which another rewrite commits first."""

    name = "loser"

    def __init__(self, url: str, session_id: str):
        self.url, self.session_id = url, session_id

    def summarize(
        self, entries: Sequence[ViewEntry], *, custom_instructions: str | None = None, truncated: bool = False
    ) -> SummaryResult:
        with SessionStore.open(self.url) as other:
            compact(other.get(self.session_id))
        return SummaryResult(text="too late", raw="")


def test_messages_appended_during_the_summary_follow_it(store_url: str) -> None:
    with SessionStore.open(store_url) as st:
        s = st.create_session()
        s.append_many(_complete(40, seed=4))
        s.append({"role": "user", "content": "go on"})
        compact_full(s, AppendingSummarizer(store_url, s.id, 3))
        view = s.active_entries()
        assert [e.content for e in view[-3:]] == ["late:0", "late:1", "late:2"]
        assert view[1].message.is_compact_summary
        assert check_messages(s.active_view()) == []


def test_a_rewrite_that_lost_the_race_is_abandoned(store_url: str) -> None:
    with SessionStore.open(store_url) as st:
        s = st.create_session()
        s.append_many(_complete(40, seed=6))
        with pytest.raises(RewriteConflict, match="abandoned"):
            compact_full(s, RewritingSummarizer(store_url, s.id))
        assert len(boundaries(s)) == 1 and boundaries(s)[0].summarizer == "extractive"
        assert check_messages(s.active_view()) == []


def test_session_memory_declines_without_usable_notes(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_complete(300, seed=7))
    assert compact_with_memory(s) is None
    from sessionstore.compaction.memory_notes import empty_notes

    e = s.active_entries()
    save_memory(s, empty_notes(), covers_seq=e[-5].seq, covers_uuid=e[-5].uuid, tokens=0, tool_calls=0)
    assert compact_with_memory(s) is None
    save_memory(
        s, "# Current State\nrefactoring\n", covers_seq=e[-5].seq, covers_uuid=e[-5].uuid, tokens=0, tool_calls=0
    )
    assert compact_with_memory(s, threshold=1) is None, "still over the threshold: decline"
    outcome = compact_with_memory(s)
    assert outcome is not None and outcome.kind == "session-memory"
    assert check_messages(s.active_view()) == []


def test_memory_updates_on_the_design_trigger(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_complete(400, seed=8))
    snap = s.snapshot()
    assert maybe_update_memory(s, snap.entries, 9_999, store.config) is None
    written = maybe_update_memory(s, snap.entries, 10_000, store.config)
    assert written is not None and written.covers_seq == snap.entries[-1].seq
    assert "request" in written.notes


def test_reattaches_recently_read_files_from_disk(store: SessionStore, tmp_path: Path) -> None:
    s = store.create_session(cwd=str(tmp_path))
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(f"# fresh {name}\n")
    s.append({"role": "user", "content": "read them"})
    for i, name in enumerate(["a.py", "b.py", "gone.py", "c.py"]):
        s.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"r{i}", "name": "Read", "input": {"file_path": name}}],
            }
        )
        s.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"r{i}", "content": "old line\n" * 800}],
            }
        )
    s.append({"role": "assistant", "content": "read all"})
    outcome = compact(s)
    assert outcome.attachments == 3
    texts = [e.content for e in s.active_entries() if e.type == "attachment"]
    assert [re.search(r"Contents of ([^ ,]+)", t).group(1) for t in texts] == ["c.py", "b.py", "a.py"]
    assert all("# fresh" in t for t in texts)


def test_export_markdown_shows_boundaries(capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session(title="md")
        s.append_many(_complete(30, seed=9))
        compact(s)
        sid = s.id
    out = tmp_path / "t.md"
    result = run_cli(capsys, "export", sid, "--format", "markdown", "-o", str(out), "--db", sqlite_url)
    assert result.code == 0, result.err
    text = out.read_text()
    assert "## ✂ Compaction 1" in text and "Primary Request" in text
    assert not (tmp_path / "t.md.partial").exists()


def test_history_errors(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        sid = st.create_session().id
    result = run_cli(capsys, "history", sid, "--boundary", "1", "--db", sqlite_url)
    assert result.code == 2 and "no boundary 1" in result.err
    result = run_cli(capsys, "compact", sid, "--db", sqlite_url)
    assert result.code == 2 and "nothing to compact" in result.err


def test_summarized_messages_are_exactly_the_replaced_ones(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many(_complete(50, seed=10))
    before = s.active_entries()
    compact(s)
    assert [m.seq for m in summarized_messages(s, 1)] == [e.seq for e in before]
    assert [e.seq for e in view_before(s, 1)] == [e.seq for e in before]


def test_a_partial_compaction_records_only_what_it_summarized(store: SessionStore) -> None:
    """`up_to` a prompt: the boundary lists the messages before it as summarized, not the rest it kept."""
    s = store.create_session()
    s.append_many(_complete(50, seed=12))
    before = s.active_entries()
    prompts = [e for e in before if e.role == "user" and isinstance(e.content, str)]
    pivot = prompts[len(prompts) // 2]
    outcome = compact(s, up_to_uuid=pivot.uuid)
    summarized = [e.seq for e in before if e.seq < pivot.seq]
    assert [m.seq for m in summarized_messages(s, 1)] == summarized
    assert boundaries(s)[0].messages_summarized == outcome.messages_summarized == len(summarized)


# ------------------------------------------------------------ what a rewrite writes


def _rewrite(s: Session, plan: list[Keep | Add]) -> int:
    """Commit `plan` over the session's current view; the new view version."""
    snap = s.snapshot()
    return commit_rewrite(s, base_version=snap.view_version, snapshot_last_seq=snap.last_seq, plan=plan).view_version


def _rows_written(store: SessionStore, sid: str, version: int) -> tuple[list[int], list[int]]:
    """The seqs of the view rows the rewrite to `version` opened, and of those it closed."""
    opened, closed = (
        [
            int(r[0])
            for r in store.db.all(
                f"SELECT seq FROM view_entries WHERE session_id = :id AND {column} = :v ORDER BY seq",
                {"id": sid, "v": version},
            )
        ]
        for column in ("valid_from", "valid_to")
    )
    return opened, closed


def _notice(text: str) -> NewMessage:
    """A system message a layer places in the view (stored and exported, never sent)."""
    return normalize({"role": "system", "subtype": "notice", "content": text})


def _cleared(content: Any) -> Any:
    """`content` with its tool inputs and results blanked, as a clearing layer shows them."""
    return [
        {**b, "content": "[cleared]"}
        if b.get("type") == "tool_result"
        else {**b, "input": {}}
        if b.get("type") == "tool_use"
        else b
        for b in content
    ]


def test_a_rewrite_writes_only_the_rows_that_change(store: SessionStore, store_url: str) -> None:
    """Kept entries keep their rows: a rewrite opens rows only for what it adds or replaces, closes only what it
    replaces or drops, and the view reads back in the planned order (storage grows with changes, not views)."""
    s = store.create_session()
    s.append_many(list(conversation(60, seed=13)))
    _rewrite(s, [Keep(e.seq) for e in s.active_entries()])
    s.append_many(list(conversation(30, seed=14, prefix="later-")))
    entries = s.active_entries()
    result = next(i for i, e in enumerate(entries) if i > 10 and e.role == "user" and isinstance(e.content, list))
    call, answer = entries[result - 1], entries[result]
    dropped = entries[result + 3]
    plan: list[Keep | Add] = [Add(_notice("the calls before this were summarized"))]
    for e in entries:
        if e in (call, answer):
            plan.append(Keep(e.seq, _cleared(e.content)))
        elif e is not dropped:
            plan.append(Keep(e.seq))
    last = s.last_seq
    version = _rewrite(s, plan)
    assert _rows_written(store, s.id, version) == (
        sorted([call.seq, answer.seq, last + 1]),
        sorted([call.seq, answer.seq, dropped.seq]),
    )
    with SessionStore.open(store_url) as again:
        view = again.get(s.id).active_entries()
    assert [e.seq for e in view] == [last + 1, *(e.seq for e in entries if e is not dropped)]
    assert [v.content for v in view if v.seq in (call.seq, answer.seq)] == [
        _cleared(call.content),
        _cleared(answer.content),
    ]


def test_notices_placed_at_one_spot_again_and_again_keep_the_view_in_order(store: SessionStore) -> None:
    """Each notice placed right after the first prompt writes one row while keys have room between neighbours;
    once they have none the view is renumbered, and no two entries ever share a place (doctor stays clean)."""
    s = store.create_session()
    s.append_many(_complete(30, seed=15))
    expected = [e.seq for e in s.active_entries()]
    for n in range(20):
        entries = s.active_entries()
        plan: list[Keep | Add] = [Keep(entries[0].seq), Add(_notice(f"notice {n}"))]
        plan += [Keep(e.seq) for e in entries[1:]]
        seq = s.last_seq + 1
        version = _rewrite(s, plan)
        expected.insert(1, seq)
        opened, closed = _rows_written(store, s.id, version)
        if n < 16:  # 16 halvings of the gap between two neighbouring keys leave room for one more
            assert (opened, closed) == ([seq], []), f"notice {n}"
        assert [e.seq for e in store.get(s.id).active_entries()] == expected, f"notice {n}"
    report = check(store, s.id)
    assert report.ok, [str(p) for p in report.problems]


def _long_turns() -> list[dict[str, Any]]:
    """More than TAIL_SCAN messages of finished turns, then a response streamed in two pieces, a call pending."""
    msgs = list(conversation(TAIL_SCAN + 40, seed=16))
    while not (msgs[-1]["role"] == "assistant" and msgs[-1]["content"][0]["type"] == "tool_use"):
        msgs.pop()
    return msgs


def _one_long_response() -> list[dict[str, Any]]:
    """A prompt, then one response streamed in more than TAIL_SCAN pieces, the last one a pending call."""
    pieces = [
        {"role": "assistant", "api_message_id": "msg_long", "content": [{"type": "text", "text": f"part {i}"}]}
        for i in range(TAIL_SCAN + 20)
    ]
    call = {"type": "tool_use", "id": "toolu_long", "name": "Read", "input": {"file_path": "a.py"}}
    return [
        {"role": "user", "content": "go"},
        *pieces,
        {"role": "assistant", "api_message_id": "msg_long", "content": [call]},
    ]


def _answers(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The next piece of the last streamed response (one more call), then the results of all its calls."""
    last = msgs[-1]
    extra = {"type": "tool_use", "id": "toolu_extra", "name": "Bash", "input": {"command": "ls"}}
    ids = [
        b["id"]
        for m in msgs
        if m["role"] == "assistant" and m.get("api_message_id") == last["api_message_id"]
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in [*ids, "toolu_extra"]]
    return [
        {"role": "assistant", "api_message_id": last["api_message_id"], "content": [extra]},
        {"role": "user", "content": results},
    ]


@pytest.mark.parametrize(
    "shape",
    [
        "long turns ending mid-response",
        "one response longer than the scan",
        "a few notices",
        "exactly TAIL_SCAN notices",
    ],
)
def test_after_a_rewrite_appends_are_checked_as_before_it(store: SessionStore, shape: str) -> None:
    """The rewrite works out the tail from its last TAIL_SCAN entries only: what may be appended next (the rest of
    a streamed response, its results; no assistant message first) is the same as before it, and doctor agrees."""
    s = store.create_session()
    if shape.endswith("notices"):
        count = TAIL_SCAN if shape.startswith("exactly") else 3
        msgs = [{"role": "system", "subtype": "notice", "content": f"hook {i} ran"} for i in range(count)]
    else:
        msgs = _long_turns() if shape.startswith("long") else _one_long_response()
    s.append_many(msgs)
    _rewrite(s, [Keep(e.seq) for e in s.active_entries()])
    assert [p for p in check(store, s.id).problems if p.code == "tail_state"] == []
    if shape.endswith("notices"):
        with pytest.raises(InvalidMessage, match="first message"):
            s.append({"role": "assistant", "content": "hello"})
        s.append({"role": "user", "content": "hello"})
    else:
        s.append_many(_answers(msgs))
    assert check_messages(s.active_view()) == []
