"""`sessionstore browse` on a session whose boundaries the Messages API made (tests/support/apisession.py).

Driven with Textual's pilot on both engines. Expectations come from `history --boundary K --json`: the
session screen lists each API boundary with its kind and trigger; Enter on one opens the boundary
screen, whose first pane is the view that boundary replaced (for a background compaction, the request
it sent, not what was appended while it was in flight), its summarized messages marked, whose second
pane is the compaction block's summary; a compaction message opens to its summary, not to the block's
encrypted copy and signature.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from sessionstore import SessionStore
from sessionstore.cli.browse.app import make_app
from sessionstore.cli.browse.boundary import BoundaryScreen
from sessionstore.cli.browse.message import MessageScreen
from sessionstore.cli.browse.session import SessionScreen
from sessionstore.cli.browse.viewlist import ViewList
from tests.support.apisession import MEANWHILE, make_api_session
from tests.support.cli import run_cli
from tests.support.fakeapi import start_fake_api
from tests.support.pilot import drive, settle
from tests.test_browse import all_rows


async def open_boundary(pilot: Pilot[None], k: int) -> None:
    """From the session screen: focus the boundary list, put the cursor on boundary `k`, press Enter."""
    await pilot.press("b")
    pilot.app.screen.query_one("#boundaries", DataTable).move_cursor(row=k - 1)
    await pilot.press("enter")
    await settle(pilot)


def test_api_boundaries_open_to_their_trigger_summary_and_replaced_messages(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with SessionStore.open(store_url) as store, start_fake_api(default="noted") as api:
        made = make_api_session(store, api)
    expected = [
        json.loads(run_cli(capsys, "history", made.id, "-b", str(k), "--json", "--db", store_url).out)
        for k in range(1, len(made.kinds) + 1)
    ]
    seen: dict[str, Any] = {"boundaries": []}

    async def steps(pilot: Pilot[None]) -> None:
        assert isinstance(pilot.app.screen, SessionScreen)
        table = pilot.app.screen.query_one("#boundaries", DataTable)
        seen["listed"] = [tuple(str(cell) for cell in table.get_row_at(i)[:3]) for i in range(table.row_count)]
        for k in range(1, len(made.kinds) + 1):
            await open_boundary(pilot, k)
            screen = pilot.app.screen
            assert isinstance(screen, BoundaryScreen) and screen.index == k
            before = screen.query_one("#before-list", ViewList)
            rows = all_rows(before)
            await pilot.press("2")
            await settle(pilot)
            seen["boundaries"].append(
                {
                    "info": str(screen.query_one("#boundary-info", Static).visual),
                    "rows": [r.seq for r in rows],
                    "marked": {r.seq for r in rows if r.seq in before.marked},
                    "summary": str(screen.query_one("#summary-text", Static).visual),
                    "previews": [r.preview for r in rows],
                }
            )
            await pilot.press("q")
            await settle(pilot)
        # Boundary 2 replaced the view boundary 1 made: its second row is the API's compaction message.
        await open_boundary(pilot, 2)
        await pilot.press("down", "enter")
        await settle(pilot)
        detail = pilot.app.screen
        assert isinstance(detail, MessageScreen)
        seen["detail"] = (detail.shown.message.seq, " ".join(str(w.visual) for w in detail.query(Static)))

    drive(make_app(store_url, session_id=made.id), steps)
    assert seen["listed"] == [(str(k), kind, trigger) for k, (kind, trigger) in enumerate(made.kinds, 1)]
    for k, (shown, want) in enumerate(zip(seen["boundaries"], expected, strict=True), 1):
        kind, trigger = made.kinds[k - 1]
        assert f"boundary {k} of 3 · {kind} · {trigger} ·" in shown["info"]
        assert shown["rows"] == [e["seq"] for e in want["entries"]], f"boundary {k}: the view it replaced"
        assert shown["marked"] == {m["seq"] for m in want["summarized"]} & set(shown["rows"]) and shown["marked"]
        assert shown["summary"] == made.summaries[k - 1] == want["boundary"]["summary"]
    assert not any(m in p for p in seen["boundaries"][2]["previews"] for m in MEANWHILE)
    later = [p for b in seen["boundaries"][1:] for p in b["previews"]]
    first_line = " ".join(made.summaries[0].split())[:30]
    assert any(p.startswith(f"[compaction] {first_line}") for p in later), "a compaction row reads as its summary"
    assert "[compaction]" not in later
    seq, text = seen["detail"]
    assert seq == expected[0]["boundary"]["summary_seq"]
    assert made.summaries[0] in text
    assert "encrypted_content" not in text and "signature" not in text
