"""Claude Code transcripts laid out as the Claude Agent SDK expects them (tests of the SDK adapter)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from claude_agent_sdk import project_key_for_directory

UUID_PATTERN = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass
class Laid:
    """One transcript laid out under a Claude config dir: its session id, project dir and files."""

    session_id: str
    workdir: Path
    project_dir: Path
    files: dict[str, Path]  # the session's source key (id, or id/agent-x) -> laid-out file


def session_id_of(path: Path) -> str:
    """The file's own session id: its name when that is a UUID, else the sessionId its lines carry."""
    if UUID_PATTERN.match(path.stem):
        return path.stem
    for line in path.read_text(encoding="utf-8").splitlines():
        found = json.loads(line).get("sessionId")
        if isinstance(found, str) and UUID_PATTERN.match(found):
            return found
    raise AssertionError(f"{path}: no session id")


def main_files(transcripts_dir: Path) -> list[Path]:
    """The shared Claude Code main transcripts (their subagents are laid out with them)."""
    return sorted(p for p in (transcripts_dir / "claude-code").rglob("*.jsonl") if "subagents" not in p.parts)


def lay_out(source: Path, root: Path) -> Laid:
    """Copy a main transcript (and its subagents) where Claude Code keeps them under the config dir `root`."""
    workdir = root / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    session_id = session_id_of(source)
    project_dir = root / "claude" / "projects" / project_key_for_directory(str(workdir))
    project_dir.mkdir(parents=True, exist_ok=True)
    files = {session_id: project_dir / f"{session_id}.jsonl"}
    shutil.copyfile(source, files[session_id])
    subagents = source.with_suffix("") / "subagents"
    if subagents.is_dir():
        for agent in sorted(subagents.glob("*.jsonl")):
            target = project_dir / session_id / "subagents" / agent.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(agent, target)
            files[f"{session_id}/{agent.stem}"] = target
    return Laid(session_id, workdir, project_dir, files)
