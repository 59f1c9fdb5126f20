"""Every block the Messages API returns is stored and sent back exactly (issue 38, part 1).

Known block types are validated as before; a block type the store does not know is kept
verbatim on a message that came from an API response (an SDK object, or a dict with the
response's `id` and `model`), counted by a conservative estimate and sent back unchanged;
a hand-written message with one is refused, naming the known types, unless the caller opts in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import anthropic.types as sdk_types
import anthropic.types.beta as sdk_beta
import pytest
from anthropic._models import construct_type

from sessionstore import SessionStore, UnknownBlockType
from sessionstore.storage.core.blocktypes import KNOWN_BLOCK_TYPES, RESPONSE_BLOCK_TYPES, VALIDATED_BLOCK_TYPES

#: Blocks the API returns today that the store refused before issue 38, as the API sends them.
RESPONSE_BLOCKS: list[dict[str, Any]] = [
    {
        "type": "fallback",
        "from": {"model": "claude-opus-4-7"},
        "to": {"model": "claude-sonnet-4-6"},
        "trigger": {"type": "refusal"},
    },
    {"type": "mcp_tool_listing", "mcp_server_name": "files", "tools": [{"name": "read", "input_schema": {}}]},
    {
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {"type": "tool_search_tool_search_result", "tool_references": []},
    },
    {"type": "advisor_tool_result", "tool_use_id": "srvtoolu_2", "content": {"type": "advisor_result", "text": "ok"}},
]
#: A block type no SDK knows yet: what the next API release may send.
FUTURE_BLOCK = {"type": "hologram_2027", "frames": [{"x": 1, "note": "kept as sent"}], "signature": "c2ln"}


def _response(content: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A Messages API response body as the server sends it."""
    return {
        "id": "msg_01ApiBlocks",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-7",
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 120, "output_tokens": 40},
        **extra,
    }


def _started(store: SessionStore) -> Any:
    session = store.create_session(title="api blocks")
    session.append({"role": "user", "content": "go"})
    return session


def test_response_blocks_from_an_sdk_message_are_stored_and_sent_back_exactly(store: SessionStore) -> None:
    """Parsed by the SDK's own beta types (as a client receives them): fallback (aliased `from`), listing,
    server tool results and an unknown future type all reach the view exactly as the wire carried them."""
    wire = [*RESPONSE_BLOCKS, FUTURE_BLOCK, {"type": "text", "text": "done"}]
    message = construct_type(type_=sdk_beta.BetaMessage, value=_response(json.loads(json.dumps(wire))))
    session = _started(store)
    stored = session.append(message)
    assert stored.content == wire
    assert stored.api_message_id == "msg_01ApiBlocks"
    reopened = SessionStore.open(store.url)
    try:
        view = reopened.get(session.id).active_view()
    finally:
        reopened.close()
    assert view[-1] == {"role": "assistant", "content": wire}


def test_unknown_block_on_a_response_dict_is_kept_and_counted_conservatively(store: SessionStore) -> None:
    """A dict with the response's id and model is an API response: its unknown block is kept and estimated
    at no less than one token per four characters of its JSON (the estimate never undercounts the window)."""
    session = _started(store)
    bare = session.append({"role": "assistant", "content": [{"type": "text", "text": "x"}]})
    stored = session.append(
        {"role": "assistant", "content": [FUTURE_BLOCK], "id": "msg_02", "model": "claude-opus-4-7"}
    )
    assert stored.content == [FUTURE_BLOCK]
    assert stored.tokens - bare.tokens >= len(json.dumps(FUTURE_BLOCK)) / 4 - 2
    assert session.active_view()[-1]["content"][-1] == FUTURE_BLOCK


