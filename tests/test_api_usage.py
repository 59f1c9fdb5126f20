"""What the server did is recorded (issue 38, part 4): context-editing reports and billed iterations.

`context_management.applied_edits` stays with its message and `show` says what was cleared;
`usage.iterations` is stored, and `usage`, `stats` and the cost count the compaction
iterations (whose tokens the top-level usage leaves out), checked against an independent sum.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic.types.beta as sdk_beta
from anthropic._models import construct_type

from sessionstore import SessionStore

MODEL = "claude-opus-4-7"


def _reply(n: int, *, iterations: bool, compaction: bool = False) -> dict[str, Any]:
    """A recorded response body; with `iterations`, the server compacted during it (threshold compaction)."""
    top = {"input_tokens": 1000 + n, "output_tokens": 200 + n, "cache_read_input_tokens": 50 * n}
    usage: dict[str, Any] = dict(top, cache_creation_input_tokens=0)
    if iterations:
        usage["iterations"] = [
            {
                "type": "compaction",
                "input_tokens": 150_000 + n,
                "output_tokens": 3_000 + n,
                "cache_read_input_tokens": 7 * n,
                "cache_creation_input_tokens": 0,
            },
            {"type": "message", "cache_creation_input_tokens": 0, "cache_read_input_tokens": 50 * n, **top},
        ]
    content: list[dict[str, Any]] = [{"type": "text", "text": f"answer {n}"}]
    if compaction:
        content.insert(0, {"type": "compaction", "content": f"summary {n}", "signature": f"sig{n}"})
    return {
        "id": f"msg_usage_{n}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
        "context_management": {
            "applied_edits": [
                {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 12, "cleared_input_tokens": 48_000}
            ]
        },
    }


def _independent_sum(bodies: list[dict[str, Any]]) -> dict[str, int]:
    """Input and output tokens billed: top-level usage plus every compaction iteration, summed here by hand."""
    total = {"input_tokens": 0, "output_tokens": 0, "cache_read": 0}
    for body in bodies:
        usage = body["usage"]
        parts = [usage] + [i for i in usage.get("iterations", []) if i["type"] == "compaction"]
        for part in parts:
            total["input_tokens"] += part["input_tokens"]
            total["output_tokens"] += part["output_tokens"]
            total["cache_read"] += part["cache_read_input_tokens"]
    return total


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "sessionstore"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120, check=False)


def _session_of(store: SessionStore, bodies: list[dict[str, Any]], title: str) -> Any:
    session = store.create_session(title=title, model=MODEL)
    for i, body in enumerate(bodies):
        session.append({"role": "user", "content": f"question {i}"})
        session.append(construct_type(type_=sdk_beta.BetaMessage, value=json.loads(json.dumps(body))))
    return session


def test_usage_and_stats_count_compaction_iterations(store: SessionStore) -> None:
    """`usage --json` and `stats --json` equal the hand sum; the cost equals a session billed the same tokens
    at top level (so iterations are priced as the model's input and output)."""
    bodies = [_reply(1, iterations=True, compaction=True), _reply(2, iterations=False), _reply(3, iterations=True)]
    session = _session_of(store, bodies, "iterations")
    expected = _independent_sum(bodies)
    flat = [dict(_reply(k, iterations=False), id=f"msg_flat_{k}") for k in range(len(bodies))]
    for body, plain in zip(bodies, flat, strict=True):
        total = _independent_sum([body])
        plain["usage"] = {
            "input_tokens": total["input_tokens"],
            "output_tokens": total["output_tokens"],
            "cache_read_input_tokens": total["cache_read"],
            "cache_creation_input_tokens": 0,
        }
    twin = _session_of(store, flat, "flat")
    report = _cli("usage", "--by", "session", "--json", "--db", store.url)
    assert report.returncode == 0, report.stderr
    rows = {r["session"]: r for r in json.loads(report.stdout)["rows"]}
    mine = rows[session.id]
    assert (mine["input_tokens"], mine["output_tokens"], mine["cache_read_tokens"]) == (
        expected["input_tokens"],
        expected["output_tokens"],
        expected["cache_read"],
    )
    assert mine["cost_usd"] is not None and mine["cost_usd"] == rows[twin.id]["cost_usd"]
    stats = json.loads(_cli("stats", session.id, "--json", "--db", store.url).stdout)["usage"]
    assert (stats["input_tokens"], stats["output_tokens"]) == (expected["input_tokens"], expected["output_tokens"])
    page = _cli("export", session.id, "--format", "html", "--db", store.url).stdout
    assert f"input {expected['input_tokens']:,}" in page and f"output {expected['output_tokens']:,}" in page


def test_show_says_what_the_server_cleared_and_billed(store: SessionStore) -> None:
    """The applied edits are kept with the message; `show` prints them and the iterations, in 80 columns."""
    body = _reply(1, iterations=True)
    session = _session_of(store, [body], "show")
    [reply] = [m for m in session.transcript() if m.role == "assistant"]
    assert reply.metadata["context_management"] == body["context_management"]
    assert reply.usage is not None and reply.usage["iterations"] == body["usage"]["iterations"]
    shown = _cli("show", session.id, str(reply.seq), "--db", store.url)
    assert shown.returncode == 0, shown.stderr
    assert "the server cleared 12 tool results, 48,000 tokens" in shown.stdout
    assert "compaction: 150,001 in, 3,001 out" in shown.stdout
    assert all(len(line) <= 80 for line in shown.stdout.splitlines())


def test_show_marks_a_failed_compaction(store: SessionStore) -> None:
    """A compaction block with null content is shown as failed."""
    session = store.create_session(title="failed")
    session.append({"role": "user", "content": "hello"})
    body = _reply(1, iterations=False)
    body["content"] = [{"type": "compaction", "content": None}]
    body["stop_reason"] = "compaction"
    stored = session.append(body)
    shown = _cli("show", session.id, str(stored.seq), "--db", store.url)
    assert "failed: the server returned no summary" in shown.stdout


def test_browse_message_screen_says_what_the_server_cleared(store: SessionStore) -> None:
    """The browse message screen shows the applied edits and the compaction iteration of a recorded response."""
    from sessionstore.cli.browse.app import make_app
    from sessionstore.cli.browse.message import MessageScreen
    from sessionstore.cli.browse.viewlist import ViewList
    from sessionstore.storage.read import paging
    from textual.widgets import Static
    from tests.test_browse import drive, settle

    session = _session_of(store, [_reply(1, iterations=True)], "browse")
    [reply] = [m for m in session.transcript() if m.role == "assistant"]
    seen: dict[str, Any] = {}

    async def steps(pilot: Any) -> None:
        pilot.app.screen.query_one("#messages", ViewList).move_to(paging.active_position(session, reply.seq))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(pilot.app.screen, MessageScreen)
        seen["body"] = " ".join(str(w.visual) for w in pilot.app.screen.query(Static))

    drive(make_app(store.url, session_id=session.id), steps)
    assert "the server cleared 12 tool results, 48,000 tokens" in seen["body"]
    assert "compaction: 150,001 in, 3,001 out" in seen["body"]
