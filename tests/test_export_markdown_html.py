"""Markdown export renders stored HTML as the text it is (issue 20, item 3).

`<img onerror=...>`, `<a href="javascript:...">` and `<script>` in a message, a title, a tool
name, a summary or a subtype used to pass through as raw HTML, which a CommonMark viewer runs.
The export is rendered with a CommonMark renderer (markdown-it, which rich depends on): no HTML
element of the stored text may come out as an element, every one must come out as its text, and
the markdown around it (code fences and spans, emphasis) still renders as markdown.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact, make_summarizer
from sessionstore.interchange.export import export_markdown
from sessionstore.interchange.markdown_text import code_span, markdown_body

IMG = '<img src=x onerror="alert(1)">'
LINK = '<a href="javascript:alert(2)">click</a>'
SCRIPT = "<script>alert(3)</script>"
PAYLOAD = f"{IMG} {LINK} {SCRIPT}"


def rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").render(markdown)


def assert_inert(page: str) -> None:
    """No element the stored text carried exists in the rendered HTML; its text is shown instead."""
    for tag in ("<img", "<a ", "<script", "<b>", "<div", "<!--", "<?php", "<![CDATA", 'href="https://evil'):
        assert tag not in page, (tag, page)


@pytest.mark.parametrize(
    "text",
    [
        PAYLOAD,
        f"<div>\n{IMG}\n</div>",
        f"before\n\n{SCRIPT}\n\nafter",
        f"*emphasis* and {LINK} and `code <b>kept</b>` **bold**",
        f"- a list item {IMG}\n  - nested {LINK}",
        f"> quoted {IMG}",
        f"`unclosed span {IMG}",
        f"``double ` tick {IMG}``",
        f"\\`escaped tick {IMG}`",
        f"`a\n# {IMG} `",
        f"| `a | {IMG} b` |",
        f"- x\n  ```\n{IMG}\n  ```",
        f"    indented {IMG}",
        f"<!-- {IMG} -->",
        f"<https://evil.example/{IMG}>",
        f"<?php {IMG} ?>",
        f"<![CDATA[{IMG}]]>",
    ],
)
def test_html_in_text_renders_as_text(text: str) -> None:
    page = rendered(markdown_body(text))
    assert_inert(page)


def test_a_code_span_split_by_a_table_cell_is_no_shelter() -> None:
    """GFM tables cut a row at `|` before code spans are read: `<` in a span holding `|` is escaped too."""
    text = f"| h | i |\n|---|---|\n| `a | {IMG} b` | c |"
    page = MarkdownIt("commonmark").enable("table").render(markdown_body(text))
    assert "<table>" in page
    assert_inert(page)


def test_code_fences_and_spans_keep_their_text_exactly() -> None:
    text = f"Run:\n```html\n{IMG}\n```\nand `{LINK}` is inline."
    page = rendered(markdown_body(text))
    assert html.escape(IMG, quote=False) in page.replace("&quot;", '"')
    assert f"<code>{html.escape(LINK, quote=False)}</code>" in page.replace("&quot;", '"')
    assert "&amp;lt;" not in page, "the code shows < itself, not an entity"


def test_markdown_around_the_html_still_renders() -> None:
    page = rendered(markdown_body(f"*emphasis* {IMG} **bold**"))
    assert "<em>emphasis</em>" in page and "<strong>bold</strong>" in page
    assert "&lt;img" in page


@pytest.mark.parametrize("name", ["Bash", "a`b", "``", f"`{IMG}`", IMG])
def test_a_tool_name_is_one_inline_code_span(name: str) -> None:
    page = rendered(code_span(name))
    assert page.count("<code>") == 1 and "<img" not in page


def test_the_whole_export_renders_every_payload_as_text(store: SessionStore) -> None:
    s = store.create_session(title=f"title {PAYLOAD}")
    s.append({"role": "user", "content": f"text {PAYLOAD}\n\n{SCRIPT}"})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"answer {PAYLOAD}"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": PAYLOAD}},
            ],
        }
    )
    s.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": f"result {PAYLOAD}"}]}
    )
    s.append({"role": "assistant", "content": f"done {LINK}"})
    s.append({"role": "system", "content": f"note {IMG}", "subtype": "<img src=x onerror=f()>"})
    for i in range(6):
        s.append({"role": "user", "content": f"more {i} {SCRIPT} " * 30})
        s.append({"role": "assistant", "content": f"reply {i} {IMG} " * 30})
    compact(s, summarizer=make_summarizer("extractive"))
    out = io.StringIO()
    export_markdown(s, out)
    page = rendered(out.getvalue())
    assert page.count("<details>") == 1, "the export's own summary block is still HTML"
    inert = page.replace("<details>", "").replace("<summary>Summary</summary>", "").replace("</details>", "")
    assert_inert(inert)
    assert "&lt;img" in page and "&lt;script" in page and "&lt;a href" in page


def test_an_imported_tool_name_cannot_break_out_of_its_code_span(store: SessionStore, tmp_path: Path) -> None:
    from sessionstore.interchange.importing import import_paths
    from tests.support.hostile import write_claude_code

    sid = import_paths(store, [write_claude_code(tmp_path)], source="claude-code")[0].session_id
    out = io.StringIO()
    export_markdown(store.get(str(sid)), out)
    page = rendered(out.getvalue())
    assert_inert(page)
    assert "\x1b" not in out.getvalue() and "\x9b" not in out.getvalue()
