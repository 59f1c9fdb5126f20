"""Import of real Claude Code transcripts and Codex rollouts, and of broken input.

The real files live in `../shared/transcripts` next to the repository (see its
SOURCES.md); the tests skip with a visible reason when that folder is absent.
Counts are made independently from the raw JSON lines, and every active
chain is checked with the independent Messages-API validity checker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sessionstore.interchange.importers import ImportPlan, detect_source, parse_file
from sessionstore.storage.core.types import StoredMessage, ViewEntry
from sessionstore.storage.records.view import to_api_messages
from tests.conftest import TRANSCRIPTS, absent, missing
from tests.support.validity import check_messages

REPO = Path(__file__).resolve().parents[1]
MISSING = f"real transcript corpus not found at {TRANSCRIPTS}"

CC_CONVERSATION = {"user", "assistant", "system", "attachment"}
CODEX_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
CODEX_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
SPOTTER_AGENT = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl"
TOOL_HEAVY = "claude-code/spotter/tool_heavy.jsonl"
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
VIEWER = "claude-code/claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
VIEWER_INIT = "claude-code/claude-code-viewer/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
CODEX_COMPACTED = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
CODEX_SMALL = "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"


def corpus(kind: str) -> list[Any]:
    """Every real file of one kind, or a single skipped parameter saying why."""
    if not TRANSCRIPTS.is_dir():
        return [absent("TRANSCRIPTS", MISSING)]
    return [pytest.param(p, id=str(p.relative_to(TRANSCRIPTS))) for p in sorted((TRANSCRIPTS / kind).rglob("*.jsonl"))]


def real(relative: str) -> Path:
    """The path of one real file; skips the test when the corpus is absent."""
    path = TRANSCRIPTS / relative
    if not path.is_file():
        missing("TRANSCRIPTS", MISSING if not TRANSCRIPTS.is_dir() else f"{path} not found")
    return path


_PLANS: dict[Path, ImportPlan] = {}


def plan_of(path: Path) -> ImportPlan:
    """Parsed once per test session (the real files are read-only)."""
    if path not in _PLANS:
        _PLANS[path] = parse_file(path)
    return _PLANS[path]


def raw_entries(path: Path) -> list[dict[str, Any]]:
    """The file's JSON objects, parsed here independently of the importer."""
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def messages_by_uuid(plan: ImportPlan) -> dict[str, dict[str, Any]]:
    return {line.message["uuid"]: line.message for line in plan.lines if line.message is not None}


def api_view(plan: ImportPlan) -> list[dict[str, Any]]:
    """The active chain as `to_api_messages` sends it."""
    messages = messages_by_uuid(plan)
    entries = []
    for position, uuid in enumerate(plan.active_chain):
        m = messages[uuid]
        stored = StoredMessage(
            seq=position,
            uuid=uuid,
            role=m["role"],
            type=m["type"],
            content=m["content"],
            subtype=m["subtype"],
            api_message_id=m["api_message_id"],
        )
        entries.append(ViewEntry(position=position, message=stored, content=m["content"], tokens=0))
    return to_api_messages(entries)


def line_of(plan: ImportPlan) -> dict[str, int]:
    return {line.message["uuid"]: line.line_no for line in plan.lines if line.message is not None}


# ---------------------------------------------------------------- every real file


@pytest.mark.parametrize("path", corpus("claude-code") + corpus("codex"))
def test_real_file_imports_cleanly(path: Path) -> None:
    plan = plan_of(path)
    assert [line for line in plan.lines if line.kind == "bad"] == []
    assert b"".join(line.raw for line in plan.lines) == path.read_bytes()
    physical = path.read_bytes().count(b"\n") + (0 if path.read_bytes().endswith(b"\n") else 1)
    assert max(line.line_no for line in plan.lines) == physical


@pytest.mark.parametrize("path", corpus("claude-code"))
def test_claude_code_message_counts_match_raw_json(path: Path) -> None:
    plan = plan_of(path)
    expected = Counter(e["type"] for e in raw_entries(path) if e.get("type") in CC_CONVERSATION)
    got = Counter(line.entry_type for line in plan.lines if line.kind == "message")
    assert got == expected
    boundaries = [e for e in raw_entries(path) if e.get("type") == "system" and e.get("subtype") == "compact_boundary"]
    assert len(plan.boundaries) == len(boundaries)
    assert [b.boundary_uuid for b in plan.boundaries] == [e["uuid"] for e in boundaries]


