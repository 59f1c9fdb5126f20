"""The extractive summarizer: deterministic, quoted from the entries, compact."""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from sessionstore.compaction.prompt import SUMMARY_SECTIONS, strip_analysis
from sessionstore.compaction.summarizers.base import Summarizer
from sessionstore.compaction.summarizers.extractive import (
    ExtractiveSummarizer,
    budget_user_messages,
    estimate_tokens,
    outcome_of,
)
from sessionstore.storage.core.types import StoredMessage, ViewEntry
from tests.conftest import TRANSCRIPTS as SHARED
from tests.conftest import absent
from tests.support.convo import Convo, text, thinking, tool_result, tool_use

TRANSCRIPTS = SHARED / "claude-code"
FILE_TOOLS = {"Read", "Edit", "Write", "MultiEdit", "NotebookEdit"}


def sections(summary: str) -> dict[str, str]:
    """The summary's section bodies keyed by section name, asserting their order."""
    pattern = re.compile(r"^(\d)\. ([^:\n]+):$", re.MULTILINE)
    headings = list(pattern.finditer(summary))
    assert [h.group(2) for h in headings] == list(SUMMARY_SECTIONS)
    assert [int(h.group(1)) for h in headings] == list(range(1, 10))
    bodies: dict[str, str] = {}
    for k, heading in enumerate(headings):
        end = headings[k + 1].start() if k + 1 < len(headings) else len(summary)
        bodies[heading.group(2)] = summary[heading.end() : end].strip()
    return bodies


def worked_session() -> list[ViewEntry]:
    """A small session exercising every source the summary reads."""
    c = Convo()
    c.user(
        "This session is being continued from a previous conversation.\n\n"
        "1. Primary Request and Intent:\nBuild a caching HTTP fetcher.\n\n"
        "2. Key Technical Concepts:\n- requests\n\n"
        "5. Problem Solving:\nChose requests over urllib for retries.\n\n"
        "6. All User Messages:\n- build the fetcher",
        is_compact_summary=True,
    )
    c.user("Please add caching to the fetcher.\nKeep it in memory.")
    c.user("Caveat: local command output follows.", is_meta=True)
    c.add("user", "<file contents of README>", type="attachment")
    c.assistant([thinking("plan")], "r1")
    c.assistant([tool_use("t1", "Read", file_path="/src/fetch.py")], "r1")
    c.assistant(
        [
            tool_use(
                "t2",
                "TodoWrite",
                todos=[
                    {"content": "Add cache", "status": "pending", "activeForm": "Adding cache"},
                ],
            )
        ],
        "r1",
    )
    c.user([tool_result("t1", "def fetch(url): ..."), tool_result("t2", "Todos updated")])
    c.assistant(
        [
            tool_use("t3", "Edit", file_path="/src/fetch.py", old_string="a", new_string="b"),
            tool_use("t4", "Write", file_path="/src/cache.py", content="CACHE = {}"),
            tool_use("t5", "NotebookEdit", notebook_path="/nb/explore.ipynb", new_source="x"),
        ],
        "r2",
    )
    c.user([tool_result("t3", "updated"), tool_result("t4", "created"), tool_result("t5", "ok")])
    c.assistant([tool_use("t6", "Bash", command="pytest -q")], "r3")
    c.user(
        [
            tool_result(
                "t6",
                "Exit code 1\nFAILED tests/test_cache.py::test_ttl - AssertionError\n"
                "E  assert 1 == 2\nsecret fourth line",
                is_error=True,
            )
        ]
    )
    c.assistant([tool_use("t7", "Bash", command="ruff check .")], "r4")
    c.user([tool_result("t7", "All checks passed!")])
    c.assistant([tool_use("t8", "Bash", command="make build")], "r5")
    c.user([tool_result("t8", "Exit code 2\nmake: *** [build] Error 2")])
    c.assistant(
        [
            tool_use(
                "t9",
                "apply_patch",
                input=(
                    "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n"
                    "*** Add File: src/new.rs\n+fn x() {}\n*** End Patch"
                ),
            )
        ],
        "r6",
    )
    c.user([tool_result("t9", "Done")])
    c.user("Also make the TTL configurable.")
    c.assistant(
        [
            tool_use(
                "t10",
                "TodoWrite",
                todos=[
                    {"content": "Add cache", "status": "completed", "activeForm": "Adding cache"},
                    {
                        "content": "Make TTL configurable",
                        "status": "in_progress",
                        "activeForm": "Making TTL",
                    },
                    {
                        "content": "Document the option",
                        "status": "pending",
                        "activeForm": "Documenting",
                    },
                ],
            )
        ],
        "r7",
    )
    c.user([tool_result("t10", "Todos updated")])
    c.assistant([text("Now wiring the TTL option into the CLI.")], "r8")
    c.assistant([tool_use("t11", "Bash", command="python -m fetcher --ttl 5")], "r8")
    return c.entries


