"""SVG snapshots of the browser's usage screen at 80x24 and 120x40, on the fixed data of
tests/test_browse_snapshots.py (two sessions on two UTC days, a quiet day between them).

Update with `pytest tests/test_browse_usage_snapshots.py --snapshot-update` after looking at the report.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_browse_snapshots import SESSION, SIZES, check, snapshot_url  # noqa: F401  (the fixture)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_usage_screen_of_every_session(
    snap_compare: Any,
    snapshot_url: str,  # noqa: F811  (the fixture imported above)
    size: tuple[int, int],
) -> None:
    check(snap_compare, snapshot_url, size, ["u"])


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_usage_screen_of_one_session(
    snap_compare: Any,
    snapshot_url: str,  # noqa: F811  (the fixture imported above)
    size: tuple[int, int],
) -> None:
    check(snap_compare, snapshot_url, size, ["u"], session=SESSION)


def test_the_day_chart_draws_every_day_adding_up_days_when_they_outnumber_the_columns() -> None:
    from datetime import date, timedelta

    from sessionstore.cli.browse.usage import chart_rows
    from sessionstore.usage import Usage, UsageRow

    days = []
    for i in range(100):
        usage = Usage()
        usage.add([0, 0, 0, 0, 0], 1, float(i % 10), "m")
        days.append(UsageRow((date(2026, 1, 1) + timedelta(days=i)).isoformat(), usage))
    lines = chart_rows(days, 80, 5)
    assert [len(line.plain) for line in lines[:-1]] == [50] * 4, "100 days in 80 columns: two days a bar"
    bars, axis = lines[:-1], lines[-1].plain
    assert axis.startswith("2026-01-01") and axis.endswith("2026-04-10"), "every one of the 100 days"
    tallest = [x for x in range(50) if bars[0].plain[x] == "█"]
    assert tallest == [x for x in range(50) if x % 5 == 4], "the days 8 and 9 of each ten cost the most"
    assert all(bars[-1].plain[x] != " " for x in range(50)), "every pair of days cost something"
