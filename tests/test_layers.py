"""The package layout is the architecture: no module imports from a layer above its own.

Layers, bottom to top (docs/design.md, "Packages and layers"): storage and the schema
migrations; compaction; import/export (interchange); the agent and the other
applications built on the store; the CLI. A module may import its own layer and
the ones below it. Imports under TYPE_CHECKING and inside functions count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Installed package -> folder in the checkout (setup.py maps the top-level folders).
FOLDERS = {
    "sessionstore": REPO / "sessionstore",
    "sessionstore.compaction": REPO / "compaction",
    "sessionstore.cli": REPO / "cli",
    "sessionstore.migrations": REPO / "migrations",
}

#: Package prefix -> layer; the longest matching prefix wins.
LAYERS = {
    "sessionstore": 0,
    "sessionstore.storage": 0,
    "sessionstore.migrations": 0,
    "sessionstore.compaction": 1,
    "sessionstore.interchange": 2,
    "sessionstore.agent": 3,
    "sessionstore.integrations": 3,
    "sessionstore.cli": 4,
    "sessionstore.__main__": 4,
}


def layer_of(module: str) -> int:
    """The layer of an installed module name."""
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def modules() -> dict[str, Path]:
    """Every installed module name with its file."""
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if package == "sessionstore" and parts and parts[0] in {"compaction", "cli", "migrations"}:
                continue
            found[".".join([package, *parts])] = path
    return found


def imported(module: str, path: Path) -> set[str]:
    """Absolute names of the sessionstore modules that a file imports."""
    is_package = path.name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{a.name}" for a in node.names)
    known = modules()
    return {n for n in names if n in known or n == "sessionstore"}


def test_every_folder_is_mapped_to_a_layer() -> None:
    found = modules()
    assert "sessionstore.storage.write.session" in found
    assert "sessionstore.compaction.pipeline" in found
    assert "sessionstore.cli.app" in found
    for name in found:
        assert layer_of(name) in LAYERS.values()


def test_no_import_goes_up_a_layer() -> None:
    violations = []
    for module, path in modules().items():
        mine = layer_of(module)
        for target in imported(module, path):
            if layer_of(target) > mine:
                violations.append(f"{module} (layer {mine}) imports {target} (layer {layer_of(target)})")
    assert not violations, "\n".join(sorted(violations))


def test_the_rule_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a storage module importing the pipeline is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("from sessionstore.compaction.pipeline import Pipeline\n")
    targets = imported("sessionstore.storage.bad", bad)
    assert "sessionstore.compaction.pipeline" in targets
    assert layer_of("sessionstore.compaction.pipeline") > layer_of("sessionstore.storage.bad")