def test_protocol_and_raw_shape() -> None:
    """It is a Summarizer; text is the <summary> body of raw."""
    summarizer = ExtractiveSummarizer()
    assert isinstance(summarizer, Summarizer)
    assert summarizer.name == "extractive"
    result = summarizer.summarize(worked_session())
    assert result.raw.startswith("<analysis>extractive</analysis><summary>")
    assert result.raw.endswith("</summary>")
    assert strip_analysis(result.raw) == result.text
    assert result.text.startswith("1. Primary Request and Intent:")


def test_deterministic() -> None:
    """Same entries, same summary, whichever instance and however often."""
    entries = worked_session()
    first = ExtractiveSummarizer().summarize(entries)
    second = ExtractiveSummarizer().summarize(list(entries))
    assert first == second
    assert ExtractiveSummarizer().summarize(entries, truncated=True).text != first.text


def test_each_section_comes_from_its_source() -> None:
    """Requests, ledger, errors, carried summary, users, todos, current work, next step."""
    body = sections(ExtractiveSummarizer().summarize(worked_session(), custom_instructions="focus on tests").text)
    intent = body["Primary Request and Intent"]
    assert "Build a caching HTTP fetcher." in intent
    assert "Please add caching to the fetcher." in intent
    assert "Also make the TTL configurable." in intent
    assert "focus on tests" in intent
    assert "Tools used: Bash ×4" in body["Key Technical Concepts"]
    files = body["Files and Code Sections"]
    assert "- /src/fetch.py: read, edited" in files
    assert "- /src/cache.py: written" in files
    assert "- /nb/explore.ipynb: edited" in files
    assert "- src/lib.rs: edited" in files
    assert "- src/new.rs: written" in files
    assert "- `pytest -q` → failed (exit 1)" in files
    assert "- `ruff check .` → ok" in files
    assert "- `make build` → exit 2" in files
    assert "- `python -m fetcher --ttl 5` → no result" in files
    errors = body["Errors and Fixes"]
    assert "FAILED tests/test_cache.py::test_ttl - AssertionError" in errors
    assert "AssertionError / E  assert 1 == 2" in errors
    assert "secret fourth line" not in errors
    assert "make: *** [build] Error 2" in errors
    assert "ruff" not in errors
    assert "Chose requests over urllib for retries." in body["Problem Solving"]
    users = body["All User Messages"]
    assert users.index("Also make the TTL configurable.") < users.index("Please add caching")
    assert "Please add caching to the fetcher.\nKeep it in memory." in users
    assert "Caveat" not in users and "README" not in users and "previous conversation" not in users
    pending = body["Pending Tasks"]
    assert "[in_progress] Make TTL configurable" in pending
    assert "[pending] Document the option" in pending
    assert "Add cache" not in pending
    assert "Now wiring the TTL option into the CLI." in body["Current Work"]
    assert body["Optional Next Step"] == "Continue with: Make TTL configurable"


def test_empty_view_still_has_nine_sections() -> None:
    """No entries: every section present, each saying there is nothing."""
    body = sections(ExtractiveSummarizer().summarize([]).text)
    assert body["All User Messages"] == "None."
    assert body["Pending Tasks"] == "No todo list recorded."