def test_hand_written_unknown_block_is_refused_with_the_known_types(store: SessionStore) -> None:
    """A hand-written message is still checked strictly: the error names the type and lists the known ones."""
    session = _started(store)
    with pytest.raises(UnknownBlockType) as refused:
        session.append({"role": "assistant", "content": [FUTURE_BLOCK]})
    text = str(refused.value)
    assert "'hologram_2027'" in text
    for known in ("text", "tool_use", "compaction", "fallback"):
        assert known in text
    assert [m.seq for m in session.transcript()] == [1]


def test_hand_written_unknown_block_is_kept_when_the_caller_opts_in(store: SessionStore) -> None:
    """`allow_unknown_blocks=True` keeps a hand-written unknown block verbatim (append and append_many)."""
    session = _started(store)
    stored = session.append({"role": "assistant", "content": [FUTURE_BLOCK]}, allow_unknown_blocks=True)
    assert stored.content == [FUTURE_BLOCK]
    more = session.append_many(
        [{"role": "user", "content": "next"}, {"role": "assistant", "content": [dict(FUTURE_BLOCK)]}],
        allow_unknown_blocks=True,
    )
    assert more[-1].content == [FUTURE_BLOCK]


def test_known_response_blocks_are_accepted_hand_written(store: SessionStore) -> None:
    """The blocks the API returns today are known by name: a person may write them (e.g. from a saved response)."""
    session = _started(store)
    stored = session.append({"role": "assistant", "content": RESPONSE_BLOCKS})
    assert stored.content == RESPONSE_BLOCKS


def _union_types(union: Any) -> set[str]:
    """The `type` literals of an SDK content block union."""
    members = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        members = typing.get_args(members[0])
    found: set[str] = set()
    for cls in members:
        found.update(typing.get_args(cls.model_fields["type"].annotation))
    return found


@pytest.mark.parametrize(
    "union", [sdk_beta.BetaContentBlock, sdk_types.ContentBlock], ids=["BetaContentBlock", "ContentBlock"]
)
def test_every_block_type_of_the_installed_sdk_is_known(union: Any) -> None:
    """The next SDK release that adds a block type fails here until `blocktypes` says how to treat it."""
    types = _union_types(union)
    assert types, "the SDK union holds no block classes: the check itself is broken"
    missing = types - KNOWN_BLOCK_TYPES
    assert not missing, f"the installed SDK returns block types the store does not know: {sorted(missing)}"
    assert not VALIDATED_BLOCK_TYPES & RESPONSE_BLOCK_TYPES


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a person runs it."""
    exe = Path(sys.executable).parent / "sessionstore"
    return subprocess.run([str(exe), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False)


def test_cli_append_refuses_a_hand_written_unknown_block_and_takes_a_response(store: SessionStore) -> None:
    """From the console script: exit 2 with one line naming the type; the same block inside a response is stored."""
    session = _started(store)
    hand = json.dumps({"role": "assistant", "content": [FUTURE_BLOCK]})
    refused = _cli("append", session.id, "-", "--db", store.url, stdin=hand)
    assert refused.returncode == 2
    assert "hologram_2027" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    taken = _cli("append", session.id, "-", "--db", store.url, stdin=json.dumps(_response([FUTURE_BLOCK])))
    assert taken.returncode == 0, taken.stderr
    view = _cli("view", session.id, "--json", "--db", store.url)
    assert json.loads(view.stdout)["messages"][-1]["content"] == [FUTURE_BLOCK]
    opted = _cli("append", session.id, "-", "--allow-unknown-blocks", "--db", store.url, stdin=hand)
    assert opted.returncode == 0, opted.stderr


def test_response_fields_newer_than_the_store_are_kept_in_metadata(store: SessionStore) -> None:
    """A response field the store has no column for (the SDK's `stop_details`) goes into the metadata, not refused;
    one the SDK left null is dropped."""
    session = _started(store)
    body = _response([{"type": "text", "text": "hi"}], stop_details={"type": "refusal", "category": "x"})
    body["input_transformations"] = None
    stored = session.append(body)
    assert stored.metadata["stop_details"] == {"type": "refusal", "category": "x"}
    assert "input_transformations" not in stored.metadata
