"""A small, real agent loop on the Anthropic SDK that keeps everything in a session.

Every message is appended the moment it exists; `prepare()` runs before every
model call; a prompt-too-long answer triggers one reactive compaction. Because
the session holds all state, a killed agent restarted on the same session
resumes exactly where it was: it finishes pending tool calls, or asks the model
again if the last word was the user's.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from sessionstore.storage.core.errors import SessionStoreError

if TYPE_CHECKING:
    from sessionstore.compaction.pipeline import Pipeline

    from sessionstore.storage.write.session import Session

DEFAULT_MODEL = "claude-sonnet-4-6"
SYSTEM_PROMPT = (
    "You are a careful coding agent. Use the tools to read files and run shell commands in the "
    "working directory, then answer concisely."
)
#: Named like Claude Code's tools so microcompact's default compactable list applies to them.
TOOLS: list[dict[str, Any]] = [
    {
        "name": "Read",
        "description": "Read a UTF-8 text file inside the working directory.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]},
    },
    {
        "name": "Bash",
        "description": "Run a shell command in the working directory (30 s timeout) and return its output.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
]
MAX_OUTPUT_CHARS = 100_000
#: Variables the Bash tool passes on: what a shell needs to find programs (PATH) and files (HOME,
#: TMPDIR; PWD is set to the working directory), to read and write text (LANG, LANGUAGE, LC_*, TZ)
#: and to know who it runs as and where (USER, LOGNAME, SHELL, TERM).
#: Everything else (tokens, passwords, database URLs) stays out: tool output is stored, sent to
#: the model and indexed for search.
TOOL_ENV_NAMES = frozenset({"PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ", "USER", "LOGNAME", "SHELL"})
TOOL_ENV_PREFIXES = ("LC_",)
#: The tool that reads back what a compaction summarized (sessionstore.storage.read.recall).
RECALL_TOOL: dict[str, Any] = {
    "name": "recall",
    "description": (
        "Read the exact conversation from before a compaction summary: the last messages before boundary K, "
        "those containing a query, or those around a message uuid. Use it when the summary lacks a detail. "
        "The answer ends with a note saying what was left out and which cursor pages on to earlier messages."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "boundary": {"type": "integer", "minimum": 1, "description": "Boundary number K (default: latest)."},
            "boundaries": {
                "type": "string",
                "description": "A range A..B, as a summary's condensed reference "
                "(`recall -b A..B --query ...`) names it: the messages of boundaries A to B.",
            },
            "query": {"type": "string", "description": "Only messages containing this text (case-insensitive)."},
            "around_uuid": {"type": "string", "description": "Show this message and its neighbours."},
            "cursor": {"type": "integer", "description": "next_cursor of an earlier recall: page on."},
            "max_tokens": {"type": "integer", "minimum": 100, "maximum": 20000},
        },
    },
}


class ToolError(Exception):
    """A tool call that cannot run (bad input, path outside the working directory)."""


def confined_path(workdir: Path, path: str) -> Path:
    """`path` resolved inside `workdir`; anything that escapes it (.., absolute, links) is refused."""
    root = workdir.resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{path!r} is outside the working directory")
    return target


def read_file(workdir: Path, args: dict[str, Any]) -> str:
    """The Read tool."""
    path = args.get("file_path")
    if not isinstance(path, str) or not path:
        raise ToolError("Read needs a 'file_path'")
    target = confined_path(workdir, path)
    try:
        return target.read_text(encoding="utf-8", errors="replace")[:MAX_OUTPUT_CHARS]
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from exc


def tool_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of `environ` that the Bash tool runs with (see TOOL_ENV_NAMES)."""
    return {k: v for k, v in environ.items() if k in TOOL_ENV_NAMES or k.startswith(TOOL_ENV_PREFIXES)}


