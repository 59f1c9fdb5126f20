"""Imported sessions keep the source's times and a title a person recognizes (issue 11, defects 3 and 4)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sessionstore.cli import common
from sessionstore.cli.tables import short_time
from tests.support.cli import run_cli

FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
VIEWER = "claude-code/claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
INIT = "claude-code/claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
CODEX = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    result = run_cli(capsys, *args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def message_times(path: Path) -> list[str]:
    """Timestamps of the conversation entries (Claude Code) or items (Codex), read from the raw lines."""
    out = []
    for raw in path.read_bytes().splitlines():
        entry = json.loads(raw)
        if entry.get("type") in ("user", "assistant", "system", "attachment", "response_item", "compacted"):
            out.append(entry["timestamp"])
    return out


def imported(capsys: pytest.CaptureFixture[str], url: str, source: str, path: Path) -> dict[str, Any]:
    return cli_json(capsys, "import", source, str(path), "--db", url)["files"][0]


@pytest.mark.parametrize(("source", "name"), [("claude-code", FASTHOOKS), ("codex", CODEX)])
def test_sessions_and_history_show_the_source_times(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store_url: str,
    transcripts_dir: Path,
    source: str,
    name: str,
) -> None:
    monkeypatch.setattr(common.console, "_width", 240)  # wide enough that no cell folds
    path = transcripts_dir / name
    times = sorted(message_times(path), key=epoch)
    sid = imported(capsys, store_url, source, path)["session"]
    listed = next(s for s in cli_json(capsys, "sessions", "--db", store_url) if s["id"] == sid)
    assert listed["created_at"] == pytest.approx(epoch(times[0]))
    assert listed["updated_at"] == pytest.approx(epoch(times[-1]))
    table = run_cli(capsys, "sessions", "--db", store_url).out
    assert short_time(epoch(times[-1])) in table, "the sessions table shows the last message's time, as browse does"

    history = cli_json(capsys, "history", sid, "--db", store_url)
    assert len(history) == 1
    stamp = history[0]["timestamp"]
    shown = run_cli(capsys, "history", sid, "--db", store_url).out
    assert short_time(epoch(stamp)) in shown, (
        "the table shows the boundary's own time (in the sessions table's short form)"
    )
    html = run_cli(capsys, "export", sid, "--format", "html", "--db", store_url).out
    assert stamp in html


def test_a_grown_file_moves_updated_to_its_last_message(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    lines = (transcripts_dir / FASTHOOKS).read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:20]))
    sid = imported(capsys, store_url, "claude-code", path)["session"]
    first = next(s for s in cli_json(capsys, "sessions", "--db", store_url) if s["id"] == sid)
    path.write_bytes(b"".join(lines))
    imported(capsys, store_url, "claude-code", path)
    after = next(s for s in cli_json(capsys, "sessions", "--db", store_url) if s["id"] == sid)
    times = sorted(message_times(path), key=epoch)
    assert after["created_at"] == first["created_at"] == pytest.approx(epoch(times[0]))
    assert after["updated_at"] == pytest.approx(epoch(times[-1])) and after["updated_at"] > first["updated_at"]


def test_the_title_is_the_persons_slash_command_not_a_foreign_summary(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    report = imported(capsys, store_url, "claude-code", transcripts_dir / VIEWER)
    listed = {s["id"]: s for s in cli_json(capsys, "sessions", "--db", store_url)}
    assert listed[report["session"]]["title"] == "/orchestrator create TODO app by Next.js"
    assert any("summary entry names leaf" in w for w in report["warnings"])
    init = imported(capsys, store_url, "claude-code", transcripts_dir / INIT)
    listed = {s["id"]: s for s in cli_json(capsys, "sessions", "--db", store_url)}
    assert listed[init["session"]]["title"] == "/init"


def test_the_title_never_comes_from_a_sidechain_or_meta_entry(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    """An older file whose first typed prompt is preceded by sub-agent and meta entries."""
    raw = (transcripts_dir / VIEWER).read_bytes().splitlines(keepends=True)
    entries = [json.loads(line) for line in raw]
    side = next(
        i
        for i, e in enumerate(entries)
        if e.get("isSidechain") and e.get("type") == "user" and isinstance(e["message"]["content"], str)
    )
    meta = next(i for i, e in enumerate(entries) if e.get("isMeta"))
    path = tmp_path / "interleaved.jsonl"
    path.write_bytes(raw[side] + raw[meta] + b"".join(line for i, line in enumerate(raw) if i not in (0, side, meta)))
    report = imported(capsys, store_url, "claude-code", path)
    listed = {s["id"]: s for s in cli_json(capsys, "sessions", "--db", store_url)}
    assert listed[report["session"]]["title"] == "/orchestrator create TODO app by Next.js"


def test_a_summary_of_a_leaf_in_the_file_is_the_title(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    raw = (transcripts_dir / FASTHOOKS).read_bytes()
    leaf = json.loads(raw.splitlines()[-1])["uuid"]
    path = tmp_path / "titled.jsonl"
    summary = {"type": "summary", "summary": "Listing files and writing hello_world.py", "leafUuid": leaf}
    path.write_bytes(json.dumps(summary).encode() + b"\n" + raw)
    report = imported(capsys, store_url, "claude-code", path)
    listed = {s["id"]: s for s in cli_json(capsys, "sessions", "--db", store_url)}
    assert listed[report["session"]]["title"] == "Listing files and writing hello_world.py"
    assert not any("summary entry" in w for w in report["warnings"])
