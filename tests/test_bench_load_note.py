"""The benches say how busy the machine was from the load they measured, never from an assumption."""

from __future__ import annotations

import os

import pytest

from bench import common


@pytest.mark.parametrize("share, word", [(0.1, "quiet"), (3.0, "shared with other work")])
def test_the_note_follows_the_measured_load(monkeypatch: pytest.MonkeyPatch, share: float, word: str) -> None:
    cpus = os.cpu_count() or 1
    monkeypatch.setattr(common, "LOAD_AT_START", share * cpus)
    note = common.load_note()
    assert note.startswith(f"Load average {share * cpus:.1f} on {cpus} cores") and word in note
