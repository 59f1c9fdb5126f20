"""What a claude-code export or install carries besides the chain (issue #35), on both engines.

Each assistant line names its model (`message.model`), so a re-imported session knows its model and
its cost; a boundary installed from a fork keeps the trigger and token count of its compaction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.newstore import engine_of, new_store_url
from tests.support.outside import private_env, sessionstore

MODEL = "claude-sonnet-4-5-20250929"
CODEX_COMPACTED = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


@pytest.fixture
def other_url(store_url: str, tmp_path: Path) -> Iterator[str]:
    """A second, empty database on the engine of `store_url`."""
    with new_store_url(engine_of(store_url), tmp_path / "other.db") as url:
        yield url


def _reply(i: int) -> str:
    usage = {"input_tokens": 1_000 * i, "output_tokens": 50, "cache_read_input_tokens": 0}
    return json.dumps(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {i}"}],
            "usage": usage,
            "api_message_id": f"msg_0{i}export{i}",
        }
    )


def test_an_exported_session_keeps_its_model_and_cost(store_url: str, other_url: str, tmp_path: Path) -> None:
    env = private_env(tmp_path / "home")
    made = sessionstore(store_url, env, "new", "--model", MODEL, "--json")
    sid = json.loads(made.out)["id"]
    turns = [json.dumps({"role": "user", "content": f"question {i}"}) + "\n" + _reply(i) for i in (1, 2)]
    assert sessionstore(store_url, env, "append", sid, "-", stdin="\n".join(turns) + "\n").code == 0
    [original] = json.loads(sessionstore(store_url, env, "sessions", "--json").out)
    assert original["cost_usd"] is not None

    exported = tmp_path / "out.jsonl"
    assert sessionstore(store_url, env, "export", sid, "-f", "claude-code", "-o", str(exported)).code == 0
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert [x["message"].get("model") for x in lines if x["type"] == "assistant"] == [MODEL, MODEL]

    ran = sessionstore(other_url, env, "import", "claude-code", str(exported))
    assert ran.code == 0, ran.err
    [back] = json.loads(sessionstore(other_url, env, "sessions", "--json").out)
    assert (back["model"], back["cost_usd"]) == (MODEL, pytest.approx(original["cost_usd"]))


def test_an_installed_fork_keeps_its_boundarys_trigger_and_tokens(
    store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    env = private_env(tmp_path / "home")
    assert sessionstore(store_url, env, "import", "codex", str(transcripts_dir / CODEX_COMPACTED)).code == 0
    [session] = json.loads(sessionstore(store_url, env, "sessions", "--json").out)
    [boundary] = json.loads(sessionstore(store_url, env, "history", session["id"], "--json").out)
    assert boundary["trigger"] and boundary["pre_tokens"]
    forked = sessionstore(store_url, env, "fork", session["id"], "--json")
    assert forked.code == 0, forked.err
    fork_id = json.loads(forked.out)["id"]
    claude = tmp_path / "claude"
    ran = sessionstore(
        store_url, env, "export", fork_id, "-f", "claude-code", "--install", "--claude-dir", str(claude), "--json"
    )
    assert ran.code == 0, ran.err
    written = Path(json.loads(ran.out)["path"]).read_text(encoding="utf-8").splitlines()
    first = json.loads(written[0])
    assert first["subtype"] == "compact_boundary"
    assert first["compactMetadata"]["trigger"] == boundary["trigger"]
    assert first["compactMetadata"]["preTokens"] == boundary["pre_tokens"]
