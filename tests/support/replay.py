"""A real transcript's span replayed many times: renamed tool ids and a new directory per replay.

Each replay moves every path under the transcript's root into `<root>/r<N>` and renames every
tool id, so the files touched are new facts every time and the view stays a valid request.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_paths
from sessionstore.storage.core.errors import InvalidMessage

SPOTTER = Path("claude-code") / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
ROOT = "/home/USER/projects/spotter-worktrees/spotter-gqc"
_TOOL_ID = re.compile(r'"(toolu_[A-Za-z0-9]+)"')


def load_span(transcripts: Path, url: str, *, messages: int = 40) -> list[dict[str, Any]]:
    """The first sent messages of the shared Claude Code spotter transcript, cut after a whole round."""
    store = SessionStore.open(url)
    try:
        import_paths(store, [transcripts / SPOTTER], source="claude-code")
        session = store.get(store.list(limit=1)[0]["id"])
        recorded = [
            {"role": m.role, "content": m.content, **({"api_message_id": m.api_message_id} if m.api_message_id else {})}
            for m in session.transcript()
            if m.role in ("user", "assistant") and not m.is_meta and not m.is_compact_summary
        ]
        accepted = _valid_sequence(store, recorded, messages)
    finally:
        store.close()
    return accepted[: _round_end(accepted, messages)]


def _valid_sequence(store: SessionStore, recorded: list[dict[str, Any]], wanted: int) -> list[dict[str, Any]]:
    """The recorded messages a session accepts in order (pieces of side branches left out), up to `wanted`."""
    scratch = store.create_session()
    accepted = []
    for message in recorded:
        if len(accepted) >= wanted:
            break
        try:
            scratch.append(message)
        except InvalidMessage:
            continue
        accepted.append(message)
    return accepted


def _round_end(view: list[dict[str, Any]], wanted: int) -> int:
    """The largest cut at most `wanted` that ends on an assistant message with no tool call."""
    best = 0
    for i, message in enumerate(view[:wanted]):
        calls = isinstance(message["content"], list) and any(b.get("type") == "tool_use" for b in message["content"])
        if message["role"] == "assistant" and not calls:
            best = i + 1
    assert best, "the span holds no complete round"
    return best


def replay(span: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """Replay `n` of the span: tool ids renamed, every path under the root moved to `<root>/r<n>`."""
    text = json.dumps(span)
    text = _TOOL_ID.sub(lambda m: f'"{m.group(1)}r{n}"', text)
    text = text.replace(ROOT, f"{ROOT}/r{n}")
    messages = json.loads(text)
    for message in messages:
        if "api_message_id" in message:
            message["api_message_id"] = f"{message['api_message_id']}-r{n}"
    return messages
