"""What the token estimator's guard costs on the append path, and what it fixes.

    python bench/token_guard.py [--out bench/RESULTS.md] [--messages 3000]

The guards (sessionstore/storage/codecs/tokens.py: `_spread_error` sends a whole
slice to tiktoken, `_run_correction` counts long runs exactly) handle text
unlike the calibration. Measured here, in one process:

* cost: µs per `estimate_content` call with the guard as shipped and with it
  switched off, on the append benchmark's realistic messages and on every text
  of the shared Claude Code transcripts (when present), fastest of 5 passes;
  how many texts and characters went to tiktoken;
* accuracy: estimate / tiktoken on the same texts, and on the adversarial
  shapes of issue 16 (guard off = the estimator before the guard).

Results replace the section between the `token_guard` markers of the output file.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.append_resume import make_messages  # noqa: E402  (after the sys.path line above)
from bench.common import RESULTS, machine_info, load_note, machine_line, write_section  # noqa: E402  (after the sys.path line above)
from sessionstore.storage import tokens  # noqa: E402  (after the sys.path line above)

PASSES = 15


def _transcript_texts() -> list[str]:
    """Every countable text of the shared Claude Code transcripts (empty when absent)."""
    base = REPO.parent / "shared" / "transcripts" / "claude-code"
    texts: list[str] = []
    for path in sorted(base.rglob("*.jsonl")) if base.is_dir() else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            message = json.loads(line).get("message") if line.strip() else None
            if isinstance(message, dict) and "content" in message:
                texts.extend(t for t in tokens._text_pieces(message["content"]) if t)
    return texts


def _adversarial() -> dict[str, str]:
    rng = random.Random(16)
    records = [{"id": i, "name": f"item{i}", "tags": ["a", "b"], "v": rng.random()} for i in range(400)]
    return {
        "120,000 ACGT": "".join(rng.choice("ACGT") for _ in range(120_000)),
        "20,000 `=`": "=" * 20_000,
        "base64, 40 kB": base64.b64encode(rng.randbytes(30_000)).decode(),
        "hex, 40 kB": rng.randbytes(20_000).hex(),
        "minified JSON, 30 kB": json.dumps(records, separators=(",", ":")),
        "CJK (rare), 3,000 chars": "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(3_000)),
        "5,000 spaces": "a" + " " * 5_000 + "b",
    }


@contextlib.contextmanager
def _guard_off() -> Iterator[None]:
    """Context: the guards switched off (the estimator as it was before)."""
    spread, runs = tokens._spread_error, tokens._run_correction
    tokens._spread_error = lambda *args: 0.0  # type: ignore[assignment]
    tokens._run_correction = lambda *args: 0.0  # type: ignore[assignment]
    try:
        yield
    finally:
        tokens._spread_error, tokens._run_correction = spread, runs  # type: ignore[assignment]


def _fastest(fn: Callable[[], Any], count: int) -> float:
    """CPU µs per item (process time: less disturbed by other processes), fastest of PASSES passes."""
    best = float("inf")
    for _ in range(PASSES):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best / max(count, 1) * 1e6


def _cost_rows(name: str, contents: list[Any]) -> list[str]:
    """Table rows: µs per estimate with the guards on and off, and what went to tiktoken."""
    guarded: list[int] = []
    touched = 0
    real = tokens._exact_chunked
    tokens._exact_chunked = lambda text: (guarded.append(len(text)), real(text))[1]  # type: ignore[assignment]
    try:
        for content in contents:
            before = len(guarded)
            tokens.estimate_content(content)
            touched += len(guarded) > before
    finally:
        tokens._exact_chunked = real  # type: ignore[assignment]
    on = _fastest(lambda: [tokens.estimate_content(c) for c in contents], len(contents))
    with _guard_off():
        off = _fastest(lambda: [tokens.estimate_content(c) for c in contents], len(contents))
    chars = sum(len(str(c)) for c in contents)
    return [
        f"| {name} | {len(contents):,} | {off:.2f} | {on:.2f} | {on - off:+.2f} | {touched:,} "
        f"| {sum(guarded):,} of ~{chars:,} |"
    ]


def _ratio(texts: list[str]) -> tuple[float, float]:
    """(estimate / exact with the guard off, with it on) over the concatenated figures."""
    exact = sum(tokens.exact_count(t) for t in texts) or 1
    on = sum(tokens.estimate_text(t) for t in texts)
    with _guard_off():
        off = sum(tokens.estimate_text(t) for t in texts)
    return off / exact, on / exact


def report(message_count: int) -> str:
    """The markdown section."""
    info = machine_info()
    bench_msgs = [m["content"] for m in make_messages(message_count)]
    transcript = _transcript_texts()
    lines = [
        "## Token estimate guard",
        "",
        f"`python bench/token_guard.py --messages {message_count}` — {info['date']}.",
        "",
        machine_line(info) + " " + load_note() + " Timings are CPU time (process time), fastest of 15 passes.",
        "",
        "CPU µs per `estimate_content` call (the append path's estimate):",
        "",
        "| messages | count | µs, guards off | µs, guards on | difference | messages touched | chars tokenized |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *_cost_rows("append benchmark messages", bench_msgs),
    ]
    if transcript:
        lines += _cost_rows("shared Claude Code transcript texts", transcript)
        off, on = _ratio(transcript)
        lines += ["", f"Transcript texts, sum of estimates / tiktoken: guard off {off:.3f}, guard on {on:.3f}."]
    lines += [
        "",
        "Adversarial texts (estimate / tiktoken):",
        "",
        "| text | tiktoken | guard off | guard on |",
        "|---|---:|---:|---:|",
    ]
    for name, text in _adversarial().items():
        exact = tokens.exact_count(text)
        off, on = _ratio([text])
        lines.append(f"| {name} | {exact:,} | {off:.2f} | {on:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="markdown file to update")
    parser.add_argument("--messages", type=int, default=3000, help="append-benchmark messages to estimate")
    args = parser.parse_args(argv)
    text = report(args.messages)
    write_section(args.out, "token_guard", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
