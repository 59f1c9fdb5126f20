"""An agent that never stops: hundreds of compactions keep every summary within its budget, every pin
verbatim in the view, and every condensed fact reachable by the recall reference that names it.

A real span of a shared Claude Code transcript is replayed with renamed tool ids and a new directory
per replay, so the files touched keep growing, and the session is compacted after each replay.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.condense import references_in
from sessionstore.compaction.engine import compact
from sessionstore.compaction.facts import KIND_TITLES
from sessionstore.compaction.pinning import split_pins
from sessionstore.interchange.export import export_jsonl
from sessionstore.storage.read.recall import recall
from sessionstore.storage.write.session import Session
from sessionstore.storage.codecs.tokens import estimate_content, estimate_text
from tests.conftest import TRANSCRIPTS, shared_transcripts
from tests.support.replay import ROOT, load_span, replay
from tests.support.validity import assert_valid

#: A 30,000-token window: the default budgets are 3,000 tokens for a summary and 1,500 for pins.
WINDOW = 30_000
BUDGET = WINDOW // 10
#: Replays, each followed by a compaction, on both engines.
REPLAYS = 300
RULE = "Never push to main; open a pull request instead.\nAnswer in English."
SECOND_RULE = "Always run the test suite before you say a change is done."
#: The condensed facts of every (replays // SAMPLED)-th replay (and of the first two) are resolved through
#: recall: each range recall scans the whole range, so all ~3,000 would take minutes per engine.
SAMPLED = 6
#: (uuid, content) of every message a test appended, in order.
APPENDED: list[tuple[str, Any]] = []


@pytest.fixture(scope="module")
def span(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """38 recorded messages of the spotter transcript (nine files read and edited)."""
    shared_transcripts()
    return load_span(TRANSCRIPTS, f"sqlite:///{tmp_path_factory.mktemp('span') / 'src.db'}", messages=40)


def _paths(messages: list[dict[str, Any]]) -> set[str]:
    """The file paths the replay's tool calls name (the test's own oracle, not the gate's)."""
    found = set()
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
                path = block["input"].get("file_path")
                if isinstance(path, str) and path.startswith(ROOT):
                    found.add(path)
    return found


def _summary_text(session: Session, uuid: str) -> tuple[str, str]:
    """(summary without its pinned block, pinned block) of a summary message."""
    content = session.message(uuid).content
    assert isinstance(content, str)
    return split_pins(content)


def _check_view(session: Session, pins: list[str]) -> None:
    """The view is a valid request holding every pinned text verbatim in one user message."""
    view = session.active_view()
    assert_valid(view)
    users = [
        m["content"]
        if isinstance(m["content"], str)
        else "\n".join(b.get("text", "") for b in m["content"] if b.get("type") == "text")
        for m in view
        if m["role"] == "user"
    ]
    for text in pins:
        assert any(text in u for u in users), f"pinned text missing from the view: {text!r}"


def _run(
    session: Session, span: list[dict[str, Any]], step: Callable[[Session, int, list[Any]], Any], pins: list[str]
) -> tuple[dict[str, list[str]], str]:
    """Replay the span REPLAYS times with `step` compacting after each; (uuids holding each path, last summary)."""
    holders: dict[str, list[str]] = {}
    text = ""
    for n in range(REPLAYS):
        messages = replay(span, n)
        stored = session.append_many(messages)
        APPENDED.extend((m.uuid, sent["content"]) for m, sent in zip(stored, messages, strict=True))
        for message in stored:
            for path in _paths([{"content": message.content}]):
                holders.setdefault(path, []).append(message.uuid)
        outcome = step(session, n, stored)
        text, _ = _summary_text(session, outcome.summary_uuid)
        assert estimate_text(text) <= BUDGET, f"compaction {n + 1}: summary of {estimate_text(text)} tokens"
        _check_view(session, pins)
    return holders, text