def test_exit_status_comes_from_results_only() -> None:
    """is_error → failed, "Exit code N" → N, otherwise ok; never guessed."""
    assert outcome_of(tool_result("x", "boom", is_error=True)).status == "failed"
    assert outcome_of(tool_result("x", "Exit code 127\nnot found", is_error=True)).status == "failed (exit 127)"
    assert outcome_of(tool_result("x", "Exit code 3")).status == "exit 3"
    assert outcome_of(tool_result("x", "Process exited with code 0")).status == "exit 0"
    assert outcome_of(tool_result("x", "all good")).status == "ok"
    block = {"type": "tool_result", "tool_use_id": "x", "content": [text("Exit code 4")]}
    assert outcome_of(block).status == "exit 4"


def test_status_survives_a_cleared_result() -> None:
    """A microcompacted (replaced) result still reports the recorded exit status."""
    c = Convo()
    c.user("run it")
    c.assistant([tool_use("b1", "Bash", command="npm test")], "a1")
    result = c.user([tool_result("b1", "Exit code 1\nnpm ERR! test failed", is_error=True)])
    cleared = [tool_result("b1", "[Old tool result content cleared]")]
    c.entries[-1] = dataclasses.replace(result, content=cleared, replaced=True)
    summary = ExtractiveSummarizer().summarize(c.entries).text
    assert "`npm test` → failed (exit 1)" in summary


def test_user_message_budget_cuts_oldest_to_first_line() -> None:
    """Newest messages verbatim within 20,000 tokens; older ones cut to their first line."""
    messages = [f"request number {k:02d}\n" + " ".join([f"detail {k:02d}"] * 800) for k in range(40)]
    per = estimate_tokens(messages[0])
    kept = budget_user_messages(messages)
    verbatim = 20_000 // per
    assert kept[:verbatim] == messages[::-1][:verbatim]
    assert verbatim == 9
    assert kept[verbatim:] == [f"request number {k:02d} […]" for k in range(39 - verbatim, -1, -1)]
    assert budget_user_messages(["short", "one line"], budget=1) == ["one line", "short"]
    assert budget_user_messages(["aaaa\nbbbb", "cccc"], budget=0) == ["cccc", "aaaa […]"]
    c = Convo()
    for message in messages:
        c.user(message)
        c.assistant("noted")
    users = sections(ExtractiveSummarizer().summarize(c.entries).text)["All User Messages"]
    assert messages[-1] in users and messages[0] not in users
    assert "- request number 00 […]" in users


def tool_heavy_session(rounds: int, seed: int = 7) -> tuple[list[ViewEntry], list[str], set[str]]:
    """A generated long tool-heavy session: (entries, user messages, file paths)."""
    rng = random.Random(seed)
    c = Convo()
    paths = [f"/repo/pkg{d}/module_{k}.py" for d in range(8) for k in range(20)]
    users: list[str] = []
    touched: set[str] = set()

    def say(message: str) -> None:
        """Record a user message and append it."""
        users.append(message)
        c.user(message)

    say("Refactor the package layout and keep the tests green.")
    for turn in range(rounds):
        api = f"resp_{turn}"
        kind = rng.choice(["read", "read", "edit", "write", "bash", "bash", "grep"])
        use_id = f"tu_{turn}"
        path = rng.choice(paths)
        c.assistant([thinking("considering the next step " * 5)], api)
        if kind == "read":
            call, output = (
                tool_use(use_id, "Read", file_path=path),
                "\n".join(f"{n}\tdef function_{n}(arg): return arg * {n}" for n in range(rng.randint(40, 120))),
            )
        elif kind == "edit":
            call, output = (
                tool_use(use_id, "Edit", file_path=path, old_string="x" * 200, new_string="y" * 200),
                (f"The file {path} has been updated. Here's the result:\n" + "  code line\n" * 40),
            )
        elif kind == "write":
            call, output = (
                tool_use(use_id, "Write", file_path=path, content="z = 1\n" * 150),
                f"File created at {path}",
            )
        elif kind == "bash":
            call = tool_use(use_id, "Bash", command=f"pytest tests/test_{turn % 30}.py -q")
            output = "\n".join(f"tests/test_x.py::test_{n} PASSED" for n in range(60))
        else:
            call, output = tool_use(use_id, "Grep", pattern=f"symbol_{turn}"), "\n".join(paths[:40])
        if kind in ("read", "edit", "write"):
            touched.add(path)
        c.assistant([call], api)
        failing = kind == "bash" and rng.random() < 0.2
        if failing:
            output = "Exit code 1\n" + output
        c.user([tool_result(use_id, output, is_error=failing)])
        if turn % 25 == 24:
            say(f"Checkpoint {turn}: please also handle case {rng.randint(0, 999)} in module {turn % 8}.")
    return c.entries, users, touched