@pytest.mark.parametrize("path", corpus("codex"))
def test_codex_message_counts_match_raw_json(path: Path) -> None:
    expected: Counter[str] = Counter()
    for entry in raw_entries(path):
        if entry["type"] == "response_item":
            item = entry["payload"]
            if item["type"] == "message" or item["type"] in CODEX_CALLS | CODEX_OUTPUTS:
                expected[f"response_item:{item['type']}"] += 1
        elif entry["type"] == "compacted":
            expected["compacted"] += 1
            history = entry["payload"].get("replacement_history") or []
            mapped = [i for i in history if i["type"] in {"message", "compaction"} | CODEX_CALLS | CODEX_OUTPUTS]
            expected["compacted:replacement_history"] += len(mapped)
    plan = plan_of(path)
    got = Counter(line.entry_type for line in plan.lines if line.kind == "message")
    assert got == expected
    assert len(plan.boundaries) == expected["compacted"]


@pytest.mark.parametrize("path", corpus("claude-code") + corpus("codex"))
def test_active_chain_is_a_valid_api_request(path: Path) -> None:
    plan = plan_of(path)
    messages = messages_by_uuid(plan)
    assert plan.active_chain, "every real file has a view to resume"
    assert len(set(plan.active_chain)) == len(plan.active_chain)
    assert all(uuid in messages for uuid in plan.active_chain)
    assert check_messages(api_view(plan)) == []
    lines = line_of(plan)
    others = [lines[u] for u in plan.active_chain if messages[u]["role"] != "assistant"]
    assert others == sorted(others), "user and system messages keep their file order"
    responses = [messages[u]["api_message_id"] for u in plan.active_chain if messages[u]["role"] == "assistant"]
    runs = [r for i, r in enumerate(responses) if i == 0 or responses[i - 1] != r]
    assert len(runs) == len(set(runs)), "the pieces of one response sit together"


@pytest.mark.parametrize("path", corpus("claude-code") + corpus("codex"))
def test_boundary_views_before_are_valid(path: Path) -> None:
    plan = plan_of(path)
    messages = messages_by_uuid(plan)
    for boundary in plan.boundaries:
        assert boundary.view_before, "the view before a compaction is recoverable in these files"
        fake = _with_chain(plan, boundary.view_before)
        assert check_messages(api_view(fake)) == []
        assert set(boundary.summarized) <= set(boundary.view_before)
        assert messages[boundary.boundary_uuid]["subtype"] == "compact_boundary"
        assert boundary.summary_uuid is not None and messages[boundary.summary_uuid]["is_compact_summary"]
        assert plan.active_chain[0] == plan.boundaries[-1].boundary_uuid


def _with_chain(plan: ImportPlan, chain: list[str]) -> ImportPlan:
    return replace(plan, active_chain=chain)


# ---------------------------------------------------------------- specific files


def test_spotter_auto_compaction() -> None:
    path = real(SPOTTER)
    plan = plan_of(path)
    entries = raw_entries(path)
    by_uuid = {e["uuid"]: e for e in entries if "uuid" in e}
    (boundary,) = plan.boundaries
    raw_boundary = by_uuid[boundary.boundary_uuid]
    assert (boundary.trigger, boundary.pre_tokens, boundary.kind) == ("auto", 167094, "full")
    assert by_uuid[boundary.summary_uuid]["isCompactSummary"] is True
    assert plan.active_chain[:2] == [boundary.boundary_uuid, boundary.summary_uuid]
    assert boundary.view_before[-1] == raw_boundary["logicalParentUuid"]
    assert by_uuid[boundary.view_before[0]]["message"]["content"] == "Implement spotter-gqc"
    assert boundary.summarized == boundary.view_before
    lines = line_of(plan)
    assert all(lines[u] > lines[boundary.boundary_uuid] for u in plan.active_chain[1:])
    assert all(lines[u] < lines[boundary.boundary_uuid] for u in boundary.view_before)
    assert plan.title == "Implement spotter-gqc" and plan.model == "claude-opus-4-6"
    assert plan.source_session_id == "258c7280-ae70-4798-800f-63464d01a85d"
    assert plan.parent_source_session_id is None


def test_spotter_chain_walks_through_progress_entries() -> None:
    path = real(SPOTTER)
    plan = plan_of(path)
    entries = raw_entries(path)
    by_uuid = {e["uuid"]: e for e in entries if "uuid" in e}
    through_progress = [
        u for u in plan.active_chain if by_uuid.get(by_uuid[u].get("parentUuid") or "", {}).get("type") == "progress"
    ]
    assert through_progress, "newer files put progress entries inside the parent chain"
    last_main = [e for e in entries if e.get("type") in CC_CONVERSATION][-1]
    assert plan.active_chain[-1] == last_main["uuid"]
    side = Counter(line.entry_type for line in plan.lines if line.kind == "side")
    assert side["progress"] == 1333 and side["queue-operation"] == 6 and side["file-history-snapshot"] == 28