def _check_condensed(session: Session, holders: dict[str, list[str]], summary: str) -> int:
    """Every sampled path not listed verbatim resolves, through the summary's reference, to its own message."""
    ranges = _reference_ranges(summary)
    assert "paths" in ranges, "hundreds of replays condense files: the summary names a reference for them"
    first, last = ranges["paths"]
    replay_of = {p: int(re.search(r"/r(\d+)/", p).group(1)) for p in holders}  # type: ignore[union-attr]  # every holder path has a /rN/ part
    sampled = [
        p for p in holders if p not in summary and (replay_of[p] % (REPLAYS // SAMPLED) == 0 or replay_of[p] < 2)
    ]
    assert len(sampled) >= SAMPLED
    for path in sampled:
        found = recall(session, f"{first}..{last}", query=path, max_tokens=100_000)
        assert set(m.uuid for m in found.messages) & set(holders[path]), f"recall lost {path}"
    return len(sampled)


def _reference_ranges(summary: str) -> dict[str, tuple[int, int]]:
    """The boundary range of each kind's reference line in the summary's gate section."""
    out: dict[str, tuple[int, int]] = {}
    kind = None
    for line in summary.splitlines():
        for name, title in KIND_TITLES.items():
            if line.strip() == title:
                kind = name
        found = references_in(line)
        if found and kind:
            out[kind] = found[0]
    return out


def _check_export(session: Session, appended: list[tuple[str, Any]], tmp_path: Path) -> None:
    """The export still holds every message the test appended, with its exact content, in order."""
    target = tmp_path / "export.jsonl"
    with target.open("w") as out:
        export_jsonl(session, out)
    exported = {}
    for line in target.read_text().splitlines():
        row = json.loads(line)
        exported[row["uuid"]] = (row["seq"], row["message"]["content"])
    assert [exported[u][1] for u, _ in appended] == [c for _, c in appended]
    seqs = [exported[u][0] for u, _ in appended]
    assert seqs == sorted(seqs)


@pytest.mark.slow
def test_300_full_compactions_of_a_real_span_stay_within_budget_with_pins_and_recall(
    store: SessionStore, span: list[dict[str, Any]], tmp_path: Path
) -> None:
    session = store.create_session(cwd=ROOT, context_window=WINDOW)
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    session.append({"role": "user", "content": SECOND_RULE, "metadata": {"pinned": True}})
    session.append({"role": "assistant", "content": "Will do."})
    APPENDED.clear()
    holders, summary = _run(session, span, lambda s, n, stored: compact(s), [RULE, SECOND_RULE])
    assert _check_condensed(session, holders, summary)
    _check_export(session, APPENDED, tmp_path)


@pytest.mark.slow
def test_300_alternating_partial_compactions_stay_within_budget_with_pins_and_recall(
    store: SessionStore, span: list[dict[str, Any]], tmp_path: Path
) -> None:
    session = store.create_session(cwd=ROOT, context_window=WINDOW)
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})

    def step(s: Session, n: int, stored: list[Any]) -> Any:
        """`from` the replay's first message (the prefix stays), then `up_to` its last round (the rest goes)."""
        if n % 2 == 0:
            return compact(s, from_uuid=stored[0].uuid)
        return compact(s, up_to_uuid=stored[-1].uuid)

    APPENDED.clear()
    holders, summary = _run(session, span, step, [RULE])
    assert _check_condensed(session, holders, summary)
    _check_export(session, APPENDED, tmp_path)


#: The generated tool-heavy session: TOTAL messages, compacted every EVERY (as the issue measured it).
TOTAL = 100_000
EVERY = 5_000
#: Compaction cost must stay flat: the median of the LAST compactions' cost within GROWTH times the
#: median of the FIRST ones. A compaction's cost is its CPU time (not wall time) divided by the CPU time
#: of a fixed reference workload run right before it, so neither a single slow compaction nor other
#: processes slowing this one down (a loaded 2-core machine) fail it; growth with the boundaries does.
FIRST, LAST, GROWTH = 3, 5, 1.5


def tool_heavy_batch(start: int, count: int, *, part: int) -> list[dict[str, Any]]:
    """`count` messages: one ask, then rounds each reading a file no earlier round read, then a reply."""
    batch: list[dict[str, Any]] = [{"role": "user", "content": f"Part {part}: read the next files and report."}]
    i = start
    while len(batch) < count - 1:
        use_id = f"toolu_g{i}"
        path = f"/srv/app/pkg{i // 100}/module_{i}.py"
        batch.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use_id, "name": "Read", "input": {"file_path": path}}],
            }
        )
        batch.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use_id, "content": f"def f{i}():\n    return {i}\n"}
                ],
            }
        )
        i += 1
    batch.append({"role": "assistant", "content": f"Read {i - start} files of part {part}."})
    return batch


@pytest.mark.slow
def test_a_100k_message_tool_heavy_session_compacted_every_5000_stays_within_budget(store: SessionStore) -> None:
    session = store.create_session(cwd="/srv/app")
    session.append({"role": "user", "content": RULE}, pinned=True)
    session.append({"role": "assistant", "content": "Understood."})
    budget = store.config.summary_budget(session.context_window)
    files = 0
    cpu: list[float] = []
    _reference_cpu()  # warm: the first run loads the tokenizer
    for part in range(TOTAL // EVERY):
        messages = tool_heavy_batch(files, EVERY, part=part)
        files += (len(messages) - 2) // 2
        for chunk in range(0, len(messages), 1_000):
            session.append_many(messages[chunk : chunk + 1_000])
        reference = _reference_cpu()
        started = time.process_time()
        outcome = compact(session)
        cpu.append((time.process_time() - started) / reference)
        summary, pins = _summary_text(session, outcome.summary_uuid)
        assert estimate_text(summary) <= budget, f"compaction {part + 1}"
        assert RULE in pins
        assert session.view_tokens <= budget + 2_000, f"view after compaction {part + 1}: {session.view_tokens}"
    assert files > 30_000 and "earlier files touched" in summary
    first, last = statistics.median(cpu[:FIRST]), statistics.median(cpu[-LAST:])
    assert last <= GROWTH * first, f"compaction cost grew: median {last:.2f} at the end, {first:.2f} at first: {cpu}"


def _reference_cpu() -> float:
    """CPU seconds of a fixed workload like a compaction's (building, encoding and estimating messages)."""
    started = time.process_time()
    for message in tool_heavy_batch(0, 3_000, part=0):
        estimate_content(json.loads(json.dumps(message["content"])))
    return max(time.process_time() - started, 1e-6)
