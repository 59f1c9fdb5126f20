"""A hostile corpus: every payload that could drive a terminal, Rich markup, a browser or a parser.

Put into every stored field a printer shows (titles, cwd, model, uuids, subtypes, tool names,
tool_use_ids, tool inputs and results, text, thinking), both appended through the API and
imported from a Claude Code file. `unsafe_bytes` names what must never reach an output.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Iterator

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact, make_summarizer
from sessionstore.compaction.pipeline import Pipeline

#: One of each attack, named.
PAYLOADS = {
    "osc0_title": "\x1b]0;PWNED-TITLE\x1b\\",
    "osc8_link": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "osc52_clipboard": "\x1b]52;c;cm0gLXJmIH4K\x07",
    "csi_clear": "\x1b[2J\x1b[H",
    "csi_move": "\x1b[10A\x1b[5C\x1b[?25l",
    "dcs": "\x1bP1$qm\x1b\\",
    "c1": "\x9b2J\x9d0;c1\x9c\x85\x90q\x9c",
    "bidi": "\u202eevil\u202c\u2066x\u2069\u200f",
    "rich_link": "[link=https://evil.example]x[/link]",
    "rich_close": "[/]",
    "rich_style": "[bold red on white blink]loud[/bold red on white blink]",
    "html": '<img src=x onerror="alert(1)"><a href="javascript:alert(2)">y</a><script>alert(3)</script>',
    "del_bs_cr": "\x7f\x08\r\x0b\x0c\x07",
    "sgr": "\x1b[31mred\x1b[0m",
}
#: What a tool printing a binary file gives: every byte value as a character (NUL among them).
BINARY = bytes(range(256)).decode("latin-1")
#: Everything at once (NUL too, where the field takes it).
HOSTILE = "".join(PAYLOADS.values())
WITH_NUL = HOSTILE + "\x00nul"
#: A hostile string for fields limited to 100 characters (model, uuids, ids).
MEDIUM = (
    "\x1b]0;PWN\x07\x1b]52;c;eA==\x07\x1b[2J\x1bP1$q\x1b\\\x9b2J\x85\u202eevil\u202c"
    "[link=https://e.x]x[/link][/]<img onerror=f()>\x7f\x1b[31mr"
)
#: A short hostile string for fields with a length limit (subtype: 64 characters).
SHORT = "\x1b]0;T\x07[/]\x9b\u202e<b>[link=x]"
#: A word every hostile message holds, so search finds them.
NEEDLE = "zebrafish"

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f]")


def unsafe_bytes(output: str | bytes) -> list[str]:
    """What must never reach a terminal: C0 controls but newline and tab, DEL, C1 controls (as UTF-8 text)."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    return sorted({repr(ch) for ch in _UNSAFE.findall(text)})


def hostile_text(tag: str, nul: bool = False) -> str:
    """A message text holding every payload (and NUL when asked: see append_hostile)."""
    return f"{NEEDLE} {tag} {WITH_NUL if nul else HOSTILE} end"


def append_hostile(store: SessionStore) -> str:
    """A native session whose every field is hostile, appended through the API; returns its id."""
    s = store.create_session(title=HOSTILE, model=MEDIUM, cwd="/tmp/" + HOSTILE)
    uid = iter(f"{MEDIUM}-{i}" for i in range(1000))
    s.append({"role": "user", "content": hostile_text("user", nul=True), "uuid": next(uid)})
    s.append(
        {
            "role": "assistant",
            "uuid": next(uid),
            "content": [
                {"type": "thinking", "thinking": hostile_text("thinking", nul=True), "signature": "sig"},
                {"type": "text", "text": hostile_text("assistant", nul=True)},
                {
                    "type": "tool_use",
                    "id": "toolu_" + MEDIUM,
                    "name": "Bash",
                    "input": {"command": hostile_text("input", nul=True)},
                },
            ],
        }
    )
    s.append(
        {
            "role": "user",
            "uuid": next(uid),
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_" + MEDIUM,
                    "content": (hostile_text("result", nul=True) + BINARY) * 40,
                },
            ],
        }
    )
    s.append(
        {"role": "system", "type": "system", "subtype": SHORT, "uuid": next(uid), "content": hostile_text("system")}
    )
    for i in range(4):
        s.append({"role": "user", "content": hostile_text(f"more {i}", nul=True) * 20, "uuid": next(uid)})
        s.append({"role": "assistant", "content": hostile_text(f"reply {i}", nul=True) * 20, "uuid": next(uid)})
    config = dataclasses.replace(
        store.config, tool_result_max_chars=500, microcompact_enabled=False, snip_enabled=False
    )
    Pipeline(store, config=config).prepare(s)
    compact(s, summarizer=make_summarizer("extractive"), custom_instructions=HOSTILE)
    # NUL and binary output before the pipeline: the text it derives from them (spill previews, notes,
    # summaries) must be storable on PostgreSQL too (issue #35); and after it, in what is appended later.
    s.append({"role": "user", "content": hostile_text("after", nul=True), "uuid": next(uid)})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": hostile_text("nul text", nul=True)},
                {"type": "thinking", "thinking": WITH_NUL, "signature": "s"},
            ],
            "uuid": next(uid),
        }
    )
    return s.id