def test_spotter_streamed_pieces_keep_their_message_id() -> None:
    plan = plan_of(real(SPOTTER))
    assistant = [line.message for line in plan.lines if line.message and line.message["role"] == "assistant"]
    assert len(assistant) == 299
    assert len({m["api_message_id"] for m in assistant}) == 152
    assert all(m["usage"] for m in assistant)


def test_spotter_whitespace_pieces_stay_in_transcript_but_not_in_view() -> None:
    plan = plan_of(real(SPOTTER))
    blank = [
        line.message["uuid"]
        for line in plan.lines
        if line.message and line.message["content"] == [{"type": "text", "text": "\n\n"}]
    ]
    assert blank and not set(blank) & set(plan.active_chain)
    assert any("blank content" in w for w in plan.warnings)


def test_subagent_file_is_linked_to_its_parent_session() -> None:
    plan = plan_of(real(SPOTTER_AGENT))
    assert plan.parent_source_session_id == "258c7280-ae70-4798-800f-63464d01a85d"
    assert plan.source_session_id == "258c7280-ae70-4798-800f-63464d01a85d/agent-acompact-fffbd0"
    messages = messages_by_uuid(plan)
    assert [messages[u]["role"] for u in plan.active_chain] == ["user", "assistant"]
    assert messages[plan.active_chain[0]]["content"].startswith("Your task is to create a detailed summary")
    assert messages[plan.active_chain[0]]["metadata"]["agentId"] == "acompact-fffbd0"


def test_tool_heavy_parallel_calls_are_all_in_view() -> None:
    path = real(TOOL_HEAVY)
    plan = plan_of(path)
    entries = [e for e in raw_entries(path) if e.get("type") in CC_CONVERSATION]
    glob_use = next(
        e["uuid"] for e in entries if e["type"] == "assistant" and "toolu_01JJds55jYrYwd9TktNGndRY" in json.dumps(e)
    )
    glob_result = next(
        e["uuid"] for e in entries if e["type"] == "user" and "toolu_01JJds55jYrYwd9TktNGndRY" in json.dumps(e)
    )
    assert glob_use in plan.active_chain and glob_result in plan.active_chain
    local = [line.message for line in plan.lines if line.message and line.message["subtype"] == "local_command"]
    assert len(local) == 2 and all(m["role"] == "system" for m in local)


def test_fasthooks_manual_compaction() -> None:
    path = real(FASTHOOKS)
    plan = plan_of(path)
    (boundary,) = plan.boundaries
    assert (boundary.trigger, boundary.pre_tokens) == ("manual", 21558)
    messages = messages_by_uuid(plan)
    assert plan.active_chain[:2] == [boundary.boundary_uuid, boundary.summary_uuid]
    tail = [messages[u]["content"] for u in plan.active_chain[2:]]
    assert "<command-name>/compact</command-name>" in tail[1]
    assert tail[2].startswith("<local-command-stdout>")
    failing = [
        u
        for u in boundary.view_before
        if isinstance(messages[u]["content"], list)
        and any(b.get("is_error") for b in messages[u]["content"] if b.get("type") == "tool_result")
    ]
    assert len(failing) == 2
    stop_hooks = [u for u in boundary.view_before if messages[u]["subtype"] == "stop_hook_summary"]
    assert len(stop_hooks) == 5


def test_viewer_sidechains_stay_out_of_the_active_chain() -> None:
    path = real(VIEWER)
    plan = plan_of(path)
    sidechain = {e["uuid"] for e in raw_entries(path) if e.get("isSidechain")}
    assert len(sidechain) == 405
    assert not sidechain & set(plan.active_chain)
    imported = {line.message["uuid"] for line in plan.lines if line.message}
    assert sidechain <= imported, "sidechain entries are transcript messages, just not in the view"
    main = [e["uuid"] for e in raw_entries(path) if e.get("type") in CC_CONVERSATION and not e["isSidechain"]]
    assert plan.active_chain == main
    # The file's summary entry names a leaf outside the file: the title is the person's slash command.
    assert plan.title == "/orchestrator create TODO app by Next.js"
    assert plan.parent_source_session_id is None


def test_viewer_init_session_is_whole() -> None:
    path = real(VIEWER_INIT)
    plan = plan_of(path)
    assert plan.active_chain == [e["uuid"] for e in raw_entries(path)]
    assert plan.warnings == []


