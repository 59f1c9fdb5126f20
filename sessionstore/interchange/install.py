"""Hand a session back to the tool it came from: write its active view where Claude Code or Codex resumes from.

What is written is the view the model sees (replaced content included), as a chain
the tool's loader follows, under a new session id derived from the store's session
id (so installing the same session twice names the same file, and the second
install is refused instead of overwriting or duplicating it).

* Claude Code: `$CLAUDE_CONFIG_DIR/projects/<cwd with every character outside
  [A-Za-z0-9] replaced by '-'>/<id>.jsonl` (default `~/.claude`), one entry per view
  entry, each `parentUuid` the entry before it, every line carrying the new
  `sessionId` and the cwd; `claude --resume <id>` run in that cwd continues it.
* Codex: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`
  (local time, default `~/.codex`), a `session_meta` first line naming the id and the
  cwd, then response items (messages, function calls and their outputs); a boundary
  becomes a `compacted` line whose replacement history is the view after it;
  `codex resume <id>` continues it. Thinking blocks have no Codex form and are left
  out; a tool result's blocks become its text.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid as uuid_mod
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.read.history import boundaries
from sessionstore.storage.core.types import BOUNDARY_SUBTYPE

from .export import claude_code_line
from .links import Link

if TYPE_CHECKING:
    from sessionstore.secrets import Redactor
    from sessionstore.storage.write.session import Session
    from sessionstore.storage.core.types import ViewEntry

#: Longest project folder name Claude Code writes without shortening it (longer ones get a hash suffix).
CLAUDE_MAX_PROJECT_NAME = 200
#: The namespace of the ids installed sessions get (uuid5 of the store's session id and the tool).
INSTALL_NAMESPACE = uuid_mod.UUID("5e55104e-f0c6-4b7a-9d3e-2f1a0c6b8d21")


class InstallError(SessionStoreError):
    """The session cannot be installed there (a file for it exists already, or no path can be formed)."""


@dataclass(frozen=True, slots=True)
class Installed:
    """Where a session was installed and how to continue it."""

    tool: str
    session_id: str
    path: Path
    cwd: str
    entries: int
    left_out: int
    command: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "session_id": self.session_id,
            "path": str(self.path),
            "cwd": self.cwd,
            "entries": self.entries,
            "left_out_blocks": self.left_out,
            "command": self.command,
        }


def installed_id(session: "Session", tool: str) -> str:
    """The id a session is installed under in `tool`: the same on every call, so a second install is refused."""
    return str(uuid_mod.uuid5(INSTALL_NAMESPACE, f"{tool}:{session.id}"))


def claude_project_name(cwd: str) -> str:
    """Claude Code's folder name for a working directory: every character outside [A-Za-z0-9] becomes '-'."""
    name = re.sub(r"[^A-Za-z0-9]", "-", cwd)
    if len(name) > CLAUDE_MAX_PROJECT_NAME:
        raise InstallError(
            f"the working directory {cwd!r} makes a Claude Code project name of {len(name)} "
            f"characters; Claude Code shortens names past {CLAUDE_MAX_PROJECT_NAME} with a hash "
            "this store cannot reproduce"
        )
    return name


