"""A small Claude Code exchange as transcript lines: what tests write to a file or hand to the Agent SDK adapter."""

from __future__ import annotations

from typing import Any


def exchange(
    source_id: str,
    prompt: str,
    reply: str,
    *,
    cwd: str = "/w",
    message_id: str = "msg_1",
    usage: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """One user line and the assistant line answering it, of the Claude Code session `source_id`."""
    answer: dict[str, Any] = {
        "id": message_id,
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": reply}],
    }
    if usage is not None:
        answer["usage"] = usage
    return [
        {
            "type": "user",
            "uuid": f"{source_id}-u1",
            "parentUuid": None,
            "sessionId": source_id,
            "cwd": cwd,
            "timestamp": "2026-11-30T10:00:00.000Z",
            "message": {"role": "user", "content": prompt},
        },
        {
            "type": "assistant",
            "uuid": f"{source_id}-a1",
            "parentUuid": f"{source_id}-u1",
            "sessionId": source_id,
            "timestamp": "2026-11-30T10:00:01.000Z",
            "message": answer,
        },
    ]