def test_large_tool_heavy_session_is_compact_and_complete() -> None:
    """2,000+ entries: ≥85% smaller (in fact <10%), every user message and file present."""
    entries, users, paths = tool_heavy_session(660)
    assert len(entries) >= 2_000
    view_tokens = sum(e.tokens for e in entries)
    summary = ExtractiveSummarizer().summarize(entries).text
    assert estimate_tokens(summary) < 0.10 * view_tokens
    for message in users:
        assert message in summary
    for path in paths:
        assert f"- {path}: " in summary
    assert "Commands run, last 40 of" in summary


def _load_transcript(path: Path) -> list[ViewEntry]:
    """User/assistant lines of a Claude Code JSONL file as view entries."""
    entries: list[ViewEntry] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record: dict[str, Any] = json.loads(line)
        message = record.get("message")
        if record.get("type") not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content", "")
        stored = StoredMessage(
            seq=len(entries),
            uuid=str(record.get("uuid", len(entries))),
            role=str(message.get("role", record["type"])),
            type=str(record["type"]),
            content=content,
            api_message_id=message.get("id") if record["type"] == "assistant" else None,
            is_meta=bool(record.get("isMeta")),
            is_compact_summary=bool(record.get("isCompactSummary")),
            tokens=len(json.dumps(content)) // 4,
        )
        entries.append(ViewEntry(position=len(entries), message=stored, content=content, tokens=stored.tokens))
    return entries


def _file_paths(entries: list[ViewEntry]) -> set[str]:
    """Every file_path / notebook_path a file tool touched in the entries."""
    found: set[str] = set()
    for entry in entries:
        if entry.role != "assistant" or not isinstance(entry.content, list):
            continue
        for block in entry.content:
            if block.get("type") == "tool_use" and block.get("name") in FILE_TOOLS:
                tool_input = block.get("input", {})
                path = tool_input.get("file_path") or tool_input.get("notebook_path")
                if path:
                    found.add(path)
    return found


def _transcript_files() -> list[Any]:
    """The shared Claude Code transcripts, or one skipped parameter (a collection error under `.ci/run`)."""
    found = sorted(TRANSCRIPTS.rglob("*.jsonl")) if TRANSCRIPTS.is_dir() else []
    return list(found) or [absent("TRANSCRIPTS", f"real transcripts not available at {TRANSCRIPTS}")]


@pytest.mark.parametrize("path", _transcript_files(), ids=lambda p: p.name[:24] if p else "absent")
def test_real_transcripts_keep_every_file_path(path: Path) -> None:
    """Every Read/Edit/Write path of a real session is in its summary, which is smaller."""
    entries = _load_transcript(path)
    summary = ExtractiveSummarizer().summarize(entries).text
    positions = [summary.index(f"\n{k}. {name}:\n") for k, name in enumerate(SUMMARY_SECTIONS[1:], 2)]
    assert summary.startswith("1. Primary Request and Intent:\n") and positions == sorted(positions)
    for file_path in _file_paths(entries):
        assert f"- {file_path}: " in summary
    view_tokens = sum(e.tokens for e in entries)
    if view_tokens > 50_000:
        assert estimate_tokens(summary) < 0.25 * view_tokens
