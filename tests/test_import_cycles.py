"""No two modules of the package import each other, directly or round a circle.

The graph counts every import that runs: module level and inside functions, since a deferred
import that only hides a circle is still one. Type-only imports (under TYPE_CHECKING) name a
type for an annotation and never run, so they do not count (tests/support/importgraph.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.importgraph import cycle_path, cycles, graph, modules


def test_the_graph_sees_every_room() -> None:
    found = modules()
    for name in (
        "sessionstore.storage",
        "sessionstore.compaction.pipeline",
        "sessionstore.cli.app",
        "sessionstore.cli.browse.app",
    ):
        assert name in found


def test_no_import_cycle() -> None:
    arrows = graph()
    circles = [" -> ".join(cycle_path(arrows, c)) + f"   ({len(c)} modules)" for c in cycles(arrows)]
    assert not circles, "import cycles:\n" + "\n".join(circles)


def test_the_check_finds_a_deferred_circle(tmp_path: Path) -> None:
    """A circle closed by an import inside a function is found, with its path."""
    arrows = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(arrows) == [["a", "b", "c"]]
    assert cycle_path(arrows, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    pkg = tmp_path / "sessionstore"
    (pkg / "storage").mkdir(parents=True)
    for folder in ("compaction", "cli", "migrations"):
        (tmp_path / folder).mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "storage" / "__init__.py").write_text("")
    (pkg / "storage" / "one.py").write_text("from . import two\n")
    (pkg / "storage" / "two.py").write_text("def later():\n    from .one import thing\n")
    (pkg / "storage" / "three.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .one import x\n"
    )
    (pkg / "storage" / "one.py").write_text("from . import two\nfrom . import three\n")
    assert cycles(graph(tmp_path)) == [["sessionstore.storage.one", "sessionstore.storage.two"]]
