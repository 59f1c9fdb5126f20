"""`usage --json` against usage summed straight from the shared Claude Code and Codex files.

The expected figures are computed here from the raw JSON lines, without any of the product's
code: a Claude Code response is one `message.id` (its streamed pieces repeat the usage, the
output growing; the largest count of each kind is the response's), dated by its first piece;
a Codex response is one `token_count` event whose running total moved (Codex writes each
event twice), its `last_token_usage` split into uncached input and cached input. Days are UTC.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli

KINDS = ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens")


def _day(timestamp: str) -> str:
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return moment.astimezone(timezone.utc).date().isoformat()


def claude_code_responses(path: Path) -> list[tuple[str, dict[str, int]]]:
    """(UTC day, counts) of each API response in a Claude Code file."""
    folded: dict[str, dict[str, int]] = {}
    first: dict[str, str] = {}
    for raw in path.read_bytes().splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if entry.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        key = message.get("id") or entry["uuid"]
        counts = {
            "input_tokens": usage.get("input_tokens", 0),
            "cache_write_tokens": usage.get("cache_creation_input_tokens", 0),
            "cache_read_tokens": usage.get("cache_read_input_tokens", 0),
            "output_tokens": usage.get("output_tokens", 0),
        }
        if key in folded:
            folded[key] = {k: max(folded[key][k], counts[k]) for k in KINDS}
            first[key] = min(first[key], entry["timestamp"])
        else:
            folded[key], first[key] = counts, entry["timestamp"]
    return [(_day(first[key]), counts) for key, counts in folded.items()]


def codex_responses(path: Path) -> list[tuple[str, dict[str, int]]]:
    """(UTC day, counts) of each model request in a Codex rollout."""
    out = []
    previous_total = None
    for raw in path.read_bytes().splitlines():
        entry = json.loads(raw)
        payload = entry.get("payload") or {}
        if entry.get("type") != "event_msg" or payload.get("type") != "token_count" or not payload.get("info"):
            continue
        info = payload["info"]
        total = json.dumps(info.get("total_token_usage"), sort_keys=True)
        last = info.get("last_token_usage") or {}
        if total == previous_total or not last.get("input_tokens"):
            continue
        previous_total = total
        cached = last.get("cached_input_tokens", 0)
        out.append(
            (
                _day(entry["timestamp"]),
                {
                    "input_tokens": last["input_tokens"] - cached,
                    "cache_write_tokens": 0,
                    "cache_read_tokens": cached,
                    "output_tokens": last["output_tokens"],
                },
            )
        )
    return out


def _sum(responses: list[tuple[str, dict[str, int]]]) -> dict[str, int]:
    total = {k: 0 for k in KINDS}
    for _, counts in responses:
        for k in KINDS:
            total[k] += counts[k]
    return {**total, "responses": len(responses)}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    result = run_cli(capsys, *args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def _figures(row: dict[str, Any]) -> dict[str, int]:
    return {k: row[k] for k in (*KINDS, "responses")}


def test_usage_json_matches_the_files_summed_independently(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    files: dict[str, list[tuple[str, dict[str, int]]]] = {}
    for path in sorted((transcripts_dir / "claude-code").rglob("*.jsonl")):
        files[str(path.resolve())] = claude_code_responses(path)
    for path in sorted((transcripts_dir / "codex").rglob("*.jsonl")):
        files[str(path.resolve())] = codex_responses(path)
    session_of = {}
    for source in ("claude-code", "codex"):
        report = _json(capsys, "import", source, str(transcripts_dir / source), "--db", store_url)
        session_of.update({str(Path(f["path"]).resolve()): f["session"] for f in report["files"]})
    assert sorted(session_of) == sorted(files)

    by_session = {row["session"]: row for row in _json(capsys, "usage", "--by", "session", "--db", store_url)["rows"]}
    expected_sessions = {session_of[path]: _sum(responses) for path, responses in files.items() if responses}
    assert {sid: _figures(row) for sid, row in by_session.items()} == expected_sessions

    days: dict[str, list[tuple[str, dict[str, int]]]] = defaultdict(list)
    for responses in files.values():
        for day, counts in responses:
            days[day].append((day, counts))
    by_day = _json(capsys, "usage", "--by", "day", "--db", store_url)
    assert {row["day"]: _figures(row) for row in by_day["rows"]} == {day: _sum(r) for day, r in days.items()}
    everything = [r for responses in files.values() for r in responses]
    assert _figures(by_day["total"]) == _sum(everything)


def test_streamed_pieces_are_one_response_and_subagents_fold_into_their_parent(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    spotter = transcripts_dir / "claude-code" / "spotter"
    main_file = spotter / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    agent_file = next(spotter.rglob("subagents/*.jsonl"))
    pieces = sum(1 for raw in main_file.read_bytes().splitlines() if json.loads(raw).get("type") == "assistant")
    report = _json(capsys, "import", "claude-code", str(spotter), "--db", store_url)
    sessions = {Path(f["path"]).name: f["session"] for f in report["files"]}
    main, agent = sessions[main_file.name], sessions[agent_file.name]

    own = _json(capsys, "usage", "--by", "session", "--session", main, "--db", store_url)["rows"]
    assert [(r["session"], r["parent"]) for r in own] == [(main, None), (agent, main)]
    assert own[0]["responses"] == len(claude_code_responses(main_file)) < pieces

    folded = _json(capsys, "usage", "--by", "session", "--fold-subagents", "--db", store_url)["rows"]
    expected = _sum(claude_code_responses(main_file) + claude_code_responses(agent_file))
    assert {r["session"]: _figures(r) for r in folded if r["session"] == main} == {main: expected}
    assert agent not in {r["session"] for r in folded}
