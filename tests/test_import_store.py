"""Importing the shared real transcripts into the store, through the CLI and the API, on both engines.

Every expectation is counted here, independently, from the raw lines
(json.loads per line), never from the importers' own output:

- Claude Code: an entry with `type` in user/assistant/system/attachment and
  a `uuid` is one message of that type; a boundary is an entry with
  `subtype == "compact_boundary"`.
- Codex (the mapping documented in `sessionstore/importers/codex.py`): a
  `response_item` message is a message of its role (developer and system
  roles become `system`); a function/custom-tool/local-shell call is an
  assistant message, its `*_output` a user message; a `compacted` line is
  one system boundary plus one message per mapped item of its
  `replacement_history` (the `compaction` item is the user-typed summary),
  or, without a history, one summary message when its text is not empty.
  Reasoning, web-search and other items are not messages.
"""

from __future__ import annotations

import io
import json
import shutil
import uuid as uuid_mod
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.storage.read.history import boundaries
from sessionstore.interchange.importing import import_paths
from tests.conftest import TRANSCRIPTS
from tests.support.cli import Result, run_cli
from tests.support.validity import check_messages

CONVERSATION = ("user", "assistant", "system", "attachment")
CODEX_ROLES = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
CODEX_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
CODEX_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
SUBAGENT = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl"
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
TOOL_HEAVY = "claude-code/spotter/tool_heavy.jsonl"
TABLES = ("sessions", "messages", "source_lines", "imports", "view_entries", "compactions")


# ------------------------------------------------------------ independent counts


def entries(path: Path) -> list[dict[str, Any]]:
    """Every line that parses as a JSON object (bad lines are skipped, as a reader would)."""
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def claude_counts(path: Path) -> tuple[Counter[str], int]:
    """(messages per type, boundaries) of a Claude Code file, counted from its lines."""
    found = entries(path)
    counts = Counter(e["type"] for e in found if e.get("type") in CONVERSATION and e.get("uuid"))
    return counts, sum(1 for e in found if e.get("type") == "system" and e.get("subtype") == "compact_boundary")


def codex_item_type(item: dict[str, Any]) -> str | None:
    """The message type a Codex response item becomes, or None when it is not a message."""
    kind = item.get("type")
    if kind == "message":
        return CODEX_ROLES.get(str(item.get("role")))
    if kind in CODEX_CALLS:
        return "assistant"
    if kind in CODEX_OUTPUTS:
        return "user"
    return None


def codex_counts(path: Path) -> tuple[Counter[str], int]:
    """(messages per type, boundaries) of a Codex rollout, counted from its lines."""
    counts: Counter[str] = Counter()
    compacted = 0
    for e in entries(path):
        found = e.get("payload")
        payload: dict[str, Any] = found if isinstance(found, dict) else {}
        if e.get("type") == "response_item":
            counts.update(filter(None, [codex_item_type(payload)]))
        elif e.get("type") == "compacted":
            compacted += 1
            counts["system"] += 1
            history = payload.get("replacement_history")
            if isinstance(history, list):
                for item in history:
                    counts.update(filter(None, ["user" if item.get("type") == "compaction" else codex_item_type(item)]))
            elif str(payload.get("message") or "").strip():
                counts["user"] += 1
    return counts, compacted


def expected(path: Path) -> tuple[Counter[str], int]:
    """Per-type counts and boundaries of a shared file (Codex rollouts are named rollout-*)."""
    return codex_counts(path) if path.name.startswith("rollout-") else claude_counts(path)


def shared_files(root: Path, source: str) -> list[Path]:
    return sorted((root / source).rglob("*.jsonl"))


# ------------------------------------------------------------ CLI helpers


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    result = run_cli(capsys, *args)
    assert result.code == 0, f"sessionstore {' '.join(args)} -> {result.code}\n{result.err}"
    return result


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    return json.loads(cli(capsys, *args, "--json").out)


def stored_counts_cli(capsys: pytest.CaptureFixture[str], url: str, sid: str) -> Counter[str]:
    """Messages per type, read back through `export --format jsonl`."""
    out = cli(capsys, "export", sid, "--format", "jsonl", "--db", url).out
    return Counter(json.loads(line)["type"] for line in out.splitlines())