def test_codex_remote_compaction_replacement_history() -> None:
    path = real(CODEX_COMPACTED)
    plan = plan_of(path)
    (boundary,) = plan.boundaries
    compacted_no = next(i for i, e in enumerate(raw_entries(path), start=1) if e["type"] == "compacted")
    derived = [line for line in plan.lines if line.entry_type == "compacted:replacement_history"]
    assert len(derived) == 40 and all(line.raw == b"" and line.line_no == compacted_no for line in derived)
    replacement = [line.message["uuid"] for line in derived]
    assert plan.active_chain[: 1 + 40] == [boundary.boundary_uuid] + replacement
    assert boundary.summary_uuid == replacement[-1]
    summary = messages_by_uuid(plan)[boundary.summary_uuid]
    assert summary["is_compact_summary"] and "encrypted" in summary["content"]
    assert boundary.view_before[-1] == f"codex-{compacted_no - 2}"
    assert boundary.pre_tokens is not None and 100_000 < boundary.pre_tokens < 258_400
    assert plan.source_session_id == "019c8a59-e9dd-71f0-9ae3-4079fe9726a9"
    assert plan.model == "gpt-5.3-codex"


def test_codex_tool_calls_pair_and_carry_usage() -> None:
    path = real(CODEX_SMALL)
    plan = plan_of(path)
    messages = messages_by_uuid(plan)
    call = messages["codex-17"]
    assert call["content"][0]["type"] == "tool_use" and call["content"][0]["id"] == "call_OIMY41RetdVChp5U51mMLGOD"
    assert call["api_message_id"] == messages["codex-16"]["api_message_id"], "text and call are one response"
    assert call["usage"] == {"input_tokens": 42772 - 3456, "cache_read_input_tokens": 3456, "output_tokens": 204}
    result = messages["codex-19"]
    assert result["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_OIMY41RetdVChp5U51mMLGOD",
        "content": "[REDACTED_OUTPUT len=4215 sha=9a9d94de]",
    }
    developer = messages["codex-2"]
    assert (developer["role"], developer["type"], developer["subtype"]) == ("system", "system", "developer")
    assert [line.line_no for line in plan.lines] == sorted(line.line_no for line in plan.lines)
    assert plan.active_chain == [u for u in messages]


def test_detect_source() -> None:
    assert detect_source(real(CODEX_SMALL)) == "codex"
    assert detect_source(real(FASTHOOKS)) == "claude-code"


# ---------------------------------------------------------------- synthetic Claude Code files


def cc_entry(kind: str, uuid: str, parent: str | None, content: Any, ts: str, **extra: Any) -> dict[str, Any]:
    """A Claude Code conversation entry."""
    entry: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s-1",
        "cwd": "/w",
        "type": kind,
        "uuid": uuid,
        "timestamp": ts,
    }
    if kind in ("user", "assistant"):
        entry["message"] = {"role": kind, "content": content}
    else:
        entry["content"] = content
    entry.update(extra)
    return entry


def write_jsonl(path: Path, entries: list[Any], tail: bytes = b"") -> Path:
    lines = [e if isinstance(e, bytes) else json.dumps(e).encode() for e in entries]
    path.write_bytes(b"".join(line + b"\n" for line in lines) + tail)
    return path


def basic_cc() -> list[dict[str, Any]]:
    return [
        cc_entry("user", "u1", None, "hello", "2026-01-01T00:00:01Z"),
        cc_entry("assistant", "a1", "u1", [{"type": "text", "text": "hi"}], "2026-01-01T00:00:02Z"),
    ]


def test_malformed_line_is_bad_and_the_rest_imports(tmp_path: Path) -> None:
    entries: list[Any] = basic_cc()
    entries.insert(1, b'{"type": "user", "uuid": ')
    path = write_jsonl(tmp_path / "s.jsonl", entries)
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["message", "bad", "message"]
    assert plan.lines[1].warning.startswith(f"{path}:2: malformed JSON")
    assert plan.active_chain == ["u1", "a1"]
    assert b"".join(line.raw for line in plan.lines) == path.read_bytes()


def test_truncated_last_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "s.jsonl", basic_cc(), tail=b'{"type":"user","uuid":"u2","parentUuid":"a1","mes')
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["message", "message", "bad"]
    assert plan.lines[-1].warning.startswith(f"{path}:3: truncated last line")
    assert plan.lines[-1].raw.endswith(b'"mes')
    assert plan.active_chain == ["u1", "a1"]
    assert b"".join(line.raw for line in plan.lines) == path.read_bytes()


def test_complete_last_line_without_newline_imports(tmp_path: Path) -> None:
    last = json.dumps(cc_entry("user", "u2", "a1", "more", "2026-01-01T00:00:03Z")).encode()
    path = write_jsonl(tmp_path / "s.jsonl", basic_cc(), tail=last)
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["message"] * 3 and plan.warnings == []
    assert plan.active_chain == ["u1", "a1", "u2"]


