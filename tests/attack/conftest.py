"""The attacker suite's record of what it tried, printed at the end of the run (also under pytest-xdist)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

#: (store kind, role profile) -> objects tried (kind:name), filled by the tests.
TRIED: dict[tuple[str, str], set[str]] = defaultdict(set)
_FROM_WORKERS: list[list[Any]] = []


def record(store: str, profile: str, objects: list[str]) -> None:
    """Note that `profile` attacked these catalogue objects of a store of this kind."""
    TRIED[(store, profile)].update(objects)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist, in the controller: gather a finished worker's record."""
    output = getattr(node, "workeroutput", None) or {}
    _FROM_WORKERS.extend(output.get("attack_tried", []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A pytest-xdist worker hands its record to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["attack_tried"] = [[s, p, sorted(o)] for (s, p), o in TRIED.items()]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which objects of the catalogue each role profile attacked, on which stores."""
    merged: dict[tuple[str, str], set[str]] = defaultdict(set)
    for (store, profile), objects in TRIED.items():
        merged[(store, profile)].update(objects)
    for store, profile, objects in _FROM_WORKERS:
        merged[(store, profile)].update(objects)
    if not merged:
        return
    terminalreporter.write_sep("-", "attacker suite: catalogue objects tried, by store and role")
    for (store, profile), objects in sorted(merged.items()):
        by_kind: dict[str, list[str]] = defaultdict(list)
        for item in sorted(objects):
            kind, _, name = item.partition(":")
            by_kind[kind].append(name)
        kinds = "; ".join(f"{kind} ({len(names)}): {', '.join(names)}" for kind, names in sorted(by_kind.items()))
        terminalreporter.write_line(f"{store} store, {profile}: {kinds}")
