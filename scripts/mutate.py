"""Mutation testing of the modules that hold promises: `make mutate` (not part of `make test`).

Each mutant changes one token of one covered line (a comparison, an arithmetic or boolean operator, a
constant) and runs only the tests that executed that line; a mutant no test kills is a *survivor*,
listed with its line so a person can say why it is harmless or add the test that kills it.

Mutants are written into a copy of the package laid out as it installs (build/mutate/pkg/sessionstore,
with compaction/, cli/ and migrations/ inside it), which `PYTHONPATH` puts ahead of the editable
install: the checkout itself is never changed, so a killed run leaves nothing behind.

    python scripts/mutate.py                      # every module below
    python scripts/mutate.py sessionstore/storage/write/fork.py --limit 50
    python scripts/mutate.py --jobs 1 --resume    # one at a time; skip mutants already in results.jsonl

Each outcome is appended to build/mutate/results.jsonl as it is known, so a stopped run loses nothing:
`--resume` runs only the mutants not yet recorded for the module's current source.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import tokenize
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutate"
PKG = WORK / "pkg"
RESULTS = WORK / "results.jsonl"
#: The top-level folders that install beneath `sessionstore.` (setup.py's MAPPED).
MAPPED = ("compaction", "cli", "migrations")

#: Module -> the test files that exercise it; coverage then narrows each mutant to the tests of its line.
TARGETS: dict[str, list[str]] = {
    "sessionstore/storage/write/rewrite.py": [
        "tests/test_compaction.py",
        "tests/test_budget_spill.py",
        "tests/test_microcompact.py",
        "tests/test_snip.py",
        "tests/test_compact_pivot.py",
        "tests/test_api_compaction.py",
    ],
    "sessionstore/storage/write/fork.py": ["tests/test_fork.py", "tests/test_fork_cli.py", "tests/test_usage_once.py"],
    "sessionstore/storage/codecs/linepack.py": [
        "tests/test_line_blocks.py",
        "tests/test_storage_packing.py",
        "tests/test_claude_code_export_fidelity.py",
    ],
    "sessionstore/storage/read/history.py": [
        "tests/test_history_paging.py",
        "tests/test_history_summary.py",
        "tests/test_compaction.py",
    ],
    "compaction/commit.py": [
        "tests/test_summary_budget.py",
        "tests/test_pins.py",
        "tests/test_compact_pivot.py",
        "tests/test_facts_gate.py",
        "tests/test_compaction.py",
    ],
    "compaction/partial.py": ["tests/test_compact_pivot.py", "tests/test_pins.py"],
    "sessionstore/storage/team/ownership.py": ["tests/test_ownership.py"],
}

#: Token -> what it becomes (one mutant per replacement).
SWAPS: dict[str, tuple[str, ...]] = {
    "<": ("<=",),
    "<=": ("<",),
    ">": (">=",),
    ">=": (">",),
    "==": ("!=",),
    "!=": ("==",),
    "+": ("-",),
    "-": ("+",),
    "*": ("/",),
    "//": ("*",),
    "and": ("or",),
    "or": ("and",),
    "True": ("False",),
    "False": ("True",),
    "is": ("is not",),
    "in": ("not in",),
    "not": ("",),
    "break": ("continue",),
    "continue": ("break",),
}


@dataclass
class Mutant:
    """One token of one line replaced."""

    module: str
    line: int
    column: int
    before: str
    after: str
    source_line: str
    outcome: str = ""
    seconds: float = 0.0


def installed_path(module: str, pkg: Path = PKG) -> Path:
    """Where `module` (a checkout path) lives in the copy `pkg` laid out as installed."""
    return pkg / "sessionstore" / module if module.partition("/")[0] in MAPPED else pkg / module


def lay_out_package(pkg: Path = PKG) -> None:
    """A fresh copy of the package as it installs (the checkout's own files are never mutated)."""
    shutil.rmtree(pkg, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "sessionstore", pkg / "sessionstore", ignore=ignore)
    for folder in MAPPED:
        shutil.copytree(ROOT / folder, pkg / "sessionstore" / folder, ignore=ignore)


def test_env(pkg: Path = PKG) -> dict[str, str]:
    """The environment of every test run: the copy `pkg` first on the import path."""
    return {**os.environ, "PYTHONPATH": str(pkg), "PYTHONDONTWRITEBYTECODE": "1"}


#: pytest as every run starts it: from the copy (the working directory comes first on the import path), with the
#: checkout's configuration, and the checkout appended to the path (its `tests` package) rather than put first.
PYTEST = ["-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "--rootdir", str(ROOT), "--import-mode=append"]


def covering_tests(module: str, test_files: list[str]) -> dict[int, set[str]]:
    """Line -> the test functions (as pytest node ids, parameters dropped) that executed it."""
    target = installed_path(module)
    data_file = WORK / f"coverage-{module.replace('/', '_')}"
    rc = WORK / "coveragerc"
    rc.write_text("[run]\ndynamic_context = test_function\n")
    cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", f"--data-file={data_file}"]
    cmd += [f"--include={target}", *PYTEST, "-c", str(ROOT / "pyproject.toml"), *(str(ROOT / t) for t in test_files)]
    baseline = subprocess.run(cmd, cwd=PKG, env=test_env(), capture_output=True, text=True, check=False)
    if baseline.returncode != 0:  # a mutant's failing test must mean the mutant, not a suite already red
        tail = "\n".join(baseline.stdout.splitlines()[-15:])
        raise SystemExit(f"mutate: the tests of {module} fail without any mutant:\n{tail}")
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    lines: dict[int, set[str]] = {}
    for line, contexts in (data.contexts_by_lineno(str(target)) or {}).items():
        nodes = {node_id(c) for c in contexts if c}
        if nodes:
            lines[line] = nodes
    return lines


def node_id(context: str) -> str:
    """`tests.test_fork.test_x` (coverage's test_function context) as `tests/test_fork.py::test_x`."""
    dotted, _, name = context.rpartition(".")
    parts = dotted.split(".")
    while parts and not parts[-1].startswith("test"):  # a method: keep its class in the node id
        name = f"{parts.pop()}::{name}"
    return str(ROOT / "/".join(parts)) + ".py::" + name


def mutants_of(module: str, source: str, covered: dict[int, set[str]]) -> list[Mutant]:
    """Every single-token mutant of a covered line (docstrings and other strings are left alone)."""
    found: list[Mutant] = []
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.OP, tokenize.NAME) or tok.string not in SWAPS:
            continue
        row, col = tok.start
        if row not in covered or lines[row - 1].lstrip().startswith(("@", "def ", "class ", "import", "from ")):
            continue
        for after in SWAPS[tok.string]:
            found.append(Mutant(module, row, col, tok.string, after, lines[row - 1].strip()))
    return found


def apply(source: str, m: Mutant) -> str | None:
    """`source` with the mutant's token replaced, or None when that does not compile."""
    lines = source.splitlines(keepends=True)
    text = lines[m.line - 1]
    lines[m.line - 1] = text[: m.column] + m.after + text[m.column + len(m.before) :]
    mutated = "".join(lines)
    try:
        compile(mutated, m.module, "exec")
    except SyntaxError:
        return None
    return mutated


def run_mutant(m: Mutant, source: str, tests: set[str], timeout: float, pkg: Path = PKG) -> None:
    """Write the mutant into the copy `pkg`, run its tests (first failure kills it), and put the source back."""
    target = installed_path(m.module, pkg)
    mutated = apply(source, m)
    if mutated is None:
        m.outcome = "invalid"
        return
    target.write_text(mutated)
    start = time.monotonic()
    try:
        cmd = [sys.executable, *PYTEST, "-x", "-c", str(ROOT / "pyproject.toml"), *sorted(tests)]
        done = subprocess.run(cmd, cwd=pkg, env=test_env(pkg), capture_output=True, timeout=timeout, check=False)
        m.outcome = "survived" if done.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        m.outcome = "killed (timeout)"
    finally:
        m.seconds = round(time.monotonic() - start, 1)
        target.write_text(source)


def mutant_key(m: Mutant, digest: str) -> str:
    """What names a mutant across runs: its module's source (by digest), place and replacement."""
    return f"{m.module}:{digest}:{m.line}:{m.column}:{m.before}->{m.after}"


def recorded() -> dict[str, dict[str, object]]:
    """The outcomes results.jsonl already holds, by mutant key (a torn last line is skipped)."""
    found: dict[str, dict[str, object]] = {}
    if RESULTS.exists():
        for line in RESULTS.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            found[row["key"]] = row
    return found


def mutate_module(
    module: str, limit: int | None, timeout: float, pkgs: list[Path], resume: bool, retry_survivors: bool = False
) -> list[Mutant]:
    """Every mutant of `module` run against the tests that cover its line, one per package copy at a time.

    With `resume`, a mutant already recorded for this source is not run again, unless it survived and
    `retry_survivors` is set (after tests were added for the survivors).
    """
    source = installed_path(module).read_text()
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    done = recorded() if resume else {}
    if retry_survivors:
        done = {key: row for key, row in done.items() if row["outcome"] != "survived"}
    covered = covering_tests(module, TARGETS[module])
    mutants = mutants_of(module, source, covered)[:limit]
    todo: list[Mutant] = []
    for m in mutants:
        row = done.get(mutant_key(m, digest))
        if row is None:
            todo.append(m)
        else:
            m.outcome, m.seconds = str(row["outcome"]), float(row["seconds"])  # type: ignore[arg-type]
    free = list(pkgs)
    count = len(mutants) - len(todo)

    def one(m: Mutant) -> None:
        nonlocal count
        pkg = free.pop()  # one thread per copy, so a copy is never shared
        try:
            run_mutant(m, source, covered[m.line], timeout, pkg)
        finally:
            free.append(pkg)
        with RESULTS.open("a") as out:
            out.write(json.dumps({"key": mutant_key(m, digest), **asdict(m)}) + "\n")
        count += 1
        print(f"[{module} {count}/{len(mutants)}] line {m.line}: {m.before!r} -> {m.after!r}: {m.outcome}", flush=True)

    with ThreadPoolExecutor(max_workers=len(pkgs)) as pool:
        list(pool.map(one, todo))
    return mutants


def recorded_results(modules: list[str]) -> dict[str, list[Mutant]]:
    """What results.jsonl records for each module's current source (the newest outcome of each mutant)."""
    rows = recorded()
    results: dict[str, list[Mutant]] = {}
    for module in modules:
        digest = hashlib.sha256((ROOT / module).read_text().encode()).hexdigest()[:12]
        prefix = f"{module}:{digest}:"
        mine = [row for key, row in rows.items() if key.startswith(prefix)]
        fields = Mutant.__dataclass_fields__
        results[module] = sorted(
            (Mutant(**{k: v for k, v in row.items() if k in fields}) for row in mine),  # type: ignore[arg-type]
            key=lambda m: (m.line, m.column, m.after),
        )
    return results


def report(results: dict[str, list[Mutant]]) -> str:
    """A markdown table of scores per module and the list of survivors."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    out = [
        f"At commit {head.strip() or '?'}.\n",
        "| module | mutants | killed | survived | score |",
        "|---|---|---|---|---|",
    ]
    for module, mutants in results.items():
        valid = [m for m in mutants if m.outcome != "invalid"]
        killed = sum(m.outcome.startswith("killed") for m in valid)
        score = f"{killed / len(valid):.0%}" if valid else "n/a"
        out.append(f"| `{module}` | {len(valid)} | {killed} | {len(valid) - killed} | {score} |")
    out.append("\nSurvivors:\n")
    for module, mutants in results.items():
        for m in mutants:
            if m.outcome == "survived":
                out.append(f"- `{module}:{m.line}` `{m.before}` -> `{m.after or '(removed)'}`: `{m.source_line}`")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the mutants of the named modules (all of TARGETS by default) and write build/mutate/report.*."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", default=list(TARGETS), help="checkout paths of the modules to mutate")
    parser.add_argument("--limit", type=int, default=None, help="at most this many mutants per module")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a mutant's run counts as killed")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once (default: one a CPU)"
    )
    parser.add_argument("--resume", action="store_true", help="skip the mutants results.jsonl already records")
    parser.add_argument(
        "--report-only", action="store_true", help="write the report from results.jsonl without running anything"
    )
    parser.add_argument(
        "--retry-survivors", action="store_true", help="with --resume: run the recorded survivors again (new tests)"
    )
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in TARGETS]
    if unknown:
        parser.error(f"not a mutation target: {', '.join(unknown)} (targets: {', '.join(TARGETS)})")
    WORK.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        text = report(recorded_results(args.modules))
        (WORK / "report.md").write_text(text + "\n")
        print(text)
        return 0
    if not args.resume:
        RESULTS.unlink(missing_ok=True)
    lay_out_package()
    pkgs = [WORK / f"pkg-{i}" for i in range(max(1, args.jobs))]
    for pkg in pkgs:
        lay_out_package(pkg)
    results = {
        module: mutate_module(module, args.limit, args.timeout, pkgs, args.resume, args.retry_survivors)
        for module in args.modules
    }
    (WORK / "report.json").write_text(json.dumps({k: [asdict(m) for m in v] for k, v in results.items()}, indent=1))
    (WORK / "report.md").write_text(report(results) + "\n")
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