def test_unknown_entry_type_is_a_side_line_with_a_warning(tmp_path: Path) -> None:
    entries: list[Any] = basic_cc()
    entries.insert(
        1, {"type": "brand-new-thing", "uuid": "x1", "parentUuid": "u1", "timestamp": "2026-01-01T00:00:01Z"}
    )
    entries[2]["parentUuid"] = "x1"
    path = write_jsonl(tmp_path / "s.jsonl", entries)
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["message", "side", "message"]
    assert plan.lines[1].warning == f"{path}:2: unknown entry type 'brand-new-thing', kept as a side line"
    assert plan.active_chain == ["u1", "a1"], "the walk passes through the side entry"


def test_invalid_utf8_is_a_bad_line(tmp_path: Path) -> None:
    broken = json.dumps(cc_entry("user", "u0", None, "caf\u00e9", "2026-01-01T00:00:00Z"), ensure_ascii=False).encode()
    broken = broken.replace("\u00e9".encode(), b"\xe9")
    entries: list[Any] = [broken] + basic_cc()
    path = write_jsonl(tmp_path / "s.jsonl", entries)
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["bad", "message", "message"]
    assert plan.lines[0].warning.startswith(f"{path}:1: invalid UTF-8")
    assert b"".join(line.raw for line in plan.lines) == path.read_bytes()


def test_blank_lines_and_crlf_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first, second = (json.dumps(e).encode() for e in basic_cc())
    path.write_bytes(first + b"\r\n\n" + second + b"\r\n")
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["message", "side", "message"]
    assert plan.warnings == [] and plan.active_chain == ["u1", "a1"]
    assert b"".join(line.raw for line in plan.lines) == path.read_bytes()


def test_interrupted_tool_use_is_left_out_of_the_view_only(tmp_path: Path) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "sleep 99"}}
    entries = basic_cc() + [
        cc_entry("user", "u2", "a1", "run it", "2026-01-01T00:00:03Z"),
        cc_entry("assistant", "a2", "u2", [use], "2026-01-01T00:00:04Z"),
        cc_entry(
            "user", "u3", "a2", [{"type": "text", "text": "[Request interrupted by user]"}], "2026-01-01T00:00:05Z"
        ),
        cc_entry("assistant", "a3", "u3", [{"type": "text", "text": "stopped"}], "2026-01-01T00:00:06Z"),
    ]
    entries[3]["message"]["id"] = "msg_2"
    path = write_jsonl(tmp_path / "s.jsonl", entries)
    plan = parse_file(path)
    assert plan.active_chain == ["u1", "a1", "u2", "u3", "a3"]
    assert [line.kind for line in plan.lines] == ["message"] * 6
    assert any(w.startswith(f"{path}:4: a2 left out of the active view: tool_use without") for w in plan.warnings)
    assert check_messages(api_view(plan)) == []


def test_pending_tool_use_at_the_end_stays(tmp_path: Path) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    entries = basic_cc() + [
        cc_entry("user", "u2", "a1", "run it", "2026-01-01T00:00:03Z"),
        cc_entry("assistant", "a2", "u2", [use], "2026-01-01T00:00:04Z"),
    ]
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", entries))
    assert plan.active_chain[-1] == "a2"
    assert check_messages(api_view(plan), allow_pending_last=True) == []


def test_leading_assistant_and_orphan_result_are_left_out(tmp_path: Path) -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "ok"}
    entries = [
        cc_entry("assistant", "a0", "missing-parent", [{"type": "text", "text": "resumed"}], "2026-01-01T00:00:01Z"),
        cc_entry("user", "u1", "a0", [result], "2026-01-01T00:00:02Z"),
        cc_entry("user", "u2", "u1", "go on", "2026-01-01T00:00:03Z"),
        cc_entry("assistant", "a2", "u2", [{"type": "text", "text": "ok"}], "2026-01-01T00:00:04Z"),
    ]
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", entries))
    assert plan.active_chain == ["u2", "a2"]
    assert len([w for w in plan.warnings if "left out of the active view" in w]) == 2


def test_latest_leaf_wins_and_dead_branches_stay_lines(tmp_path: Path) -> None:
    entries = basic_cc() + [
        cc_entry("user", "old", "a1", "first try", "2026-01-01T00:00:03Z"),
        cc_entry("assistant", "old-a", "old", [{"type": "text", "text": "x"}], "2026-01-01T00:00:04Z"),
        cc_entry("user", "new", "a1", "second try", "2026-01-01T00:00:05Z"),
        cc_entry("assistant", "new-a", "new", [{"type": "text", "text": "y"}], "2026-01-01T00:00:06Z"),
        cc_entry(
            "assistant",
            "err",
            "new-a",
            [{"type": "text", "text": "API Error"}],
            "2026-01-01T00:00:07Z",
            isApiErrorMessage=True,
        ),
    ]
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", entries))
    assert plan.active_chain == ["u1", "a1", "new", "new-a"]
    assert {"old", "old-a", "err"} <= set(messages_by_uuid(plan))


