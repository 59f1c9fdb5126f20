"""The package layout is the architecture: no module imports from a layer above its own, not even for a type.

Layers, bottom to top (docs/design.md, "Packages and layers"): storage and the schema
migrations; compaction; import/export (interchange); the agent and the other
applications built on the store; the CLI. A module may import its own layer and
the ones below it.

The import-linter contracts in pyproject.toml (`make lint`) hold this rule, and the storage
rooms', for every import that runs. This test adds what they leave out: an import under
TYPE_CHECKING, which names a type from another layer, must not go up a layer either.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.importgraph import graph, imports_of, modules

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


def test_every_folder_is_mapped_to_a_layer() -> None:
    found = modules()
    assert "sessionstore.storage.write.session" in found
    assert "sessionstore.compaction.pipeline" in found
    assert "sessionstore.cli.app" in found
    for name in found:
        assert layer_of(name) in LAYERS.values()


def test_no_import_goes_up_a_layer() -> None:
    violations = []
    for module, targets in graph(type_only=True).items():
        mine = layer_of(module)
        for target in targets:
            if layer_of(target) > mine:
                violations.append(f"{module} (layer {mine}) imports {target} (layer {layer_of(target)})")
    assert not violations, "\n".join(sorted(violations))


def test_the_rule_catches_an_upward_type_import(tmp_path: Path) -> None:
    """The checker itself: a storage module naming the pipeline for a type is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sessionstore.compaction.pipeline import Pipeline\n"
    )
    targets = imports_of("sessionstore.storage.bad", bad, modules(), type_only=True)
    assert "sessionstore.compaction.pipeline" in targets
    assert layer_of("sessionstore.compaction.pipeline") > layer_of("sessionstore.storage.bad")
