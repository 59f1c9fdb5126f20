"""The concurrency soak, on each engine: no error reaches a caller, nothing goes missing."""

from __future__ import annotations

import json
import os

import pytest

from tests.soak.run import run

SECONDS = float(os.environ.get("SESSIONSTORE_SOAK_SECONDS", "30"))

pytestmark = pytest.mark.slow


def test_writers_compactor_and_reader_together(store_url: str) -> None:
    report = run(store_url, SECONDS)
    print("\nsoak report:", json.dumps(report))
    assert report["errors"] == []
    assert report["missing_messages"] == 0
    assert report["appends"] > 0 and report["views_checked"] > 0 and report["compactions"] > 0
