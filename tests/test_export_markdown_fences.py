"""Markdown export: one message's code fence never swallows the next (issue 16, item 16).

An unterminated fence in a message turned every later message into code. The
export is parsed with a CommonMark parser (markdown-it, which rich already
depends on) to check that each message heading is still a heading and each
later text still a paragraph.
"""

from __future__ import annotations

import io

import pytest
from markdown_it import MarkdownIt

from sessionstore import SessionStore
from sessionstore.interchange.export import export_markdown

OPENERS = ["```python", "~~~", "````", "  ```js"]


def _parse(text: str) -> list:  # type: ignore[type-arg]
    return MarkdownIt("commonmark").parse(text)


@pytest.mark.parametrize("opener", OPENERS)
def test_an_unterminated_fence_stays_inside_its_message(store: SessionStore, opener: str) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "show me the loop"})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Here it is:\n{opener}\nfor i in range(3):\n    print(i)\n```` not a close\n"}
            ],
        }
    )
    s.append({"role": "user", "content": "thanks, now the **second** part"})
    s.append({"role": "assistant", "content": "Second part done."})
    out = io.StringIO()
    export_markdown(s, out)
    tokens = _parse(out.getvalue())
    headings = [t for t in tokens if t.type == "heading_open" and t.tag == "h3"]
    assert len(headings) == 4, out.getvalue()
    inline = [t.content for t in tokens if t.type == "inline"]
    assert "thanks, now the **second** part" in inline
    assert "Second part done." in inline
    code = [t.content for t in tokens if t.type == "fence"]
    assert any("print(i)" in c for c in code)


def test_tool_output_with_long_backtick_runs_is_fenced_longer(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "cat the readme"})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat README.md"}}],
        }
    )
    body = "# Title\n`````\nnested fence run\n"
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": body}]})
    s.append({"role": "assistant", "content": "That is the readme."})
    out = io.StringIO()
    export_markdown(s, out)
    tokens = _parse(out.getvalue())
    assert body.rstrip("\n") in [t.content.rstrip("\n") for t in tokens if t.type == "fence"]
    assert "That is the readme." in [t.content for t in tokens if t.type == "inline"]


def test_balanced_text_is_left_exactly_as_written() -> None:
    from sessionstore.interchange.export import closed_fences

    text = "Code:\n```py\nx = 1\n```\nand `inline` too"
    assert closed_fences(text) == text
    assert closed_fences("```\nopen") == "```\nopen\n```"
