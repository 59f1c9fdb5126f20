"""Realistic Messages-API dicts for storage tests: tool-using turns, streamed pieces, parallel calls."""

from __future__ import annotations

import random
from itertools import islice
from typing import Any, Iterator

PROMPTS = [
    "The integration tests time out on CI but pass locally; can you find out why?",
    "Please rename `parse_cfg` to `parse_config` everywhere and update the docs.",
    "Why does `make release` produce a wheel without the templates folder?",
    "Add a --dry-run flag to the sync command and cover it with a test.",
    "Here is the traceback from production: KeyError: 'tenant_id' in billing/invoices.py line 88",
]
FILES = ["src/app/config.py", "src/app/sync.py", "tests/test_sync.py", "billing/invoices.py", "docs/usage.md"]


def tool_output(rng: random.Random) -> str:
    """A tool result body of a few hundred to a few thousand characters."""
    lines = rng.randint(5, 60)
    return "\n".join(
        f"{i:5d}\t{rng.choice(['def ', 'return ', 'if ', '# ', 'assert '])}"
        f"{rng.choice(['value', 'config', 'tenant_id', 'items', 'result'])}_{rng.randint(0, 999)}"
        f" = {rng.random():.6f}"
        for i in range(1, lines)
    )


def conversation(n: int, seed: int = 0, prefix: str = "") -> Iterator[dict[str, Any]]:
    """Exactly `n` messages of a valid, tool-heavy conversation (it may end mid-turn)."""
    return islice(_endless(random.Random(seed), prefix), n)


def _endless(rng: random.Random, prefix: str) -> Iterator[dict[str, Any]]:
    """User request, 1-3 tool steps (thinking piece + tool_use piece, parallel calls), final text."""
    turn = 0
    while True:
        yield {"role": "user", "content": f"{prefix}{rng.choice(PROMPTS)} (request {turn})"}
        for step in range(rng.randint(1, 3)):
            api_id = f"msg_{prefix}{turn}_{step}"
            calls = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{prefix}{turn}_{step}_{k}",
                    "name": rng.choice(["Read", "Bash", "Grep"]),
                    "input": {"file_path": rng.choice(FILES)} if k % 2 == 0 else {"command": "pytest -x -q"},
                }
                for k in range(rng.choice([1, 1, 2, 3]))
            ]
            yield {
                "role": "assistant",
                "api_message_id": api_id,
                "content": [
                    {"type": "thinking", "thinking": f"Step {step}: look at {rng.choice(FILES)}.", "signature": "sig"}
                ],
                "usage": {"input_tokens": 1000 + turn, "output_tokens": 50},
            }
            yield {"role": "assistant", "api_message_id": api_id, "content": calls}
            yield {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": c["id"],
                        "content": tool_output(rng),
                        **({"is_error": True} if rng.random() < 0.1 else {}),
                    }
                    for c in calls
                ],
            }
        yield {
            "role": "assistant",
            "api_message_id": f"msg_{prefix}{turn}_end",
            "content": [{"type": "text", "text": f"Done with request {turn}: {tool_output(rng)[:200]}"}],
        }
        turn += 1
