"""The write-path estimate on text unlike the calibration (issue 16, item 3).

The weights were fitted on prose, code and JSON; a guard sends text of other
shapes (long runs without spaces, base64, hex, repeated punctuation, minified
JSON, CJK, whitespace runs) to tiktoken. These tests hold the estimate to the
design's 10% of tiktoken on such text, alone and mixed with ordinary text,
with hypothesis generating the mixes.
"""

from __future__ import annotations

import ast
import base64
import json
import random
import re
import string
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionstore.storage.codecs import tokens
from sessionstore.storage.codecs.tokens import GUARD_UPPER_RUN, estimate_content, estimate_text, exact_count

TOLERANCE = 0.10
#: Rounding and a piece cut at a slice or chunk edge: a couple of tokens on any text.
SLACK = 3

_STDLIB = Path(ast.__file__).parent


def _within(text: str) -> tuple[bool, int, int]:
    """(estimate within tolerance of tiktoken, estimate, exact)."""
    est, exact = estimate_text(text), exact_count(text)
    return abs(est - exact) <= TOLERANCE * exact + SLACK, est, exact


def _prose() -> list[str]:
    """Docstrings of a few standard-library modules: ordinary technical prose."""
    out = []
    for name in ("argparse.py", "textwrap.py", "json/__init__.py", "logging/__init__.py"):
        tree = ast.parse((_STDLIB / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 300:
                    out.append(doc)
    return out


PROSE = _prose()
CODE = (_STDLIB / "textwrap.py").read_text(encoding="utf-8")


def _dna(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("ACGT") for _ in range(n))


def _letters(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters) for _ in range(n))


def _b64(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n * 3 // 4 + 1)).decode()[:n]


def _hex(rng: random.Random, n: int) -> str:
    return rng.randbytes(n // 2 + 1).hex()[:n]


def _uuids(rng: random.Random, n: int) -> str:
    import uuid

    return "\n".join(str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(max(1, n // 37)))


def _punct(rng: random.Random, n: int) -> str:
    return rng.choice("=-*#~_.+/|") * n


def _minified_json(rng: random.Random, n: int) -> str:
    records = [
        {"id": rng.getrandbits(32), "name": rng.choice(PROSE).split()[0], "tags": ["a", "b"], "ok": rng.random() < 0.5}
        for _ in range(max(1, n // 60))
    ]
    return json.dumps(records, separators=(",", ":"))


def _cjk(rng: random.Random, n: int) -> str:
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n))


def _common_chinese(rng: random.Random, n: int) -> str:
    phrase = "我们今天讨论一下这个问题的解决方案，然后再决定下一步怎么做。"
    return (phrase * (n // len(phrase) + 1))[:n]


def _emoji(rng: random.Random, n: int) -> str:
    return "".join(chr(rng.randint(0x1F600, 0x1F64F)) for _ in range(n))


def _spaces(rng: random.Random, n: int) -> str:
    return "x" + rng.choice(" \t") * n + "y"


def _newlines(rng: random.Random, n: int) -> str:
    return "end" + "\n" * n + "start"


ADVERSARIAL: dict[str, Callable[[random.Random, int], str]] = {
    "dna": _dna,
    "letters": _letters,
    "base64": _b64,
    "hex": _hex,
    "uuids": _uuids,
    "punctuation": _punct,
    "minified_json": _minified_json,
    "cjk": _cjk,
    "common_chinese": _common_chinese,
    "emoji": _emoji,
    "spaces": _spaces,
    "newlines": _newlines,
}


def test_the_issue_examples_are_within_tolerance() -> None:
    """120,000 ACGT chars were 21 tokens (tiktoken ~60,000); 20,000 `=` were 10,004 (exact 317)."""
    rng = random.Random(16)
    for text in (_dna(rng, 120_000), "=" * 20_000):
        ok, est, exact = _within(text)
        assert ok, f"estimate {est} vs exact {exact} for {text[:20]!r}..."
    message = [{"type": "text", "text": _dna(rng, 120_000)}]
    assert estimate_content(message) > 50_000


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL))
@pytest.mark.parametrize("size", [200, 5_000, 60_000])
def test_adversarial_text_alone_and_in_prose(kind: str, size: int) -> None:
    rng = random.Random(f"{kind}-{size}")
    text = ADVERSARIAL[kind](rng, size)
    ok, est, exact = _within(text)
    assert ok, f"{kind} alone: estimate {est} vs exact {exact}"
    mixed = f"{rng.choice(PROSE)}\n\n{text}\n\n{rng.choice(PROSE)}"
    ok, est, exact = _within(mixed)
    assert ok, f"{kind} in prose: estimate {est} vs exact {exact}"


@st.composite
def _mixed_texts(draw: st.DrawFn) -> tuple[list[tuple[bool, str]], str]:
    """(adversarial?, text) parts, ordinary prose or code between adversarial segments of any size, and a separator."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    parts: list[tuple[bool, str]] = []
    for _ in range(draw(st.integers(1, 5))):
        choice = draw(st.sampled_from(["prose", "code", *sorted(ADVERSARIAL)]))
        if choice == "prose":
            parts.append((False, rng.choice(PROSE)))
        elif choice == "code":
            start = draw(st.integers(0, len(CODE) - 4000))
            parts.append((False, CODE[start : start + draw(st.integers(300, 4000))]))
        else:
            # Below the shortest guarded run, a shape can be a few tokens off (the joins' slack).
            parts.append((True, ADVERSARIAL[choice](rng, draw(st.integers(GUARD_UPPER_RUN, 20_000)))))
    return parts, draw(st.sampled_from(["\n", "\n\n", " ", ""]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixed_texts())
def test_generated_mixes_within_tolerance(mix: tuple[list[tuple[bool, str]], str]) -> None:
    """Within 10% of tiktoken, or, where ordinary text carries the estimator's own error
    (up to ~±15% on a short code window), adversarial parts add at most 10% of their size to it."""
    parts, separator = mix
    text = separator.join(part for _, part in parts)
    est, exact = estimate_text(text), exact_count(text)
    if abs(est - exact) <= TOLERANCE * exact + SLACK:
        return
    ordinary_error = sum(estimate_text(p) - exact_count(p) for adversarial, p in parts if not adversarial)
    adversarial_size = sum(exact_count(p) for adversarial, p in parts if adversarial)
    joins = SLACK * len(parts)
    assert abs((est - exact) - ordinary_error) <= TOLERANCE * adversarial_size + joins, (
        f"estimate {est} vs exact {exact} (len {len(text)}); ordinary parts' own error {ordinary_error}"
    )


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=3000))
def test_arbitrary_unicode_is_never_far_off(text: str) -> None:
    """Arbitrary code points (hypothesis's default text): the non-ASCII guard counts them exactly."""
    est, exact = estimate_text(text), exact_count(text)
    assert abs(est - exact) <= 0.5 * exact + 8, f"estimate {est} vs exact {exact}"


def test_ordinary_text_stays_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard must not turn the append path into tokenizing: prose never trips it, code only its `-----` rules."""
    calls: list[int] = []
    real = tokens._exact_chunked

    def counting(text: str) -> int | None:
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(tokens, "_exact_chunked", counting)
    for doc in PROSE:
        estimate_text(doc)
    estimate_content(
        [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a/b.py", "limit": 200}}]
    )
    assert calls == []
    chunks = [CODE[start : start + 2000] for start in range(0, len(CODE) - 2000, 2000)]
    for chunk in chunks:
        estimate_text(chunk)
    runs = {
        len(m.group()) for chunk in chunks for m in re.finditer(r"[%s]{12,}" % re.escape(string.punctuation), chunk)
    }
    assert set(calls) <= runs, "only the long punctuation runs (`-----` rules) are tokenized, never a whole chunk"
    calls.clear()
    estimate_text("=" * 100)
    assert calls == [100]


def test_guard_without_bpe_file_keeps_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tiktoken file: guarded text falls back to the calibrated estimate instead of failing."""
    monkeypatch.setattr(tokens, "exact_available", lambda: False)
    assert estimate_text("=" * 20_000) == 10_000