def compaction_entries(summary_parent_is_tail: bool) -> list[dict[str, Any]]:
    """u1 a1 u2 a2 | boundary (keeps u2..a2) summary | u3 a3."""
    segment = {"headUuid": "u2", "anchorUuid": "sum", "tailUuid": "a2"}
    boundary = cc_entry(
        "system",
        "b1",
        None,
        "Conversation compacted",
        "2026-01-01T00:01:00Z",
        subtype="compact_boundary",
        logicalParentUuid="a2",
        compactMetadata={"trigger": "manual", "preTokens": 1234, "preservedSegment": segment},
    )
    return basic_cc() + [
        cc_entry("user", "u2", "a1", "keep me", "2026-01-01T00:00:03Z"),
        cc_entry("assistant", "a2", "u2", [{"type": "text", "text": "kept"}], "2026-01-01T00:00:04Z"),
        boundary,
        cc_entry("user", "sum", "b1", "Summary: hello/hi", "2026-01-01T00:01:00Z", isCompactSummary=True),
        cc_entry("user", "u3", "a2" if summary_parent_is_tail else "sum", "next", "2026-01-01T00:01:05Z"),
        cc_entry("assistant", "a3", "u3", [{"type": "text", "text": "done"}], "2026-01-01T00:01:06Z"),
    ]


@pytest.mark.parametrize("linked_to_tail", [True, False])
def test_preserved_segment_is_relinked_after_the_summary(tmp_path: Path, linked_to_tail: bool) -> None:
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", compaction_entries(linked_to_tail)))
    assert plan.active_chain == ["b1", "sum", "u2", "a2", "u3", "a3"]
    (boundary,) = plan.boundaries
    assert boundary.preserved_segment == {"head_uuid": "u2", "anchor_uuid": "sum", "tail_uuid": "a2"}
    assert boundary.view_before == ["u1", "a1", "u2", "a2"]
    assert boundary.summarized == ["u1", "a1"]
    assert (boundary.trigger, boundary.pre_tokens, boundary.summary_uuid) == ("manual", 1234, "sum")
    assert check_messages(api_view(plan)) == []


def test_each_boundary_keeps_the_view_it_replaced(tmp_path: Path) -> None:
    def boundary(uuid: str, logical: str, ts: str) -> dict[str, Any]:
        return cc_entry(
            "system",
            uuid,
            None,
            "Conversation compacted",
            ts,
            subtype="compact_boundary",
            logicalParentUuid=logical,
            compactMetadata={"trigger": "auto", "preTokens": 100},
        )

    def text(value: str) -> list[dict[str, str]]:
        return [{"type": "text", "text": value}]

    entries = basic_cc() + [
        boundary("b1", "a1", "2026-01-01T00:01:00Z"),
        cc_entry("user", "s1", "b1", "summary one", "2026-01-01T00:01:00Z", isCompactSummary=True),
        cc_entry("user", "u2", "s1", "more", "2026-01-01T00:01:01Z"),
        cc_entry("assistant", "a2", "u2", text("ok"), "2026-01-01T00:01:02Z"),
        boundary("b2", "a2", "2026-01-01T00:02:00Z"),
        cc_entry("user", "s2", "b2", "summary two", "2026-01-01T00:02:00Z", isCompactSummary=True),
        cc_entry("user", "u3", "s2", "last", "2026-01-01T00:02:01Z"),
        cc_entry("assistant", "a3", "u3", text("done"), "2026-01-01T00:02:02Z"),
    ]
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", entries))
    assert plan.active_chain == ["b2", "s2", "u3", "a3"]
    first, second = plan.boundaries
    assert (first.summary_uuid, first.view_before) == ("s1", ["u1", "a1"])
    assert (second.summary_uuid, second.view_before) == ("s2", ["b1", "s1", "u2", "a2"])
    assert second.summarized == second.view_before


