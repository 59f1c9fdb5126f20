"""A claim names its proof: every test, test function and bench script the README and docs/ name exists.

A guarantee that cites `tests/test_x.py::test_y` or a figure that cites `bench/z.py` is only as good
as the citation; a renamed test or a deleted bench must not leave the page pointing at nothing.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: `tests/…py` or `bench/…py`, optionally with `::name` (a test function, class or class::method).
CITED = re.compile(r"\b((?:tests|bench)/[\w/]+\.py)(?:::([\w:]+))?")


def cited(text: str) -> list[tuple[str, str | None]]:
    """The (file, name) pairs a page cites."""
    return [(m.group(1), m.group(2)) for m in CITED.finditer(text)]


def defined_names(path: Path) -> set[str]:
    """Top-level functions and classes of a file, and `Class::method` for their methods."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(f"{node.name}::{item.name}" for item in node.body if isinstance(item, ast.FunctionDef))
    return names


def dangling(page: Path) -> list[str]:
    """What a page cites that does not exist."""
    missing = []
    for file, name in cited(page.read_text()):
        path = REPO / file
        if not path.is_file():
            missing.append(file)
        elif name and name not in defined_names(path):
            missing.append(f"{file}::{name}")
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cited_test_and_bench_exists(page: Path) -> None:
    assert not dangling(page), f"{page.name} cites what does not exist: {dangling(page)}"


def test_the_pages_cite_proofs() -> None:
    """The README's guarantees cite tests, the performance page cites benches."""
    assert any(f.startswith("tests/") for f, _ in cited((REPO / "README.md").read_text()))
    assert any(f.startswith("bench/") for f, _ in cited((REPO / "docs" / "storage-and-performance.md").read_text()))


def test_a_dangling_citation_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Held by `tests/test_layers.py::test_no_such_test` and `bench/no_such_bench.py`.\n")
    assert dangling(page) == ["tests/test_layers.py::test_no_such_test", "bench/no_such_bench.py"]