def run_command(workdir: Path, args: dict[str, Any]) -> str:
    """The Bash tool: a shell in the working directory, output and exit code returned."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("Bash needs a 'command'")
    env = {**tool_environment(os.environ), "PWD": str(workdir.resolve())}
    try:
        proc = subprocess.run(command, shell=True, cwd=workdir, capture_output=True, text=True, timeout=30, env=env)
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"command timed out after {exc.timeout} s") from exc
    output = (proc.stdout + proc.stderr)[:MAX_OUTPUT_CHARS]
    return f"{output}\nExit code {proc.returncode}" if proc.returncode else output


HANDLERS: dict[str, Callable[[Path, dict[str, Any]], str]] = {"Read": read_file, "Bash": run_command}


@dataclass
class Agent:
    """The loop: prepare, call the model, record, run tools, repeat until the model stops."""

    session: "Session"
    pipeline: "Pipeline"
    client: Any
    workdir: Path
    model: str = DEFAULT_MODEL
    max_tokens: int = 4096
    max_steps: int = 50
    on_event: Callable[[str, Any], None] | None = None
    recall: bool = True

    def __post_init__(self) -> None:
        """With the recall tool, every summary ends with a line telling the model it can read back."""
        if self.recall and hasattr(self.pipeline, "config"):
            self.pipeline.config = self.pipeline.config.replace(recall_note=True)

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tool definitions sent with every call."""
        return [*TOOLS, RECALL_TOOL] if self.recall else TOOLS

    def ask(self, text: str) -> str:
        """Record a user request and run until the model answers without tools."""
        self.session.append({"role": "user", "content": text})
        return self.resume()

    def resume(self) -> str:
        """Continue from whatever the session holds: pending tools first, then the model."""
        for _ in range(self.max_steps):
            pending = self.session.refresh_state().tail.pending
            if pending:
                self._run_tools(pending)
                continue
            if self.session.refresh_state().tail.last_role != "user":
                return self._last_text()
            reply = self._call_model()
            self.session.append(reply)
            self._emit("assistant", reply)
            if reply.stop_reason != "tool_use":
                return self._last_text()
        raise SessionStoreError(f"the agent stopped after {self.max_steps} steps without finishing")

    def _call_model(self) -> Any:
        """One model call with the prepared view; one reactive compaction on prompt-too-long."""
        import anthropic

        prepared = self.pipeline.prepare(self.session)
        for attempt in range(2):
            kwargs: dict[str, Any] = {
                "model": self.model,
                "max_tokens": self.max_tokens,
                "system": SYSTEM_PROMPT,
                "tools": self.tools,
                "messages": prepared.messages,
            }
            if prepared.context_management:
                kwargs["extra_body"] = {"context_management": prepared.context_management}
                kwargs["extra_headers"] = {"anthropic-beta": ",".join(prepared.betas)}
            try:
                return self.client.messages.create(**kwargs)
            except anthropic.BadRequestError as exc:
                if attempt or "prompt is too long" not in str(exc):
                    raise
                self._emit("reactive_compact", str(exc))
                prepared = self.pipeline.recover_from_prompt_too_long(self.session, exc)
        raise AssertionError("unreachable")

    def _run_tools(self, pending: list[str]) -> None:
        """Run the pending tool calls of the last assistant turn and record their results."""
        calls = self._pending_calls(set(pending))
        results = []
        for call in calls:
            handler = HANDLERS.get(call["name"])
            try:
                if self.recall and call["name"] == RECALL_TOOL["name"]:
                    output, error = self._recall(call.get("input") or {}), False
                elif handler is None:
                    raise ToolError(f"unknown tool {call['name']!r}")
                else:
                    output, error = handler(self.workdir, call.get("input") or {}), False
            except ToolError as exc:
                output, error = str(exc), True
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": output or "(no output)",
                    **({"is_error": True} if error else {}),
                }
            )
            self._emit("tool", call)
        self.session.append({"role": "user", "content": results})

    def _recall(self, args: dict[str, Any]) -> str:
        """The recall tool: exact earlier messages of this session, as text within a budget."""
        from sessionstore.storage.read.recall import DEFAULT_MAX_TOKENS, recall

        options: dict[str, Any] = {}
        for name, kind in (
            ("boundary", int),
            ("boundaries", str),
            ("cursor", int),
            ("max_tokens", int),
            ("query", str),
            ("around_uuid", str),
        ):
            value = args.get(name)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise ToolError(f"recall: {name} must be {'an integer' if kind is int else 'a string'}")
            options[name] = value
        ranged, boundary = options.pop("boundaries"), options.pop("boundary")
        if ranged is not None:
            boundary = ranged
        options["max_tokens"] = options["max_tokens"] or DEFAULT_MAX_TOKENS
        try:
            return recall(self.session, boundary, **options).text
        except SessionStoreError as exc:
            raise ToolError(f"recall: {exc}") from exc

    def _pending_calls(self, pending: set[str]) -> list[dict[str, Any]]:
        """The tool_use blocks still waiting for a result, in order."""
        calls: list[dict[str, Any]] = []
        for entry in reversed(self.session.active_entries()):
            if entry.role == "assistant" and isinstance(entry.content, list):
                calls = [b for b in entry.content if b.get("type") == "tool_use" and b["id"] in pending] + calls
            if len(calls) == len(pending):
                break
        return calls

    def _last_text(self) -> str:
        for entry in reversed(self.session.active_entries()):
            if entry.role == "assistant":
                content = entry.content
                if isinstance(content, str):
                    return content
                return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        return ""

    def _emit(self, kind: str, payload: Any) -> None:
        if self.on_event is not None:
            self.on_event(kind, payload)
