"""The module import graph of the installed package, read from the source files.

Every `import` and `from … import` that runs counts: at module level and inside functions
(a deferred import still ties two modules together). Imports under `if TYPE_CHECKING:` do
not: they never run, they only name a type for an annotation. `from pkg import name`
is an arrow to `pkg.name` when that is a module, else to `pkg` itself. Used by the
cycle test and the layer test; the folder map is setup.py's.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: Installed package -> folder in the checkout (setup.py maps the top-level folders).
FOLDERS = {
    "sessionstore": REPO / "sessionstore",
    "sessionstore.compaction": REPO / "compaction",
    "sessionstore.cli": REPO / "cli",
    "sessionstore.migrations": REPO / "migrations",
}

#: Folders whose files are not modules of the package (Alembic loads its revisions by path).
NOT_MODULES = {"versions"}


def modules(root: Path = REPO) -> dict[str, Path]:
    """Every installed module name with its source file."""
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        folder = root / folder.relative_to(REPO)
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if package == "sessionstore" and parts and parts[0] in {"compaction", "cli", "migrations"}:
                continue
            if NOT_MODULES & set(parts):
                continue
            found[".".join([package, *parts])] = path
    return found


def imports_of(module: str, path: Path, known: set[str] | dict[str, Path], *, type_only: bool = False) -> set[str]:
    """The package's modules that one file imports, anywhere in it (with the TYPE_CHECKING ones if `type_only`)."""
    is_package = path.name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    skipped = set() if type_only else {id(n) for b in _type_checking_blocks(tree) for s in b.body for n in ast.walk(s)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    found.add(f"{target}.{alias.name}")
                elif target in known:
                    found.add(target)
    found.discard(module)
    return found


def _type_checking_blocks(tree: ast.AST) -> list[ast.If]:
    """The `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks of a module."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
    ]


def graph(root: Path = REPO, *, type_only: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports (the TYPE_CHECKING ones too if `type_only`)."""
    known = modules(root)
    return {name: imports_of(name, path, known, type_only=type_only) for name, path in known.items()}


def cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(arrows):
        if start in index:
            continue
        work = [(start, iter(sorted(arrows[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            pushed = False
            for target in targets:
                if target not in arrows:
                    continue
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(arrows[target]))))
                    pushed = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def cycle_path(arrows: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete circle through a component, for the failure message (a -> b -> ... -> a)."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(arrows[node] & members):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    return component
