"""The self-contained HTML export: escaping, structure, streaming, and a real browser.

The browser test drives Debian's headless chromium through chromedriver
(`apt-get install chromium chromium-driver`, `pip install selenium`) and
skips with a visible reason when either is missing.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.export import export_html
from sessionstore.interchange.export_html import (
    CSP,
    ROW_COLUMNS,
    ROWS_FLUSH_CHARS,
    SCRIPT,
    render_html,
    render_html_rows,
)
from sessionstore.interchange.importers import ImportPlan, parse_file
from sessionstore.interchange.importing import import_file
from sessionstore.storage.records.rows import dumps
from sessionstore.storage.core.types import StoredMessage
from tests.conftest import TRANSCRIPTS, missing
from tests.support.browser import chromium, click_everything, problems
from tests.support.browser import open_page as load_page

REPO = Path(__file__).resolve().parents[1]
SPOTTER = TRANSCRIPTS / "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"

PAYLOADS = (
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "[x](javascript:window.__pwned=1)",
    '"><svg onload="window.__pwned=1">',
    "javascript:window.__pwned=1",
)
EVIL = " ".join(PAYLOADS)


def estimate(content: Any) -> int:
    raw = content if isinstance(content, str) else json.dumps(content)
    return max(len(raw) // 4, 1)


def stored_from_plan(plan: ImportPlan) -> tuple[list[StoredMessage], list[dict[str, Any]], list[tuple[int, int]]]:
    """Transcript messages, boundary dicts and token points, as the store would give them."""
    messages: list[StoredMessage] = []
    for line in plan.lines:
        m = line.message
        if m is None:
            continue
        messages.append(
            StoredMessage(
                seq=len(messages) + 1,
                uuid=m["uuid"],
                role=m["role"],
                type=m["type"],
                content=m["content"],
                subtype=m["subtype"],
                parent_uuid=m["parent_uuid"],
                timestamp=m["timestamp"],
                api_message_id=m["api_message_id"],
                usage=m["usage"],
                is_meta=m["is_meta"],
                is_compact_summary=m["is_compact_summary"],
                metadata=m["metadata"],
                tokens=estimate(m["content"]),
            )
        )
    by_uuid = {m.uuid: m for m in messages}
    boundaries, points = [], []
    starts = {b.boundary_uuid: b for b in plan.boundaries}
    view_tokens = 0
    for m in messages:
        if m.uuid in starts:
            view_tokens = 0
        view_tokens += m.tokens
        points.append((m.seq, view_tokens))
    for k, b in enumerate(plan.boundaries, start=1):
        seqs = [by_uuid[u].seq for u in b.summarized]
        summary = by_uuid[b.summary_uuid] if b.summary_uuid else None
        boundaries.append(
            {
                "index": k,
                "uuid": b.boundary_uuid,
                "seq": by_uuid[b.boundary_uuid].seq,
                "kind": b.kind,
                "trigger": b.trigger,
                "pre_tokens": b.pre_tokens,
                "post_tokens": summary.tokens if summary else None,
                "summary": summary.content if summary and isinstance(summary.content, str) else "",
                "summarized_seqs": (min(seqs), max(seqs)) if seqs else None,
            }
        )
    return messages, boundaries, points


def message(seq: int, role: str, content: Any, **extra: Any) -> StoredMessage:
    extra.setdefault("type", role)
    return StoredMessage(seq=seq, uuid=f"m{seq}", role=role, content=content, **extra)


def evil_transcript() -> tuple[list[StoredMessage], list[dict[str, Any]], list[tuple[int, int]]]:
    """Every place content can appear, each carrying the payloads."""
    use = {"type": "tool_use", "id": "toolu_1", "name": EVIL, "input": {"command": EVIL}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": EVIL}],
        "is_error": True,
    }
    messages = [
        message(1, "user", EVIL, timestamp=EVIL, metadata={"cwd": EVIL}),
        message(
            2,
            "assistant",
            [{"type": "thinking", "thinking": EVIL, "signature": "s"}, {"type": "text", "text": EVIL}, use],
        ),
        message(3, "user", [result, {"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}}]),
        message(4, "assistant", [{"type": EVIL, "data": EVIL}]),
        message(5, "system", "Conversation compacted", subtype="compact_boundary"),
        message(6, "user", EVIL, is_compact_summary=True),
        message(7, EVIL, EVIL, type=EVIL, subtype=EVIL),
    ]
    boundaries = [
        {
            "index": 1,
            "uuid": "m5",
            "seq": 5,
            "kind": EVIL,
            "trigger": EVIL,
            "pre_tokens": 900,
            "post_tokens": 100,
            "summary": EVIL,
            "summarized_seqs": (1, 4),
        }
    ]
    return messages, boundaries, [(1, 100), (2, 400), (3, 700), (4, 900), (5, 0), (6, 100), (7, 150)]


def render(messages: Any, boundaries: list[dict[str, Any]], points: list[tuple[int, int]], title: str = "t") -> str:
    out = io.StringIO()
    render_html(out, title=title, messages=messages, boundaries=boundaries, token_points=points)
    return out.getvalue()


def as_row(m: StoredMessage) -> tuple[Any, ...]:
    """The ROW_COLUMNS row the store would hold for `m` (JSON as the store writes it, flags as SQLite gives them)."""
    usage = dumps(m.usage) if m.usage is not None else None
    return (
        m.seq,
        m.uuid,
        m.role,
        m.type,
        m.subtype,
        m.timestamp,
        usage,
        int(m.is_meta),
        int(m.is_compact_summary),
        dumps(m.content),
    )


def render_rows(rows: Any, boundaries: list[dict[str, Any]], points: list[tuple[int, int]], title: str = "t") -> str:
    out = io.StringIO()
    render_html_rows(out, title=title, rows=rows, boundaries=boundaries, token_points=points)
    return out.getvalue()


# ---------------------------------------------------------------- string checks


def test_every_payload_is_escaped() -> None:
    messages, boundaries, points = evil_transcript()
    page = render(messages, boundaries, points, title=EVIL)
    assert page.count("<script") == 1, "only the page's own script"
    assert page.count("</script>") == 1
    for raw in PAYLOADS:
        assert raw not in page or not re.search("[<>\"']", raw), "markup never survives"
    assert "[x](javascript:window.__pwned=1)" in page, "a markdown link stays plain text"
    assert 'href="javascript' not in page.lower()
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in page
    assert "<img" not in page and "<svg onload" not in page
    assert not re.search(r"<[a-zA-Z][^>]*\son[a-z]+\s*=", page), "no tag carries an event handler"
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(h.startswith("#") for h in hrefs), "links from content are never made clickable"
    assert not re.search(r"<[a-zA-Z][^>]*\s(src|srcset|data)\s*=", page), "no tag loads anything"
    assert "https://example.com" not in page, "image URLs are not even shown"


def test_attributes_hold_only_fixed_or_numeric_values() -> None:
    messages, boundaries, points = evil_transcript()
    page = render(messages, boundaries, points, title=EVIL)
    for name, value in re.findall(r'\s(id|class)="([^"]*)"', page):
        assert re.fullmatch(r"[a-z0-9 _-]*", value), f"{name}={value!r}"
    assert 'id="boundary-1"' in page


def test_page_is_self_contained_and_locked_down() -> None:
    messages, boundaries, points = evil_transcript()
    page = render(messages, boundaries, points)
    assert "Content-Security-Policy" in page and "default-src &#x27;none&#x27;" in page
    assert "script-src &#x27;sha256-" in page and "'unsafe-inline'" not in CSP.split("script-src")[1]
    assert SCRIPT in page
    assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", page.replace("http://www.w3.org", ""))
    assert "@import" not in page and "url(" not in page


def test_structure_folds_tools_thinking_and_replaced_segment() -> None:
    messages, boundaries, points = evil_transcript()
    page = render(messages, boundaries, points)
    assert page.count('<details class="tool-use">') == 1
    assert page.count('<details class="tool-result error">') == 1
    assert page.count('<details class="thinking">') == 1
    assert page.count('<details class="replaced">') == 1
    folded = page.split('<details class="replaced">')[1].split('id="boundary-1"')[0]
    assert all(f'id="m{seq}"' in folded for seq in (1, 2, 3, 4))
    nav = page.split("<nav>")[1].split("</nav>")[0]
    assert '<a href="#boundary-1">' in nav and "&lt;script&gt;" in nav, "the summary is shown, escaped"
    assert "<polyline" in page and 'class="drop"' in page


def test_render_streams_as_it_goes() -> None:
    messages, boundaries, points = evil_transcript()
    out = io.StringIO()
    seen_sizes: list[int] = []

    def feed() -> Iterator[StoredMessage]:
        for m in messages:
            seen_sizes.append(len(out.getvalue()))
            yield m

    render_html(out, title="t", messages=feed(), boundaries=boundaries, token_points=points)
    assert seen_sizes == sorted(seen_sizes) and len(set(seen_sizes)) == len(messages)


def test_lone_surrogates_and_nul_do_not_break_the_page() -> None:
    page = render([message(1, "user", "a\ud800b\x00c")], [], [])
    page.encode("utf-8")
    assert "a\ufffdb\ufffdc" in page


def test_rows_give_the_same_page_as_messages() -> None:
    """The export's fast path (raw rows, cheaper escaping) renders exactly what render_html does."""
    messages, boundaries, points = evil_transcript()
    messages.append(message(8, "user", "a\x00b", usage={"input_tokens": 3, "cache": {"n": 1}}, is_meta=True))
    assert render_rows([as_row(m) for m in messages], boundaries, points, title=EVIL) == render(
        messages, boundaries, points, title=EVIL
    )
    if SPOTTER.is_file():
        real, real_boundaries, real_points = stored_from_plan(parse_file(SPOTTER))
        assert render_rows(map(as_row, real), real_boundaries, real_points) == render(
            real, real_boundaries, real_points
        )


