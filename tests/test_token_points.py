"""The HTML chart's token series: it rises with appends and drops at each compaction to the view's size."""

from __future__ import annotations

from sessionstore.compaction.engine import compact
from sessionstore import SessionStore
from sessionstore.interchange.export import token_points
from tests.support.messages import conversation


def test_series_drops_to_the_compacted_view_and_grows_from_there(store: SessionStore) -> None:
    s = store.create_session()
    msgs = list(conversation(120, seed=4))
    while msgs[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in msgs[-1]["content"]):
        msgs.pop()
    s.append_many(msgs)
    before = s.view_tokens
    compact(s)
    after = s.view_tokens
    assert after < before
    points = token_points(s)
    assert points[-1][1] == after, "summary and attachments are counted once, in the drop"
    assert max(p for _, p in points) == before
    s.append({"role": "user", "content": "Thanks, go on."})
    assert token_points(s)[-1][1] == s.view_tokens
