"""`stats` names its two spill counts so they cannot be confused (issue 16, item 10).

`stats` said `"spills": 0` while `spill list` showed 2: it counted only results
whose view still shows the spill preview. Now `spilled_now` is that count and
`spilled_ever` the one `spill list` shows (a spill microcompact cleared since
included), in `--json` and in the table.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.storage.write.spill import list_spills
from sessionstore.storage.upkeep.stats import session_stats
from tests.support.cli import run_cli
from tests.support.layers import T0, tool_round, user

SOON = T0 + timedelta(minutes=30)


def _one_spilled_one_cleared(s) -> None:  # type: ignore[no-untyped-def]
    """Two results spilled; eleven Read rounds later microcompact clears the older spill."""
    pipeline = Pipeline(s.store)
    s.append(user("go"))
    s.append_many(tool_round("big", "B" * 60_000))
    pipeline.prepare(s, now=SOON)
    s.append_many([m for i in range(11) for m in tool_round(f"r{i}", f"contents of r{i}\n" * 40)])
    pipeline.prepare(s, now=SOON)
    s.append_many(tool_round("late", "L" * 60_000, name="Grep"))
    pipeline.prepare(s, now=SOON)
    assert sorted((x.tool_use_id, x.kind) for x in list_spills(s)) == [("big", "cleared"), ("late", "spilled")]


def test_stats_gives_both_spill_counts(store: SessionStore) -> None:
    s = store.create_session()
    _one_spilled_one_cleared(s)
    stats = session_stats(s)
    assert (stats["spilled_now"], stats["spilled_ever"]) == (1, 2)
    assert stats["spilled_ever"] == len(list_spills(s))
    assert "spills" not in stats


def test_cli_json_and_table_name_the_counts(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        _one_spilled_one_cleared(s)
    out = run_cli(capsys, "stats", s.id, "--json", "--db", sqlite_url)
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert (data["spilled_now"], data["spilled_ever"]) == (1, 2)
    listed = json.loads(run_cli(capsys, "spill", "list", s.id, "--json", "--db", sqlite_url).out)
    assert len(listed) == data["spilled_ever"]
    table = run_cli(capsys, "stats", s.id, "--db", sqlite_url).out
    assert "spilled now" in table and "spilled ever" in table and "spill list" in table