def test_rows_render_streams_in_bounded_pieces() -> None:
    """Rows are written in pieces: what is held back never exceeds ROWS_FLUSH_CHARS."""
    rows = [as_row(message(seq, "user", f"{seq} " + "<x> " * 250)) for seq in range(1, 401)]
    out = io.StringIO()
    written: list[int] = []

    def feed() -> Iterator[tuple[Any, ...]]:
        for row in rows:
            written.append(len(out.getvalue()))
            yield row

    render_html_rows(out, title="t", rows=feed(), boundaries=[], token_points=[])
    page = out.getvalue()
    assert len(page) > 4 * ROWS_FLUSH_CHARS
    for seq, size in enumerate(written, start=1):
        rendered_before = page.index(f'<article class="msg role-user type-user" id="m{seq}">')
        assert rendered_before - size < ROWS_FLUSH_CHARS, f"row {seq}: too much output held back"
    assert len(set(written)) > 4


def test_stored_nul_and_lone_surrogate_escapes_are_replaced(store: SessionStore) -> None:
    """Content from the store whose JSON escapes decode to NUL or a lone surrogate still renders safely."""
    s = store.create_session(title="t")
    s.append_many([{"role": "user", "content": "a\x00b <i>"}, {"role": "assistant", "content": "c"}])
    raw = '[{"type":"text","text":"c\\ud800d <b>"}]'
    store.db.run_write(
        lambda db: db.execute(
            "UPDATE messages SET content_json = :raw WHERE session_id = :id AND seq = 2", {"raw": raw, "id": s.id}
        ).close()
    )
    out = io.StringIO()
    assert export_html(store.get(s.id), out) == 2
    page = out.getvalue()
    page.encode("utf-8")
    assert "a\ufffdb &lt;i&gt;" in page and "c\ufffdd &lt;b&gt;" in page