def claude_dir(given: str | os.PathLike[str] | None = None) -> Path:
    """The Claude Code config folder: `given`, else $CLAUDE_CONFIG_DIR, else ~/.claude."""
    return Path(given or os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude").expanduser()


def codex_home(given: str | os.PathLike[str] | None = None) -> Path:
    """The Codex home: `given`, else $CODEX_HOME, else ~/.codex."""
    return Path(given or os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


def _cwd_of(session: "Session") -> str:
    """The session's working directory (an absolute path), else the current one."""
    return session.cwd if session.cwd and os.path.isabs(session.cwd) else os.getcwd()


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", text) else text


def resume_command(session: "Session", *, db_option: str = "") -> str:
    """The command that continues the session where it came from.

    An imported Claude Code or Codex session whose transcript the store has not grown
    past the import resumes in its tool, by its own id, from its working directory;
    anything else (native sessions, forks, sub-agents, sessions continued here)
    resumes in `sessionstore chat`.
    """
    row = session.db.one("SELECT source, source_key FROM imports WHERE session_id = :id", {"id": session.id})
    grown = session.last_seq > int(session.metadata.get("imported_last_seq") or 0)
    if row is not None and not grown and "/" not in row[1]:
        where = f"cd {_shell_quote(session.cwd)} && " if session.cwd and os.path.isabs(session.cwd) else ""
        if row[0] == "claude-code":
            return f"{where}claude --resume {row[1]}"
        if row[0] == "codex":
            return f"{where}codex resume {row[1]}"
    return f"sessionstore chat {session.id}{db_option}"


# ----------------------------------------------------------------- Claude Code


def install_claude_code(
    session: "Session", *, claude_config: str | os.PathLike[str] | None = None, redactor: "Redactor | None" = None
) -> Installed:
    """Write the active view as a Claude Code session file; refuses when that file exists.

    With a `redactor`, every line passes through it whole (see `_write_new`).
    """
    new_id = installed_id(session, "claude-code")
    cwd = _cwd_of(session)
    folder = claude_dir(claude_config) / "projects" / claude_project_name(cwd)
    path = folder / f"{new_id}.jsonl"
    entries = session.active_entries()
    lines = list(_claude_lines(session, entries, new_id, cwd))
    _write_new(path, lines, redactor)
    return Installed(
        "claude-code", new_id, path, cwd, len(entries), 0, f"cd {_shell_quote(cwd)} && claude --resume {new_id}"
    )


def _claude_lines(session: "Session", entries: list["ViewEntry"], new_id: str, cwd: str) -> Iterator[bytes]:
    """One Claude Code entry per view entry, each hanging from the one before (the chain the loader follows)."""
    previous: str | None = None
    now = _iso_now()
    compactions = {b.boundary_seq: b for b in boundaries(session)}
    for entry in entries:
        message = replace(entry.message, content=entry.content, timestamp=entry.message.timestamp or now)
        line = claude_code_line(session, message, link=Link(previous, logical_parent=previous), session_id=new_id)
        line["cwd"] = cwd
        b = compactions.get(message.seq) if message.subtype == BOUNDARY_SUBTYPE else None
        if b is not None:  # the compaction's row holds them (a fork's copied boundary message does not)
            line["compactMetadata"].update(trigger=b.trigger, preTokens=b.pre_tokens)
        yield json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        previous = entry.uuid


# ----------------------------------------------------------------------- Codex


def install_codex(
    session: "Session", *, home: str | os.PathLike[str] | None = None, redactor: "Redactor | None" = None
) -> Installed:
    """Write the active view as a Codex rollout file; refuses when a rollout with that id exists.

    With a `redactor`, every line passes through it whole (see `_write_new`).
    """
    new_id = installed_id(session, "codex")
    root = codex_home(home)
    existing = _existing_rollout(root, new_id)
    if existing is not None:
        raise InstallError(
            f"{existing} exists already (session {session.id} was installed in Codex as {new_id}); "
            "nothing was written. Fork the session to install its view under a new id"
        )
    stamp = datetime.now().astimezone()
    path = (
        root
        / "sessions"
        / stamp.strftime("%Y")
        / stamp.strftime("%m")
        / stamp.strftime("%d")
        / f"rollout-{stamp.strftime('%Y-%m-%dT%H-%M-%S')}-{new_id}.jsonl"
    )
    cwd = _cwd_of(session)
    entries = session.active_entries()
    writer = _CodexWriter(new_id, cwd, session.model)
    lines = writer.lines(entries)
    _write_new(path, lines, redactor)
    return Installed(
        "codex", new_id, path, cwd, len(entries), writer.left_out, f"cd {_shell_quote(cwd)} && codex resume {new_id}"
    )


def _existing_rollout(root: Path, new_id: str) -> Path | None:
    """A rollout file of that id anywhere under sessions/ (Codex finds a session by the id in its file name)."""
    sessions = root / "sessions"
    if not sessions.is_dir():
        return None
    return next(iter(sorted(sessions.glob(f"*/*/*/rollout-*-{new_id}.jsonl"))), None)


class _CodexWriter:
    """The rollout lines of a view: session_meta, turn_context, then one or more items per entry."""

    def __init__(self, new_id: str, cwd: str, model: str | None) -> None:
        self.new_id = new_id
        self.cwd = cwd
        self.model = model
        self.left_out = 0

    def lines(self, entries: list["ViewEntry"]) -> list[bytes]:
        now = _iso_now()
        from sessionstore import __version__

        out = [
            _line(
                now,
                "session_meta",
                {
                    "id": self.new_id,
                    "timestamp": now,
                    "cwd": self.cwd,
                    "originator": "sessionstore",
                    "cli_version": __version__,
                    "instructions": None,
                    "source": "cli",
                    "model_provider": "openai",
                },
            )
        ]
        if self.model:
            out.append(
                _line(
                    now,
                    "turn_context",
                    {
                        "cwd": self.cwd,
                        "approval_policy": "on-request",
                        "sandbox_policy": {"type": "workspace-write"},
                        "model": self.model,
                        "summary": "auto",
                    },
                )
            )
        i = 0
        while i < len(entries):
            entry = entries[i]
            stamp = entry.message.timestamp or now
            if entry.role == "system" and entry.subtype == BOUNDARY_SUBTYPE:
                j = next(
                    (k for k in range(i + 1, len(entries)) if entries[k].subtype == BOUNDARY_SUBTYPE), len(entries)
                )
                items = [pair for e in entries[i + 1 : j] for pair in self._items(e)]
                history = [item for kind, item in items if kind == "response_item"]
                out.append(_line(stamp, "compacted", {"message": "", "replacement_history": history}))
                # What a person typed, as the events Codex lists and replays a session's turns from.
                out += [_line(stamp, kind, item) for kind, item in items if kind == "event_msg"]
                i = j
                continue
            for kind, item in self._items(entry):
                out.append(_line(stamp, kind, item))
            i += 1
        return out

    def _items(self, entry: "ViewEntry") -> list[tuple[str, dict[str, Any]]]:
        """(line type, payload) for one entry: event_msg for what a person typed, response items for the model."""
        meta = entry.message.metadata or {}
        blocks = _blocks(entry.content)
        if entry.role == "system":
            role = entry.subtype if entry.subtype in ("developer", "system") else "developer"
            return [("response_item", _message(role, "input_text", blocks, meta))] if blocks else []
        if entry.role == "assistant":
            return self._assistant(blocks, meta)
        return self._user(entry, blocks, meta)

    def _assistant(self, blocks: list[dict[str, Any]], meta: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        texts: list[dict[str, Any]] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                texts.append(block)
            elif kind == "tool_use":
                out.append(("response_item", _call(block, meta.get("codex_type"))))
            else:
                self.left_out += 1
        if texts:
            out.insert(0, ("response_item", _message("assistant", "output_text", texts, meta)))
        return out

    def _user(
        self, entry: "ViewEntry", blocks: list[dict[str, Any]], meta: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        rest: list[dict[str, Any]] = []
        for block in blocks:
            if block.get("type") == "tool_result":
                out.append(("response_item", _output(block, meta.get("codex_type"))))
            elif block.get("type") in ("text", "image"):
                rest.append(block)
            else:
                self.left_out += 1
        if rest:
            typed = "\n".join(b["text"] for b in rest if b.get("type") == "text")
            if typed and not entry.message.is_compact_summary and entry.type == "user" and not entry.message.is_meta:
                out.append(("event_msg", {"type": "user_message", "message": typed, "images": []}))
            out.append(("response_item", _message("user", "input_text", rest, meta)))
        return out


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content if isinstance(b, dict)]


def _message(role: str, text_type: str, blocks: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "image" and block.get("source", {}).get("type") == "base64":
            source = block["source"]
            parts.append(
                {"type": "input_image", "image_url": f"data:{source.get('media_type')};base64,{source.get('data')}"}
            )
        elif block.get("type") == "image" and block.get("source", {}).get("type") == "url":
            parts.append({"type": "input_image", "image_url": block["source"].get("url")})
        elif block.get("type") == "text":
            parts.append({"type": text_type, "text": block.get("text", "")})
    item: dict[str, Any] = {"type": "message", "role": role, "content": parts}
    if isinstance(meta.get("phase"), str):
        item["phase"] = meta["phase"]
    return item


def _call(block: dict[str, Any], codex_type: Any) -> dict[str, Any]:
    """A tool_use as the call item it came from (function_call unless recorded otherwise)."""
    given = block.get("input")
    tool_input: dict[str, Any] = given if isinstance(given, dict) else {}
    if codex_type == "custom_tool_call" and set(tool_input) == {"input"}:
        return {
            "type": "custom_tool_call",
            "name": block.get("name"),
            "input": tool_input["input"],
            "call_id": block.get("id"),
        }
    if codex_type == "local_shell_call":
        return {"type": "local_shell_call", "call_id": block.get("id"), "status": "completed", "action": tool_input}
    arguments = (
        tool_input["arguments"]
        if set(tool_input) == {"arguments"} and isinstance(tool_input["arguments"], str)
        else json.dumps(tool_input, ensure_ascii=False)
    )
    return {"type": "function_call", "name": block.get("name"), "arguments": arguments, "call_id": block.get("id")}


def _output(block: dict[str, Any], codex_type: Any) -> dict[str, Any]:
    """A tool_result as the output item of its call, its content as text."""
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    kind = (
        codex_type if codex_type in ("custom_tool_call_output", "local_shell_call_output") else "function_call_output"
    )
    return {"type": kind, "call_id": block.get("tool_use_id"), "output": content if isinstance(content, str) else ""}


def _line(stamp: str, kind: str, payload: dict[str, Any]) -> bytes:
    return (
        json.dumps(
            {"timestamp": stamp, "type": kind, "payload": payload}, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")
        + b"\n"
    )


def _iso_now() -> str:
    """Now as the tools write it: UTC, milliseconds, a Z."""
    now = datetime.fromtimestamp(time.time(), tz=timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _write_new(path: Path, lines: list[bytes] | Iterator[bytes], redactor: "Redactor | None" = None) -> None:
    """Create `path` (never replacing a file) and write the lines; a failure leaves no partial file.

    A `redactor` takes each line whole: its string values lose their secrets, its shape stays
    (keys and structure untouched), so the tool still reads it as a session.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(lines if redactor is None else (redactor.json_line(line) for line in lines))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InstallError(
            f"{path} exists already; nothing was written. Fork the session to install its view under a new id"
        ) from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
