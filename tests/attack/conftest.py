"""The attacker suite's record of what it tried; tests/conftest.py prints it at the end of the run (also under pytest-xdist)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

#: (store kind, role profile) -> objects tried (kind:name), filled by the tests.
TRIED: dict[tuple[str, str], set[str]] = defaultdict(set)


def record(store: str, profile: str, objects: list[str]) -> None:
    """Note that `profile` attacked these catalogue objects of a store of this kind."""
    TRIED[(store, profile)].update(objects)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A pytest-xdist worker hands its record to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["attack_tried"] = [[s, p, sorted(o)] for (s, p), o in TRIED.items()]


def summary_lines(from_workers: list[list[Any]]) -> list[str]:
    """One line per store kind and role profile: the catalogue objects attacked, by kind (tests/conftest.py
    prints them at the end of the run, where pytest-xdist's controller sees them too)."""
    merged: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (store, profile), objects in TRIED.items():
        merged[(store, profile)].update(objects)
    for store, profile, objects in from_workers:
        merged[(store, profile)].update(objects)
    lines = []
    for (store, profile), objects in sorted(merged.items()):
        by_kind: dict[str, list[str]] = defaultdict(list)
        for item in sorted(objects):
            kind, _, name = item.partition(":")
            by_kind[kind].append(name)
        kinds = "; ".join(f"{kind} ({len(names)}): {', '.join(names)}" for kind, names in sorted(by_kind.items()))
        lines.append(f"{store} store, {profile}: {kinds}")
    return lines
