"""Imports rebuild what the tool saw when a link of the file names no line (issue 11, defect 1).

Each test removes lines from a copy of a shared real transcript, imports it,
and compares the view before the boundary with the one the complete file
gives (less the removed message), reading both through `history --json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.storage.upkeep.doctor import check
from tests.support.cli import run_cli
from tests.support.validity import check_messages

FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    result = run_cli(capsys, *args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def import_one(capsys: pytest.CaptureFixture[str], url: str, path: Path) -> dict[str, Any]:
    return cli_json(capsys, "import", "claude-code", str(path), "--db", url)["files"][0]


def without(source: Path, target: Path, drop: set[str]) -> Path:
    """A copy of `source` without the lines whose uuid is in `drop`."""
    kept = [raw for raw in source.read_bytes().splitlines(keepends=True) if json.loads(raw).get("uuid") not in drop]
    target.write_bytes(b"".join(kept))
    return target


def raw_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines()]


def view_before_first_boundary(capsys: pytest.CaptureFixture[str], url: str, session: str) -> dict[str, Any]:
    return cli_json(capsys, "history", session, "--boundary", "1", "--db", url)


@pytest.mark.parametrize("name", [FASTHOOKS, SPOTTER])
def test_a_boundary_whose_logical_parent_is_missing(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path, name: str
) -> None:
    source = transcripts_dir / name
    entries = raw_entries(source)
    boundary = next(e for e in entries if e.get("subtype") == "compact_boundary")
    parent = boundary["logicalParentUuid"]
    whole = import_one(capsys, store_url, source)
    complete = [e["uuid"] for e in view_before_first_boundary(capsys, store_url, whole["session"])["entries"]]
    assert complete[-1] == parent

    other = f"sqlite:///{tmp_path / 'other.db'}"
    cut = import_one(capsys, other, without(source, tmp_path / "cut.jsonl", {parent}))
    shown = view_before_first_boundary(capsys, other, cut["session"])
    rebuilt = [e["uuid"] for e in shown["entries"]]
    assert rebuilt, "the view before the boundary is not empty"
    assert rebuilt == [u for u in complete if u != parent]
    assert check_messages(shown["messages"]) == []
    assert shown["summarized"], "the messages before the boundary count as summarized"
    named = [w for w in cut["warnings"] if boundary["uuid"] in w and "logical parent" in w]
    assert len(named) == 1, cut["warnings"]
    assert f"logical parent {parent} is not in the file" in named[0] and "rebuilt" in named[0], named[0]
    with SessionStore.open(other) as store:
        assert [p.code for p in check(store).problems if "boundary" in p.code] == []


def test_an_entry_whose_parent_is_missing_is_linked_to_the_one_before_it(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    source = transcripts_dir / FASTHOOKS
    entries = raw_entries(source)
    prompt = next(e for e in entries[5:] if e.get("type") == "user" and isinstance(e["message"]["content"], str))
    orphan = next(e for e in entries if e.get("parentUuid") == prompt["uuid"])
    whole = import_one(capsys, store_url, source)
    complete = [e["uuid"] for e in view_before_first_boundary(capsys, store_url, whole["session"])["entries"]]
    assert prompt["uuid"] in complete and complete.index(prompt["uuid"]) > 3

    other = f"sqlite:///{tmp_path / 'other.db'}"
    cut = import_one(capsys, other, without(source, tmp_path / "cut.jsonl", {prompt["uuid"]}))
    rebuilt = [e["uuid"] for e in view_before_first_boundary(capsys, other, cut["session"])["entries"]]
    assert rebuilt == [u for u in complete if u != prompt["uuid"]], "the messages before the gap are still there"
    named = [w for w in cut["warnings"] if orphan["uuid"] in w and "not in the file" in w]
    assert len(named) == 1, cut["warnings"]


def test_doctor_flags_a_boundary_with_an_empty_view_before_it(store: SessionStore, transcripts_dir: Path) -> None:
    from sessionstore.interchange.importing import import_file

    result = import_file(store, transcripts_dir / FASTHOOKS)
    assert [p for p in check(store).problems if p.code == "empty_view_before_boundary"] == []
    sid = result.session_id
    store.db.run_write(
        lambda db: db.execute(
            "DELETE FROM view_entries WHERE session_id = :id AND valid_to IS NOT NULL", {"id": sid}
        ).close()
    )
    flagged = [p for p in check(store).problems if p.code == "empty_view_before_boundary"]
    assert len(flagged) == 1 and flagged[0].session_id == sid and "boundary 1" in flagged[0].message


CODEX_COMPACTED = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def test_a_codex_compaction_without_replacement_history_carries_the_typed_user_messages(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    """A local compaction records only its summary; Codex rebuilds the history from the user messages before it."""
    source = transcripts_dir / CODEX_COMPACTED
    raw = source.read_bytes().splitlines(keepends=True)
    entries = [json.loads(line) for line in raw]
    at = next(i for i, e in enumerate(entries) if e["type"] == "compacted")
    entries[at]["payload"] = {"message": "The summary Codex wrote."}
    raw[at] = json.dumps(entries[at]).encode() + b"\n"
    path = tmp_path / source.name
    path.write_bytes(b"".join(raw))
    typed = [
        f"codex-{i + 1}"
        for i, e in enumerate(entries[:at])
        if e["type"] == "response_item" and e["payload"].get("type") == "message" and e["payload"].get("role") == "user"
    ]
    assert sum(len(json.dumps(entries[int(u.split("-")[1]) - 1]["payload"]["content"])) for u in typed) < 80_000

    report = cli_json(capsys, "import", "codex", str(path), "--db", store_url)["files"][0]
    assert [w for w in report["warnings"] if f":{at + 1}:" in w and "without a replacement history" in w]
    view = cli_json(capsys, "view", report["session"], "--db", store_url)
    uuids = [e["uuid"] for e in view["entries"]]
    assert uuids[0] == f"codex-{at + 1}", "the view starts at the boundary"
    assert uuids[1 : 1 + len(typed)] == typed, "then every user message typed before it, in order"
    summary = view["entries"][1 + len(typed)]
    assert summary["is_compact_summary"] and summary["content"] == "The summary Codex wrote."
    assert check_messages(view["messages"]) == []
    before = view_before_first_boundary(capsys, store_url, report["session"])
    assert {f"codex-{n}" for n in (5, 9)} <= {e["uuid"] for e in before["entries"]}
    whole = f"sqlite:///{tmp_path / 'whole.db'}"
    original = cli_json(capsys, "import", "codex", str(source), "--db", whole)["files"][0]
    expected = view_before_first_boundary(capsys, whole, original["session"])
    assert [e["uuid"] for e in before["entries"]] == [e["uuid"] for e in expected["entries"]], (
        "what the model saw before the compaction does not depend on how Codex recorded the compaction"
    )
