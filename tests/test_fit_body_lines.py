"""`fit_body` keeps as much of a summary as fits: a line too long to keep whole is cut inside, not dropped.

A summary a few tokens over its budget whose last section is one long paragraph (as a model writes
it) lost the whole paragraph: 286 tokens against a 300 budget came back as 44.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionstore.compaction.condense import fit_body
from sessionstore.storage.codecs.tokens import estimate_text

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def long_paragraphs(transcripts: Path, count: int) -> list[str]:
    """The first `count` message texts of a real session of 1,000 characters or more, each on one line."""
    found = []
    for line in (transcripts / SPOTTER).read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        content = (entry.get("message") or {}).get("content")
        if entry.get("type") not in ("user", "assistant"):
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        text = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
        if len(text) >= 1_000:
            found.append(" ".join(text.split()))
        if len(found) == count:
            return found
    pytest.skip("the shared session has too few long texts")


@pytest.mark.parametrize("over", [1, 14, 40])
def test_a_summary_slightly_over_keeps_nearly_all_of_it(transcripts_dir: Path, over: int) -> None:
    first, second = long_paragraphs(transcripts_dir, 2)
    body = f"1. Primary Request and Intent:\n{first[:400]}\n\n2. Key Technical Concepts:\n{second}"
    budget = estimate_text(body) - over
    cut = fit_body(body, budget)
    assert estimate_text(cut) <= budget
    assert estimate_text(cut) >= budget - 30, f"{estimate_text(cut)} of a {budget} budget kept"
    assert cut.startswith(body[:200]), "the summary is cut at its end, its start kept as it was"
    assert "2. Key Technical Concepts:" in cut and second[:100] in cut, "the long line is cut inside, not dropped"


def test_one_long_line_alone_is_cut_to_fit(transcripts_dir: Path) -> None:
    [text] = long_paragraphs(transcripts_dir, 1)
    budget = estimate_text(text) // 2
    cut = fit_body(text, budget)
    assert budget - 30 <= estimate_text(cut) <= budget
    assert text.startswith(cut.rstrip("…").rstrip()[:200])
