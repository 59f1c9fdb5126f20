"""An export written to a terminal: data formats refused, markdown sanitized, HTML titles and headings escaped.

A stored transcript may hold terminal control sequences (OSC 52 clipboard writes, DCS,
DECSET, C1 controls, bidi overrides). `export -f html`, `jsonl` and `claude-code` are data:
with stdout a terminal (a pseudo-terminal here, as a person's shell would give) they are
refused with a hint and nothing reaches the terminal, as gzip refuses to write to a console;
markdown, meant to be read, reaches it with every control shown as text. In the HTML file,
the title and headings show controls as visible escapes, so a browser never gets them raw.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hostile import HOSTILE, SHORT, unsafe_bytes
from tests.support.outside import run_ok

SESSIONSTORE = Path(sys.executable).parent / "sessionstore"
SOURCE_ID = "36e0c0de-0000-4000-8000-000000000036"
#: What must never reach a terminal or a title raw (besides C0/C1, which unsafe_bytes names).
BIDI = "\u202e"
DATA_FORMATS = ("jsonl", "html", "claude-code")


def hostile_transcript(path: Path) -> Path:
    """A Claude Code file whose title, text, tool input and tool result hold every terminal attack."""
    base = {"isSidechain": False, "userType": "external", "cwd": "/srv/app", "sessionId": SOURCE_ID}
    lines = [
        {
            **base,
            "parentUuid": None,
            "type": "user",
            "uuid": "d0000000-0000-4000-8000-000000000001",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": f"look: {HOSTILE}"},
        },
        {
            **base,
            "parentUuid": "d0000000-0000-4000-8000-000000000001",
            "type": "assistant",
            "uuid": "d0000000-0000-4000-8000-000000000002",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {
                "id": "msg_36",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "toolu_36", "name": "Bash", "input": {"command": HOSTILE}}],
            },
        },
        {
            **base,
            "parentUuid": "d0000000-0000-4000-8000-000000000002",
            "type": "user",
            "uuid": "d0000000-0000-4000-8000-000000000003",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_36", "content": HOSTILE}],
            },
        },
        {"type": "custom-title", "customTitle": f"title {SHORT}\x1b[?1049h\x1bP1$q", "sessionId": SOURCE_ID},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def hostile_store(store_url: str, tmp_path: Path) -> tuple[str, str]:
    """(store URL, session id) of the hostile transcript imported by the console script."""
    imported = run_ok(
        "import", "claude-code", str(hostile_transcript(tmp_path / "h.jsonl")), "--json", "--db", store_url
    )
    [result] = json.loads(imported)["files"]
    return store_url, result["session"]


def on_a_terminal(*args: str) -> tuple[int, bytes, str]:
    """Run the console script with stdout a pseudo-terminal: (exit code, what the terminal got, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(SESSIONSTORE), *args], stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal's last writer
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    return proc.wait(timeout=60), got, err


@pytest.mark.parametrize("fmt", DATA_FORMATS)
def test_a_data_export_to_a_terminal_is_refused_with_a_hint(hostile_store: tuple[str, str], fmt: str) -> None:
    url, sid = hostile_store
    code, terminal, err = on_a_terminal("export", sid, "-f", fmt, "--db", url)
    assert code == 2, (code, err)
    assert terminal == b"", "nothing reaches the terminal"
    [line] = err.strip().splitlines()
    assert "-o FILE" in line and "pipe" in line and len(line) <= 80 and "Traceback" not in err
    piped = subprocess.run([str(SESSIONSTORE), "export", sid, "-f", fmt, "--db", url], capture_output=True, timeout=300)
    assert piped.returncode == 0 and piped.stdout, "a pipe still gets the export whole"


def test_markdown_to_a_terminal_shows_controls_as_text(hostile_store: tuple[str, str]) -> None:
    url, sid = hostile_store
    code, terminal, err = on_a_terminal("export", sid, "-f", "markdown", "--db", url)
    assert code == 0, err
    shown = terminal.decode("utf-8")
    assert unsafe_bytes(shown.replace("\r\n", "\n")) == [] and BIDI not in shown
    assert "\\x1b]52;c;" in shown and "\\u202e" in shown, "the controls are there, as visible text"


def test_html_title_and_headings_show_controls_as_text(hostile_store: tuple[str, str], tmp_path: Path) -> None:
    url, sid = hostile_store
    page = tmp_path / "export.html"
    run_ok("export", sid, "-f", "html", "-o", str(page), "--db", url)
    html = page.read_text(encoding="utf-8")
    title = html.split("<title>", 1)[1].split("</title>", 1)[0]
    heading = html.split('<h1 id="top">', 1)[1].split("</h1>", 1)[0]
    for text in (title, heading):
        assert unsafe_bytes(text) == [] and BIDI not in text, text
        assert "\\x1b[?1049h" in text and "\\u202e" in text and "\\x9b" in text


def test_a_browser_shows_the_title_and_heading_controls_as_text(hostile_store: tuple[str, str], tmp_path: Path) -> None:
    from tests.support.browser import chromium, open_page

    url, sid = hostile_store
    page = tmp_path / "export.html"
    run_ok("export", sid, "-f", "html", "-o", str(page), "--db", url)
    with chromium() as driver:
        open_page(driver, page)
        title = driver.execute_script("return document.title")
        heading = driver.execute_script("return document.getElementById('top').textContent")
    for text in (title, heading):
        assert unsafe_bytes(text) == [] and BIDI not in text, repr(text)
        assert "\\x1b]0;T\\x07" in text and "\\u202e" in text
