"""A source id cannot hijack a reference: one that is the source id of one session and the prefix of
another session's id is ambiguous (exit 2 naming both; `AmbiguousSession` in the API; a tool error
over MCP), on both engines.

The hostile file is a Claude Code transcript whose `sessionId` is the 8-character prefix that
`sessions` shows for a session created before it.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from mcp import Client

from sessionstore import AmbiguousSession, SessionStore
from sessionstore.agent.mcp_server import build_server
from tests.support.cli import run_cli, run_cli_process


def _hostile_file(path: Path, source_id: str) -> Path:
    """A two-message Claude Code transcript that calls itself `source_id`."""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    lines = [
        {
            "type": "user",
            "uuid": first,
            "parentUuid": None,
            "sessionId": source_id,
            "cwd": "/tmp",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "imported question"},
        },
        {
            "type": "assistant",
            "uuid": second,
            "parentUuid": first,
            "sessionId": source_id,
            "cwd": "/tmp",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": "imported answer"}],
                "stop_reason": "end_turn",
            },
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def hijack(store_url: str, tmp_path: Path) -> tuple[str, str, str]:
    """(victim id, imported id, the reference both answer to)."""
    with SessionStore.open(store_url) as store:
        victim = store.create_session(title="victim")
        victim.append({"role": "user", "content": "the victim's own question"})
        reference = victim.id[:8]
        from sessionstore.interchange.importing import import_paths

        [result] = import_paths(store, [_hostile_file(tmp_path / "hostile.jsonl", reference)])
        assert result.session_id and result.session_id != victim.id
        return victim.id, result.session_id, reference


def test_the_api_raises_ambiguous_session_naming_both(store_url: str, hijack: tuple[str, str, str]) -> None:
    victim, imported, reference = hijack
    with SessionStore.open(store_url) as store:
        with pytest.raises(AmbiguousSession) as caught:
            store.get(reference)
        assert set(caught.value.candidates) == {victim, imported}
        assert victim in str(caught.value) and imported in str(caught.value)
        assert store.get(victim).id == victim and store.get(imported).id == imported, "full ids still resolve"


@pytest.mark.parametrize("command", [["view"], ["history"], ["delete", "--yes"], ["export"]])
def test_every_command_refuses_in_one_line_naming_both(
    capsys: pytest.CaptureFixture[str], store_url: str, hijack: tuple[str, str, str], command: list[str]
) -> None:
    victim, imported, reference = hijack
    result = run_cli(capsys, command[0], reference, *command[1:], "--db", store_url)
    lines = result.err.strip().splitlines()
    assert result.code == 2 and len(lines) == 1, (result.code, result.err)
    assert victim in lines[0] and imported in lines[0] and "ambiguous" in lines[0]
    with SessionStore.open(store_url) as store:
        assert {s["id"] for s in store.list()} == {victim, imported}, "nothing was deleted"


def test_chat_refuses_before_any_model_call(store_url: str, hijack: tuple[str, str, str], tmp_path: Path) -> None:
    victim, imported, reference = hijack
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-hijack", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    result = run_cli_process("chat", reference, "--workdir", str(tmp_path), "--db", store_url, env=env)
    assert result.code == 2 and victim in result.err and imported in result.err, result.err
    assert "Traceback" not in result.err


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_tools_answer_a_tool_error_naming_both(store_url: str, hijack: tuple[str, str, str]) -> None:
    victim, imported, reference = hijack
    with SessionStore.open(store_url) as store:
        async with Client(build_server(store)) as client:
            answer = await client.call_tool("history", {"session": reference})
    assert answer.is_error
    text = answer.content[0].text
    assert victim in text and imported in text and "ambiguous" in text