def row_counts(url: str) -> dict[str, int]:
    with SessionStore.open(url) as st:
        return {t: int(st.db.one(f"SELECT count(*) FROM {t}")[0]) for t in TABLES}


def by_path(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(f["path"]).resolve().relative_to(TRANSCRIPTS.resolve()).as_posix(): f for f in report["files"]}


# ------------------------------------------------------------ every shared file, CLI


def test_every_shared_transcript_through_the_cli(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    report = by_path(cli_json(capsys, "import", "claude-code", str(transcripts_dir / "claude-code"), "--db", store_url))
    report |= by_path(cli_json(capsys, "import", "codex", str(transcripts_dir / "codex"), "--db", store_url))
    files = shared_files(transcripts_dir, "claude-code") + shared_files(transcripts_dir, "codex")
    assert sorted(report) == sorted(f.relative_to(transcripts_dir).as_posix() for f in files)

    for path in files:
        name = path.relative_to(transcripts_dir).as_posix()
        row = report[name]
        counts, n_boundaries = expected(path)
        assert row["status"] == "imported", name
        assert stored_counts_cli(capsys, store_url, row["session"]) == counts, name
        assert row["messages_added"] == sum(counts.values()), name
        listed = cli_json(capsys, "history", row["session"], "--db", store_url)
        assert len(listed) == n_boundaries, name
        view = cli_json(capsys, "view", row["session"], "--db", store_url)
        assert check_messages(view["messages"]) == [], name
        if name.startswith("claude-code/"):
            out = tmp_path / "back.jsonl"
            cli(capsys, "export", row["session"], "--format", "claude-code", "-o", str(out), "--db", store_url)
            assert out.read_bytes() == path.read_bytes(), f"{name} not reproduced byte for byte"

    sessions = {s["id"]: s for s in cli_json(capsys, "sessions", "--limit", "100", "--db", store_url)}
    assert len(sessions) == len(files)
    assert sessions[report[SUBAGENT]["session"]]["parent_id"] == report[SPOTTER]["session"]
    assert all(s["parent_id"] is None for sid, s in sessions.items() if sid != report[SUBAGENT]["session"])

    again = by_path(cli_json(capsys, "import", "claude-code", str(transcripts_dir / "claude-code"), "--db", store_url))
    again |= by_path(cli_json(capsys, "import", "codex", str(transcripts_dir / "codex"), "--db", store_url))
    assert {f["status"] for f in again.values()} == {"unchanged"}
    assert all(f["lines_added"] == 0 and f["messages_added"] == 0 for f in again.values())
    after = {s["id"]: s for s in cli_json(capsys, "sessions", "--limit", "100", "--db", store_url)}
    assert {k: v["messages"] for k, v in after.items()} == {k: v["messages"] for k, v in sessions.items()}


def test_history_before_the_spotter_compaction(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    path = transcripts_dir / SPOTTER
    raw = entries(path)
    line_of = {e["uuid"]: i for i, e in enumerate(raw) if e.get("uuid")}
    boundary_at, boundary = next((i, e) for i, e in enumerate(raw) if e.get("subtype") == "compact_boundary")
    first_prompt = next(
        e for e in raw if e.get("type") == "user" and isinstance(e["message"]["content"], str) and not e.get("isMeta")
    )

    sid = cli_json(capsys, "import", "claude-code", str(path), "--db", store_url)["files"][0]["session"]
    shown = cli_json(capsys, "history", sid, "--boundary", "1", "--db", store_url)
    assert shown["boundary"]["boundary_uuid"] == boundary["uuid"]
    assert shown["boundary"]["trigger"] == boundary["compactMetadata"]["trigger"] == "auto"
    assert shown["boundary"]["pre_tokens"] == boundary["compactMetadata"]["preTokens"]
    assert check_messages(shown["messages"]) == []
    seen = [e["uuid"] for e in shown["entries"]]
    assert all(line_of[u] < boundary_at for u in seen), "only what was written before the compaction"
    assert seen[0] == first_prompt["uuid"] and seen[-1] == boundary["logicalParentUuid"]
    assert shown["summarized"] and {m["uuid"] for m in shown["summarized"]} <= set(seen)

    active = cli_json(capsys, "view", sid, "--db", store_url)
    assert active["entries"][0]["uuid"] == boundary["uuid"]
    assert not set(seen) & {e["uuid"] for e in active["entries"]}, "the compacted history left the active view"
    assert shown["tokens"] > active["tokens"]


# ------------------------------------------------------------ every shared file, API


def test_every_shared_transcript_through_the_api(store: SessionStore, transcripts_dir: Path) -> None:
    first = import_paths(store, [transcripts_dir / "claude-code"], source="claude-code")
    first += import_paths(store, [transcripts_dir / "codex"], source="codex")
    assert {r.status for r in first} == {"imported"}
    for result in first:
        path = Path(result.path)
        counts, n_boundaries = expected(path)
        session = store.get(result.session_id or "")
        assert Counter(m.type for m in session.transcript()) == counts, path
        assert len(boundaries(session)) == n_boundaries, path
        assert check_messages(session.active_view()) == [], path
        if result.source == "claude-code":
            out = io.BytesIO()
            export_claude_code(session, out)
            assert out.getvalue() == path.read_bytes(), path
    again = import_paths(store, [transcripts_dir / "claude-code", transcripts_dir / "codex"])
    assert {r.path: (r.session_id, r.status, r.lines_added) for r in again} == {
        r.path: (r.session_id, "unchanged", 0) for r in first
    }


# ------------------------------------------------------------ growth


def fresh_tail(source: Path, start_line: int, parent: str, session_id: str) -> bytes:
    """Lines `start_line`.. of `source` with fresh uuids, chained onto `parent`, as another session's lines."""
    renamed: dict[str, str] = {}
    out = []
    for raw in source.read_bytes().splitlines()[start_line - 1 :]:
        entry = json.loads(raw)
        if entry.get("uuid"):
            renamed[entry["uuid"]] = str(uuid_mod.uuid4())
            entry["uuid"] = renamed[entry["uuid"]]
        if "parentUuid" in entry:
            entry["parentUuid"] = renamed.get(entry["parentUuid"], parent)
        if "sessionId" in entry:
            entry["sessionId"] = session_id
        out.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
    return b"".join(out)


def test_a_grown_file_adds_only_its_new_lines(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "grown.jsonl"
    shutil.copyfile(transcripts_dir / FASTHOOKS, path)
    base = entries(path)
    sid = cli_json(capsys, "import", "claude-code", str(path), "--db", store_url)["files"][0]["session"]
    before = stored_counts_cli(capsys, store_url, sid)

    tail = fresh_tail(transcripts_dir / TOOL_HEAVY, 26, parent=base[-1]["uuid"], session_id=base[-1]["sessionId"])
    with open(path, "ab") as f:
        f.write(tail)
    grown_counts, _ = claude_counts(path)
    grown = cli_json(capsys, "import", "claude-code", str(path), "--db", store_url)["files"][0]
    assert grown["status"] == "grown" and grown["session"] == sid
    assert grown["lines_added"] == len(tail.splitlines())
    assert grown["messages_added"] == sum(grown_counts.values()) - sum(before.values())
    assert stored_counts_cli(capsys, store_url, sid) == grown_counts
    view = cli_json(capsys, "view", sid, "--db", store_url)
    assert check_messages(view["messages"]) == []
    assert view["entries"][-1]["uuid"] == json.loads(tail.splitlines()[-1])["uuid"], "the view reaches the new end"
    out = tmp_path / "back.jsonl"
    cli(capsys, "export", sid, "--format", "claude-code", "-o", str(out), "--db", store_url)
    assert out.read_bytes() == path.read_bytes()
    third = cli_json(capsys, "import", "claude-code", str(path), "--db", store_url)["files"][0]
    assert (third["status"], third["lines_added"]) == ("unchanged", 0)


# ------------------------------------------------------------ bad input


def bad_file(transcripts_dir: Path, tmp_path: Path) -> tuple[Path, dict[int, str]]:
    """A real file with a malformed line, an unknown entry type, invalid UTF-8 and a truncated last line.

    Returns the path and, per bad line number, a fragment its warning must hold.
    """
    lines = (transcripts_dir / FASTHOOKS).read_bytes().splitlines(keepends=True)
    inserts = {
        10: (b'{"type":"user","uuid":"broken", "message":\n', "malformed JSON"),
        20: (b'{"type":"hologram","uuid":"holo-1","parentUuid":null}\n', "unknown entry type 'hologram'"),
        30: (b'{"type":"user","uuid":"bad-utf8","message":{"role":"user","content":"caf\xe9"}}\n', "invalid UTF-8"),
    }
    out: list[bytes] = []
    bad: dict[int, str] = {}
    for raw in lines:
        number = len(out) + 1
        if number in inserts:
            out.append(inserts[number][0])
            bad[number] = inserts[number][1]
        out.append(raw)
    out.append(lines[1][: len(lines[1]) // 2])
    bad[len(out)] = "truncated last line"
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(out))
    return path, bad


def test_bad_lines_are_named_and_skipped(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    path, bad = bad_file(transcripts_dir, tmp_path)
    result = cli(capsys, "import", "claude-code", str(path), "--db", store_url)
    warnings = [line for line in result.err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == len(bad), result.err
    for number, fragment in bad.items():
        assert any(f"{path.resolve()}:{number}:" in w and fragment in w for w in warnings), (number, result.err)
    assert f"{len(bad)} warning(s); everything else was imported" in result.err

    again = cli_json(capsys, "import", "claude-code", str(path), "--db", store_url)
    assert again["files"][0]["status"] == "unchanged"
    sid = again["files"][0]["session"]
    assert stored_counts_cli(capsys, store_url, sid) == claude_counts(transcripts_dir / FASTHOOKS)[0]
    assert check_messages(cli_json(capsys, "view", sid, "--db", store_url)["messages"]) == []
    out = tmp_path / "back.jsonl"
    cli(capsys, "export", sid, "--format", "claude-code", "-o", str(out), "--db", store_url)
    assert out.read_bytes() == path.read_bytes(), "bad lines are kept raw too"


def test_json_report_counts_the_warnings(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    path, bad = bad_file(transcripts_dir, tmp_path)
    report = cli_json(capsys, "import", "claude-code", str(path), "--db", store_url)
    assert report["warnings"] == len(bad) == len(report["files"][0]["warnings"])
    assert report["files"][0]["messages_added"] == sum(claude_counts(transcripts_dir / FASTHOOKS)[0].values())


def test_strict_writes_nothing(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    cli(capsys, "import", "claude-code", str(transcripts_dir / TOOL_HEAVY), "--db", store_url)
    listed = cli_json(capsys, "sessions", "--db", store_url)
    counts = row_counts(store_url)
    path, _ = bad_file(transcripts_dir, tmp_path)
    result = run_cli(capsys, "import", "claude-code", str(path), "--strict", "--db", store_url)
    assert result.code == 2, result.err
    assert "--strict" in result.err and f"{path.resolve()}:" in result.err
    assert row_counts(store_url) == counts
    assert cli_json(capsys, "sessions", "--db", store_url) == listed


def test_a_message_nested_too_deep_is_kept_as_a_side_line(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    """A user entry whose tool result nests past the store's limit (and past the fast JSON parser's) stays raw."""
    lines = (transcripts_dir / TOOL_HEAVY).read_bytes().splitlines(keepends=True)
    number, entry = next(
        (i + 1, json.loads(raw)) for i, raw in enumerate(lines) if json.loads(raw).get("type") == "user"
    )
    entry["toolUseResult"] = json.loads("[" * 300 + "]" * 300)
    lines[number - 1] = json.dumps(entry).encode() + b"\n"
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"".join(lines))
    result = import_paths(store, [path], source="claude-code")[0]
    assert any(
        w.startswith(f"{path.resolve()}:{number}: kept as a side entry: metadata is nested deeper than 100")
        for w in result.warnings
    ), result.warnings
    counts, _ = claude_counts(path)
    assert result.messages_added == sum(counts.values()) - 1
    session = store.get(result.session_id or "")
    assert entry["uuid"] not in {m.uuid for m in session.transcript()}
    out = io.BytesIO()
    export_claude_code(session, out)
    assert out.getvalue() == path.read_bytes()
