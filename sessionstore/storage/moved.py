"""Old module paths of the storage core, kept importing until release 0.3.0.

Release 0.2 moved the storage modules into rooms (`sessionstore.storage.session` is now
`sessionstore.storage.write.session`). An import of an old path gets the moved module
itself (the same object, so patching either name patches both), without a file per alias.
Nothing in this repository imports an old path; tests/test_storage_rooms.py checks both.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

#: Dropped in this release.
REMOVED_IN = "0.3.0"

#: Old module name (under sessionstore.storage) -> its room.
MOVED = {
    **dict.fromkeys(("errors", "types", "faults", "blocktypes", "gcpause", "output"), "core"),
    **dict.fromkeys(("textpack", "fastjson", "linepack", "searchpack", "tokens", "blobs"), "codecs"),
    **dict.fromkeys(("db", "models", "migrate", "config", "resolve"), "engine"),
    **dict.fromkeys(("validate", "apirules", "rows", "view"), "records"),
    **dict.fromkeys(("history", "recall", "paging", "message_info"), "read"),
    **dict.fromkeys(
        ("session", "rewrite", "pins", "spill", "replacements", "continuation", "fork", "memory", "apicompaction"),
        "write",
    ),
    "ownership": "team",
    **dict.fromkeys(("search", "usage_counts"), "derived"),
    **dict.fromkeys(("doctor", "vacuum", "stats"), "upkeep"),
}

PACKAGE = __name__.rpartition(".")[0]


def new_name(old: str) -> str | None:
    """The moved module's full name for an old full name, or None when it is not an old path."""
    prefix, _, leaf = old.rpartition(".")
    if prefix != PACKAGE or leaf not in MOVED:
        return None
    return f"{PACKAGE}.{MOVED[leaf]}.{leaf}"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the moved module."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old path; None for every other name."""
        if new_name(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The moved module, imported under its new name."""
        module = importlib.import_module(str(new_name(spec.name)))
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Give the moved module back its own spec (the import machinery set the alias's on it); it ran already."""
        module.__spec__ = module.__spec__.loader_state if module.__spec__ else None


def install() -> None:
    """Put the alias finder on the import path once."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
