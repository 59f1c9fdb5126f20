"""`sessionstore export --format html` end to end: a real imported transcript and hostile content in Chromium."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from sessionstore.compaction.engine import compact
from sessionstore import SessionStore
from tests.support.browser import chromium, click_everything, open_page, problems
from tests.support.cli import run_cli

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "[x](javascript:window.__pwned=1)",
)
EVIL = " ".join(PAYLOADS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def export_html(capsys: pytest.CaptureFixture[str], url: str, sid: str, out: Path) -> str:
    result = run_cli(capsys, "export", sid, "--format", "html", "-o", str(out), "--db", url)
    assert result.code == 0, result.err
    return out.read_text(encoding="utf-8")


def test_an_imported_real_transcript_opens_and_navigates(
    browser: Any, capsys: pytest.CaptureFixture[str], sqlite_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    result = run_cli(capsys, "import", "claude-code", str(transcripts_dir / SPOTTER), "--json", "--db", sqlite_url)
    assert result.code == 0, result.err
    row = json.loads(result.out)["files"][0]
    page = tmp_path / "spotter.html"
    export_html(capsys, sqlite_url, row["session"], page)

    open_page(browser, page)
    assert problems(browser) == []
    assert browser.execute_script("return document.querySelectorAll('article.msg').length") == row["messages_added"]
    link = browser.find_element(By.CSS_SELECTOR, 'nav a[href="#boundary-1"]')
    before = browser.execute_script("return window.scrollY")
    link.click()
    top = browser.execute_script("return document.getElementById('boundary-1').getBoundingClientRect().top")
    assert browser.execute_script("return window.scrollY") > before
    assert 0 <= top < browser.execute_script("return window.innerHeight"), "the boundary is on screen"
    assert problems(browser) == []


def hostile_session(store: SessionStore) -> str:
    """A session whose every kind of content carries the payloads, compacted once (the summary quotes them)."""
    s = store.create_session(title=EVIL, cwd=EVIL)
    s.append_many(
        [
            {"role": "user", "content": EVIL},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": EVIL, "signature": "sig"},
                    {"type": "text", "text": EVIL},
                    {"type": "tool_use", "id": "toolu_evil", "name": "Bash", "input": {"command": EVIL}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_evil",
                        "is_error": True,
                        "content": [{"type": "text", "text": EVIL}],
                    },
                    {"type": "text", "text": EVIL},
                ],
            },
            {"role": "assistant", "content": EVIL},
            # enough ordinary talk that the summary shrinks the view (a compaction that would not is declined)
            *(
                {"role": r, "content": "go on" if r == "user" else "plain filler the summary drops. " * 200}
                for _ in range(3)
                for r in ("user", "assistant")
            ),
        ]
    )
    compact(s, custom_instructions=EVIL)
    s.append_many([{"role": "user", "content": EVIL}, {"role": "assistant", "content": EVIL}])
    return s.id


def test_hostile_content_executes_nothing(
    browser: Any, capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path
) -> None:
    with SessionStore.open(sqlite_url) as st:
        sid = hostile_session(st)
    page = tmp_path / "evil.html"
    text = export_html(capsys, sqlite_url, sid, page)
    assert "<script>window" not in text and "<img" not in text, "no payload survives as markup"
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in text, "the payloads reached the page, escaped"
    assert "[x](javascript:window.__pwned=1)" in text and 'href="javascript' not in text

    open_page(browser, page)
    assert browser.execute_script("return window.__pwned") is None
    assert (
        browser.execute_script("return document.querySelectorAll('img, iframe, object, embed, svg image').length") == 0
    )
    toggles, links = click_everything(browser)
    assert toggles >= 4 and links >= 1
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return [...document.querySelectorAll('details')].every(d => d.open)")
    assert browser.execute_script("return document.body.innerText").count("window.__pwned=1") >= len(PAYLOADS)
    assert problems(browser) == []
