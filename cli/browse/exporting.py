"""Exports started from the browser: the same writers as `sessionstore export`, to a file.

The file is written through `open_output`, like the CLI's: it appears only when complete (an
exclusive, no-follow temporary file beside it, then renamed; a new file gets mode 0600), and
the export runs on a connection of its own so the screens stay responsive.
"""

from __future__ import annotations

from pathlib import Path

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code, export_html, export_jsonl, export_markdown
from sessionstore.storage.core.output import open_output

#: Format -> file extension, in the order the picker offers them.
FORMATS = {"jsonl": "jsonl", "markdown": "md", "html": "html", "claude-code": "jsonl"}
TEXT_WRITERS = {"jsonl": export_jsonl, "markdown": export_markdown, "html": export_html}


def default_path(session_id: str, fmt: str) -> Path:
    """`session-<id8>[-claude-code].<ext>`, relative to the working directory."""
    suffix = "-claude-code" if fmt == "claude-code" else ""
    return Path(f"session-{session_id[:8]}{suffix}.{FORMATS[fmt]}")


def export_to_file(url: str, session_id: str, fmt: str, path: Path) -> int:
    """Export the whole session in `fmt` to `path`; returns the message count."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    path = path.expanduser()
    with SessionStore.open(url) as store:
        session = store.get(session_id)
        if fmt == "claude-code":
            with open_output(path, binary=True) as raw:
                return export_claude_code(session, raw)
        with open_output(path) as text:
            return TEXT_WRITERS[fmt](session, text)