def test_export_of_a_stored_transcript_matches_render_html(sqlite_url: str, transcripts_dir: Path) -> None:
    """Rows read back from the store (real JSON as stored) render like the StoredMessages they hold."""
    with SessionStore.open(sqlite_url) as st:
        sid = import_file(st, str(SPOTTER), source="claude-code").session_id
        session = st.get(sid)
        rows = st.db.all(f"SELECT {ROW_COLUMNS} FROM messages WHERE session_id = :id ORDER BY seq", {"id": sid})
        messages = list(session.transcript())
    assert len(rows) == len(messages) > 0
    assert render_rows(rows, [], []) == render(messages, [], [])


def test_boundary_without_its_message_still_has_an_anchor() -> None:
    boundary = {"index": 3, "uuid": "gone", "seq": 2, "kind": "full", "trigger": "auto", "summary": "s"}
    page = render([message(1, "user", "a"), message(3, "user", "b")], [boundary], [])
    assert page.index('id="boundary-3"') < page.index('id="m3"')


# ---------------------------------------------------------------- browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless chromium via chromedriver, no downloads, fresh profile."""
    with chromium() as driver:
        yield driver


def open_page(driver: Any, tmp_path: Path, page: str) -> None:
    path = tmp_path / "export.html"
    path.write_text(page, encoding="utf-8")
    load_page(driver, path)


def test_real_transcript_in_a_browser(browser: Any, tmp_path: Path) -> None:
    if not SPOTTER.is_file():
        missing("TRANSCRIPTS", f"real transcript not found at {SPOTTER}")
    from selenium.webdriver.common.by import By

    messages, boundaries, points = stored_from_plan(parse_file(SPOTTER))
    open_page(browser, tmp_path, render(messages, boundaries, points, title="spotter"))
    assert problems(browser) == []
    assert browser.execute_script("return document.querySelectorAll('article.msg').length") == len(messages)
    assert browser.execute_script("return document.querySelectorAll('details.replaced').length") == 1
    link = browser.find_element(By.CSS_SELECTOR, 'nav a[href="#boundary-1"]')
    before = browser.execute_script("return window.scrollY")
    link.click()
    top = browser.execute_script("return document.getElementById('boundary-1').getBoundingClientRect().top")
    height = browser.execute_script("return window.innerHeight")
    assert browser.execute_script("return window.scrollY") > before
    assert 0 <= top < height, "the boundary is on screen after the click"
    assert problems(browser) == []


def test_injected_content_executes_nothing(browser: Any, tmp_path: Path) -> None:
    messages, boundaries, points = evil_transcript()
    open_page(browser, tmp_path, render(messages, boundaries, points, title=EVIL))
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.querySelectorAll('img, iframe, object, embed').length") == 0
    toggles, links = click_everything(browser)
    assert toggles >= 6 and links >= 3
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return [...document.querySelectorAll('details')].every(d => d.open)")
    assert problems(browser) == []