def test_oversized_metadata_values_are_left_out(tmp_path: Path) -> None:
    """On a line over 4 KiB, a value whose JSON (a string: its length) is over 4096 characters is left out."""
    spaced_over = {f"k{i}": i for i in range(340)}  # compact JSON under the limit, json.dumps' spacing over it
    assert len(json.dumps(spaced_over, separators=(",", ":"))) <= 4096 < len(json.dumps(spaced_over))
    extra = {
        "s_at_limit": "x" * 4096,
        "s_over": "x" * 4097,
        "outer_string_over": {"file": {"content": "y" * 5000}},
        "deep_string_over": [[["z" * 5000]]],
        "escapes_over": ["\n" * 2100],
        "spaced_over": spaced_over,
        "spaced_under": {f"k{i}": i for i in range(330)},
        "number": 12345,
    }
    expected = [
        k
        for k, v in extra.items()
        if len(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else "")
        > 4096
    ]
    assert expected == ["s_over", "outer_string_over", "deep_string_over", "escapes_over", "spaced_over"]
    entry = cc_entry("user", "u1", None, "hello", "2026-01-01T00:00:01Z", **extra)
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", [entry]))
    message = plan.lines[0].message
    assert message is not None
    assert message["metadata"]["omitted"] == expected
    assert {k for k in extra if k in message["metadata"]} == set(extra) - set(expected)


def test_lines_past_the_fast_parser_decode_as_json_does(tmp_path: Path) -> None:
    """Lone surrogate escapes and very deep values are still read (by json.loads), as before."""
    entries: list[Any] = basic_cc()
    entries[0]["note"] = "\ud800"
    entries.insert(1, b'{"type":"progress","uuid":"p1","parentUuid":"u1","data":' + b"[" * 300 + b"]" * 300 + b"}")
    entries[2]["parentUuid"] = "p1"
    path = write_jsonl(tmp_path / "s.jsonl", entries)
    plan = parse_file(path)
    assert [line.kind for line in plan.lines] == ["message", "side", "message"] and plan.warnings == []
    assert plan.lines[0].message is not None and plan.lines[0].message["metadata"]["note"] == "\ud800"
    assert plan.active_chain == ["u1", "a1"]


def test_attachment_entries_are_user_messages(tmp_path: Path) -> None:
    attachment = {
        "type": "attachment",
        "uuid": "att",
        "parentUuid": "a1",
        "timestamp": "2026-01-01T00:00:03Z",
        "attachment": {"type": "file", "content": "contents of notes.md"},
    }
    entries: list[Any] = basic_cc() + [
        attachment,
        cc_entry("assistant", "a2", "att", [{"type": "text", "text": "read"}], "2026-01-01T00:00:04Z"),
    ]
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", entries))
    message = messages_by_uuid(plan)["att"]
    assert (message["role"], message["type"], message["content"]) == ("user", "attachment", "contents of notes.md")
    assert message["metadata"]["attachment_type"] == "file"
    assert plan.active_chain == ["u1", "a1", "att", "a2"]


def test_unknown_block_type_becomes_a_side_line(tmp_path: Path) -> None:
    entries = basic_cc()
    entries[1]["message"]["content"] = [{"type": "hologram", "data": 1}]
    plan = parse_file(write_jsonl(tmp_path / "s.jsonl", entries))
    assert [line.kind for line in plan.lines] == ["message", "side"]
    assert "unknown type 'hologram'" in (plan.lines[1].warning or "")


# ---------------------------------------------------------------- synthetic Codex files


def codex_line(kind: str, payload: dict[str, Any], ts: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload}


def codex_basic() -> list[Any]:
    return [
        codex_line("session_meta", {"id": "sess-1", "cwd": "/w"}),
        codex_line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
        ),
        codex_line(
            "response_item", {"type": "function_call", "name": "shell", "arguments": '{"cmd": "ls"}', "call_id": "c1"}
        ),
        codex_line("response_item", {"type": "function_call_output", "call_id": "c1", "output": "a b"}),
        codex_line(
            "response_item",
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a and b"}]},
        ),
    ]


def test_codex_bad_lines(tmp_path: Path) -> None:
    entries = codex_basic()
    entries.insert(2, b"{not json")
    entries.insert(3, codex_line("future_line", {}))
    entries.insert(4, b'{"type": "event_msg", "payload": {"type": "x", "text": "\xff"}}')
    path = write_jsonl(tmp_path / "rollout-x.jsonl", entries, tail=b'{"timestamp": "2026')
    plan = parse_file(path)
    kinds = [(line.line_no, line.kind) for line in plan.lines]
    assert kinds == [
        (1, "side"),
        (2, "message"),
        (3, "bad"),
        (4, "side"),
        (5, "bad"),
        (6, "message"),
        (7, "message"),
        (8, "message"),
        (9, "bad"),
    ]
    assert plan.lines[3].warning == f"{path}:4: unknown rollout line type 'future_line', kept as a side line"
    assert "invalid UTF-8" in (plan.lines[4].warning or "") and "truncated" in (plan.lines[8].warning or "")
    assert b"".join(line.raw for line in plan.lines) == path.read_bytes()
    assert check_messages(api_view(plan)) == []


