"""Builders and checks shared by the pipeline layer tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from sessionstore.storage.write.session import Session

from .validity import check_messages

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def at(minutes: float = 0.0) -> str:
    """An ISO timestamp `minutes` after T0."""
    return (T0 + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def tool_round(
    tid: str,
    output: Any,
    *,
    name: str = "Read",
    tool_input: dict | None = None,
    when: float = 0.0,
    usage: dict | None = None,
    is_error: bool = False,
) -> list[dict[str, Any]]:
    """An assistant tool call and the user message with its result."""
    assistant: dict[str, Any] = {
        "role": "assistant",
        "timestamp": at(when),
        "content": [
            {
                "type": "tool_use",
                "id": tid,
                "name": name,
                "input": tool_input if tool_input is not None else {"file_path": f"/src/{tid}.py"},
            }
        ],
    }
    if usage is not None:
        assistant["usage"] = usage
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tid, "content": output}
    if is_error:
        result["is_error"] = True
    return [assistant, {"role": "user", "timestamp": at(when), "content": [result]}]


def parallel_round(outputs: dict[str, Any], *, name: str = "Read", when: float = 0.0) -> list[dict[str, Any]]:
    """One assistant message with several tool calls, all results in one user message."""
    return [
        {
            "role": "assistant",
            "timestamp": at(when),
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": {"file_path": tid}} for tid in outputs],
        },
        {
            "role": "user",
            "timestamp": at(when),
            "content": [{"type": "tool_result", "tool_use_id": tid, "content": out} for tid, out in outputs.items()],
        },
    ]


def user(text: str, when: float = 0.0, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": at(when), **extra}


def assistant(text: str, when: float = 0.0, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": at(when), **extra}


def transcript(session: Session) -> list[dict[str, Any]]:
    """The whole transcript as export dicts."""
    return [m.to_dict() for m in session.transcript()]


def assert_transcript_kept(session: Session, before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message recorded before is still there, byte-identical; returns what was added."""
    after = transcript(session)
    assert after[: len(before)] == before
    return after[len(before) :]


def assert_valid_view(messages: list[dict[str, Any]]) -> None:
    problems = check_messages(messages)
    assert not problems, problems


def result_contents(session: Session) -> dict[str, Any]:
    """tool_use_id -> the content its tool_result shows in the active view."""
    shown = {}
    for entry in session.active_entries():
        if entry.role == "user" and isinstance(entry.content, list):
            for block in entry.content:
                if block.get("type") == "tool_result":
                    shown[block["tool_use_id"]] = block.get("content")
    return shown
