"""The two ways a view becomes API messages agree: from entries, and from stored (role, JSON) rows.

`active_view()` on a freshly opened session builds its messages straight from
the stored JSON (the resume path); a handle that holds entries builds them
from those. Whatever the contents, both must send the same request.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore.storage.codecs.fastjson import loads_stored
from sessionstore.storage.records.rows import dumps
from sessionstore.storage.codecs.textpack import StoredJsonCorrupt
from sessionstore.storage.records.view import api_messages_from_json, to_api_messages
from tests.support.convo import Convo

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)

BLOCK = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, TEXT),
    st.builds(lambda i, t: {"type": "tool_result", "tool_use_id": f"t{i}", "content": t}, st.integers(0, 9), TEXT),
    st.builds(lambda i: {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"path": "a"}}, st.integers(0, 9)),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "s"}, TEXT),
    st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}),
)
CONTENT = st.one_of(TEXT, st.lists(BLOCK, min_size=1, max_size=5))
MESSAGES = st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), CONTENT), max_size=25)


def _convo(messages: list[tuple[str, Any]]) -> Convo:
    convo = Convo()
    for role, content in messages:
        convo.add(role, content)
    return convo


@given(MESSAGES)
def test_rows_and_entries_give_the_same_request(messages: list[tuple[str, Any]]) -> None:
    entries = _convo(messages).entries
    rows = [(role, dumps(content)) for role, content in messages]
    assert api_messages_from_json(rows) == to_api_messages(entries)


@given(st.lists(BLOCK, min_size=1, max_size=8))
def test_user_blocks_put_tool_results_first_in_order(blocks: list[dict[str, Any]]) -> None:
    [message] = to_api_messages(_convo([("user", blocks)]).entries)
    results = [b for b in blocks if b["type"] == "tool_result"]
    others = [b for b in blocks if b["type"] != "tool_result"]
    assert message["content"] == results + others


def test_messages_from_entries_do_not_share_blocks_with_the_cache() -> None:
    convo = _convo([("user", [{"type": "text", "text": "hi"}]), ("user", "more")])
    [message] = to_api_messages(convo.entries)
    message["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert convo.entries[0].content == [{"type": "text", "text": "hi"}]


def test_stored_json_decodes_like_json_loads_and_rejects_the_same() -> None:
    for text in ["[1,2]", '"x"', '{"a":[{}]}', " [1]", "[1] ", "1.5", "null", '"\\u00e9"']:
        assert loads_stored(text) == json.loads(text)
    for bad in ["", "[1", "[1]x", "nope"]:  # rejected as json.loads rejects them, as the typed damaged-row error
        with pytest.raises(StoredJsonCorrupt):
            loads_stored(bad)