def test_codex_unanswered_call_left_out_unless_pending(tmp_path: Path) -> None:
    entries = codex_basic() + [
        codex_line(
            "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}
        ),
        codex_line("response_item", {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"}),
        codex_line(
            "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "stop"}]}
        ),
        codex_line(
            "response_item",
            {"type": "local_shell_call", "call_id": "c3", "action": {"type": "exec", "command": ["ls"]}},
        ),
    ]
    plan = parse_file(write_jsonl(tmp_path / "rollout-y.jsonl", entries))
    assert "codex-7" not in plan.active_chain and plan.active_chain[-1] == "codex-9"
    assert messages_by_uuid(plan)["codex-9"]["content"][0]["input"] == {"type": "exec", "command": ["ls"]}
    assert check_messages(api_view(plan)) == []


def test_codex_local_compaction_with_summary_message(tmp_path: Path) -> None:
    entries = codex_basic() + [
        codex_line("compacted", {"message": "We listed files a and b."}),
        codex_line(
            "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}
        ),
    ]
    plan = parse_file(write_jsonl(tmp_path / "rollout-z.jsonl", entries))
    (boundary,) = plan.boundaries
    # No replacement history: Codex rebuilds the history from the typed user messages, then the summary.
    assert plan.active_chain == ["codex-6", "codex-2", "codex-6-0", "codex-7"]
    assert [w for w in plan.warnings if "without a replacement history" in w and ":6:" in w]
    assert boundary.summary_uuid == "codex-6-0"
    assert boundary.view_before == ["codex-2", "codex-3", "codex-4", "codex-5"]
    assert messages_by_uuid(plan)["codex-6-0"]["content"] == "We listed files a and b."


def test_codex_legacy_items_without_payload(tmp_path: Path) -> None:
    entries: list[Any] = [
        {"id": "legacy-1", "timestamp": "2025-05-01T00:00:00Z", "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
    ]
    plan = parse_file(write_jsonl(tmp_path / "rollout-2025-05-01-legacy.jsonl", entries))
    assert plan.source == "codex" and plan.source_session_id == "legacy-1"
    assert plan.active_chain == ["codex-3", "codex-4"] and plan.warnings == []


# ---------------------------------------------------------------- memory


MEMORY_PROBE = textwrap.dedent(
    """
    import re, sys
    from sessionstore.interchange.importers import open_import

    def peak_mb():
        status = open("/proc/self/status").read()
        return int(re.search(r"VmHWM:\\s+(\\d+)", status).group(1)) // 1024

    importer = open_import(sys.argv[1])
    before = peak_mb()
    count = sum(1 for _ in importer.lines())
    plan = importer.plan()
    streamed = peak_mb()
    whole = open(sys.argv[1], "rb").read()
    print(count, len(plan.active_chain), streamed - before, peak_mb() - before)
    """
)


def test_streaming_import_memory_stays_bounded(tmp_path: Path) -> None:
    if not Path("/proc/self/status").is_file():
        pytest.skip("peak RSS is read from /proc/self/status (Linux only)")
    path = tmp_path / "big.jsonl"
    big_output = "x" * (2 << 20)
    with path.open("wb") as out:
        parent = None
        for i in range(40):
            use_id = f"toolu_{i}"
            for entry in (
                cc_entry("user", f"u{i}", parent, f"step {i}", f"2026-01-01T00:{i:02d}:00Z"),
                cc_entry(
                    "assistant",
                    f"a{i}",
                    f"u{i}",
                    [{"type": "tool_use", "id": use_id, "name": "Read", "input": {}}],
                    f"2026-01-01T00:{i:02d}:01Z",
                ),
                cc_entry(
                    "user",
                    f"r{i}",
                    f"a{i}",
                    [{"type": "tool_result", "tool_use_id": use_id, "content": big_output}],
                    f"2026-01-01T00:{i:02d}:02Z",
                    toolUseResult={"stdout": big_output},
                ),
            ):
                out.write(json.dumps(entry).encode() + b"\n")
            parent = f"r{i}"
    size_mb = path.stat().st_size >> 20
    assert size_mb >= 150
    run = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(path)], cwd=REPO, capture_output=True, text=True, check=True
    )
    lines, chain, growth_mb, control_mb = (int(v) for v in run.stdout.split())
    assert (lines, chain) == (120, 120)
    assert control_mb >= size_mb // 2, "the probe sees a whole-file read (control)"
    assert growth_mb < 48, f"streaming a {size_mb} MB file grew peak RSS by {growth_mb} MB"
