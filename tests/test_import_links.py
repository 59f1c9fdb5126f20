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
from sessionstore.storage.doctor import check
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


def test_doctor_flags_a_boundary_with_an_empty_view_before_it(
    store: SessionStore, transcripts_dir: Path
) -> None:
    from sessionstore.interchange.importing import import_file

    result = import_file(store, transcripts_dir / FASTHOOKS)
    assert [p for p in check(store).problems if p.code == "empty_view_before_boundary"] == []
    sid = result.session_id
    store.db.run_write(lambda db: db.execute(
        "DELETE FROM view_entries WHERE session_id = :id AND valid_to IS NOT NULL", {"id": sid}).close())
    flagged = [p for p in check(store).problems if p.code == "empty_view_before_boundary"]
    assert len(flagged) == 1 and flagged[0].session_id == sid and "boundary 1" in flagged[0].message
