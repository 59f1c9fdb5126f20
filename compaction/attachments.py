"""What full compaction re-attaches after the summary: recently read files, the plan, skills.

Files are re-read from disk (their content may have changed since the Read);
files already visible in the kept messages and files that no longer exist are
skipped. Every piece is capped in tokens, and so is the whole.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Sequence

from sessionstore.storage.engine.config import Config
from sessionstore.storage.codecs.tokens import estimate_text
from sessionstore.storage.core.types import ViewEntry
from sessionstore.storage.records.validate import NewMessage

from .messages import attachment_message

READ_TOOLS = ("Read",)


def recently_read_files(entries: Sequence[ViewEntry]) -> list[str]:
    """File paths from Read tool inputs, most recent first, each once."""
    seen: dict[str, None] = {}
    for entry in reversed(entries):
        if entry.role != "assistant" or isinstance(entry.message.content, str):
            continue
        for block in reversed(entry.message.content):
            if block.get("type") == "tool_use" and block.get("name") in READ_TOOLS:
                path = (block.get("input") or {}).get("file_path")
                if isinstance(path, str) and path:
                    seen.setdefault(path)
    return list(seen)


def _visible_paths(kept: Iterable[ViewEntry]) -> set[str]:
    """Paths whose Read call (or a previous re-attachment) is still in the kept messages."""
    paths: set[str] = set()
    for entry in kept:
        path = entry.message.metadata.get("path") if entry.type == "attachment" else None
        if path:
            paths.add(path)
        paths.update(recently_read_files([entry]))
    return paths


def _cap(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut text to about max_tokens (by the same estimator the view uses)."""
    if estimate_text(text) <= max_tokens:
        return text, False
    cut = max_tokens * 4
    while cut > 0 and estimate_text(text[:cut]) > max_tokens:
        cut = int(cut * 0.9)
    return text[:cut], True


def file_attachments(
    entries: Sequence[ViewEntry], kept: Sequence[ViewEntry], *, cwd: str | None, config: Config
) -> list[NewMessage]:
    """Up to N recently read files, re-read from disk, within the per-file and total budgets."""
    visible = _visible_paths(kept)
    out: list[NewMessage] = []
    total = 0
    for path in recently_read_files(entries):
        if len(out) >= config.reattach_max_files:
            break
        if path in visible:
            continue
        resolved = path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)
        try:
            with open(resolved, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except (OSError, ValueError):
            continue
        text, truncated = _cap(text, config.reattach_file_tokens)
        tokens = estimate_text(text)
        if total + tokens > config.reattach_total_tokens:
            break
        total += tokens
        note = " (truncated)" if truncated else ""
        out.append(
            attachment_message(
                f"Contents of {path}{note}, re-read after the conversation was compacted:\n\n{text}",
                kind="file",
                path=path,
                truncated=truncated,
            )
        )
    return out


def carried_attachments(entries: Sequence[ViewEntry], config: Config) -> list[NewMessage]:
    """The latest plan and each invoked skill the view carries, copied after the summary."""
    plan: ViewEntry | None = None
    skills: dict[str, ViewEntry] = {}
    for entry in entries:
        if entry.type != "attachment":
            continue
        kind = entry.message.metadata.get("attachment")
        if kind == "plan":
            plan = entry
        elif kind == "skill":
            skills[str(entry.message.metadata.get("name", entry.uuid))] = entry
    out: list[NewMessage] = []
    if plan is not None:
        out.append(_copy(plan, config.reattach_file_tokens))
    total = 0
    for entry in reversed(list(skills.values())):
        message = _copy(entry, config.reattach_skill_tokens)
        tokens = estimate_text(message.content if isinstance(message.content, str) else json.dumps(message.content))
        if total + tokens > config.reattach_skills_total_tokens:
            break
        total += tokens
        out.append(message)
    return out


def _copy(entry: ViewEntry, max_tokens: int) -> NewMessage:
    content = (
        entry.content
        if isinstance(entry.content, str)
        else "\n".join(b.get("text", "") for b in entry.content if b.get("type") == "text")
    )
    text, truncated = _cap(content, max_tokens)
    meta = {k: v for k, v in entry.message.metadata.items() if k not in ("reinjected", "attachment")}
    return attachment_message(
        text, kind=str(entry.message.metadata.get("attachment")), copied_from=entry.uuid, truncated=truncated, **meta
    )
