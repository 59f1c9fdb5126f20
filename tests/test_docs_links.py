"""Every relative link of the README and of docs/ leads somewhere: a file that exists and, for a link with
a #fragment, a heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).

Links to other sites (`https:`, `mailto:`) are not followed. Links inside code blocks and code spans are
text, not links, and are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def outside_fences(text: str) -> list[str]:
    """The lines of a markdown text that are not inside a fenced code block."""
    kept, fence = [], ""
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
        elif match:
            fence = match.group(1)
        else:
            kept.append(line)
    return kept


def prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, each with its code spans blanked."""
    return [re.sub(r"(`+)(.+?)\1", lambda m: "`" + "x" * len(m.group(2)) + "`", line) for line in outside_fences(text)]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def heading_anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file, a repeated heading numbered as GitHub numbers it."""
    seen: dict[str, int] = {}
    found = set()
    for line in outside_fences(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if match:
            slug = anchor(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """Each relative link of `page` whose file or heading does not exist, with why."""
    wrong = []
    for line in prose(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                continue  # another site
            path, _, fragment = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                wrong.append(
                    f"{target}: no file {resolved.relative_to(ROOT) if ROOT in resolved.parents else resolved}"
                )
            elif fragment and (resolved.suffix != ".md" or fragment not in heading_anchors(resolved)):
                wrong.append(f"{target}: no heading #{fragment} in {resolved.name}")
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    wrong = broken_links(page)
    assert not wrong, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(wrong)


def test_the_readme_links_to_every_docs_page() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve()
        for line in prose((ROOT / "README.md").read_text(encoding="utf-8"))
        for target in LINK.findall(line)
        if target.startswith("docs/")
    }
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link to: {unlinked}"


def test_a_broken_link_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `watch` command's options\n\n## Same\n\n## Same\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#the-watch-commands-options) [ok](#page) [ok](other.md#same-1)\n"
        "[web](https://example.com/x.md) `[code](missing.md)`\n\n```sh\necho [x](missing.md)\n```\n\n"
        "[gone](missing.md) [bad](other.md#nope) [bad](#nope)\n"
    )
    assert broken_links(page) == [
        f"missing.md: no file {tmp_path / 'missing.md'}",
        "other.md#nope: no heading #nope in other.md",
        "#nope: no heading #nope in page.md",
    ]