def claude_code_lines(session_id: str = "hostile-session") -> list[dict[str, Any]]:
    """A Claude Code transcript carrying the payloads in every field its importer keeps."""
    cwd = "/tmp/" + HOSTILE
    lines: list[dict[str, Any]] = []
    parent = None

    def add(entry: dict[str, Any]) -> None:
        nonlocal parent
        uuid = f"{SHORT}-{len(lines)}"
        entry.update(
            {
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": session_id,
                "cwd": cwd,
                "timestamp": f"2026-11-01T10:00:{len(lines):02d}.000Z",
                "version": "2.0.0",
                "gitBranch": HOSTILE,
                "isSidechain": False,
                "userType": "external",
            }
        )
        lines.append(entry)
        parent = uuid

    add({"type": "user", "message": {"role": "user", "content": hostile_text("imported user", nul=True)}})
    tool_id = "toolu_" + SHORT
    add(
        {
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": MEDIUM,
                "content": [
                    {"type": "thinking", "thinking": hostile_text("imported thinking"), "signature": "s"},
                    {"type": "text", "text": hostile_text("imported text", nul=True)},
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": HOSTILE,
                        "input": {"x": hostile_text("imported input")},
                    },
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        }
    )
    add(
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": (hostile_text("imported result", nul=True) + BINARY) * 40,
                    }
                ],
            },
        }
    )
    add({"type": "system", "subtype": SHORT, "content": hostile_text("imported system"), "level": "info"})
    add(
        {
            "type": "assistant",
            "message": {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "model": MEDIUM,
                "content": [{"type": "text", "text": hostile_text("imported answer")}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 12, "output_tokens": 5},
            },
        }
    )
    # The title comes from the summary line: NUL in it too (a session header field derived from the file).
    return [{"type": "summary", "summary": "nul\x00title " + HOSTILE, "leafUuid": parent}, *lines]


def write_claude_code(folder: Path, name: str = "hostile\x1b]0;FILE\x07[bold]\x9b\u202e.jsonl") -> Path:
    """The Claude Code transcript written as a file whose name is hostile too."""
    path = folder / name
    path.write_text("".join(json.dumps(line) + "\n" for line in claude_code_lines()), encoding="utf-8")
    return path


@dataclasses.dataclass
class HostileStore:
    """A store holding the hostile session appended through the API and the one imported from `folder`."""

    url: str
    native: str
    imported: str
    folder: Path


def hostile_store(engine: str, folder: Path, pg_url: str | None) -> Iterator[HostileStore]:
    """Build the hostile store on `engine` (PostgreSQL: a fresh schema, dropped afterwards); yields it once."""
    from sessionstore.interchange.importing import import_paths
    from tests.support.newstore import new_store_url

    with new_store_url(engine, folder / "hostile.db", pg_url) as url:
        transcripts = folder / "transcripts"
        transcripts.mkdir()
        write_claude_code(transcripts)
        with SessionStore.open(url) as store:
            native = append_hostile(store)
            imported = import_paths(store, [transcripts], source="claude-code")[0].session_id
            assert imported is not None
        yield HostileStore(url, native, imported, transcripts)
