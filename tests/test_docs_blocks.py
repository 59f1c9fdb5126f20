"""The README and every page of docs/ are executable: every shell block runs, or says on its fence line why it cannot.

A block opens with ```sh, ```bash or ```console (`$ ` lines are the commands); words after the
language say how it is checked:

- nothing: the block runs in bash (`set -euo pipefail`) in a temporary HOME whose ~/.claude/projects
  and ~/.codex/sessions hold the shared transcripts, already imported into the SQLite store that
  SESSIONSTORE_DB_URL names (SESSIONSTORE_TRANSCRIPTS names the shared folder), with COLUMNS=80 and
  the installed `sessionstore` first on PATH. A command that fails, or a traceback, fails the test.
- `pg`: the same, with the test PostgreSQL cluster as the libpq default (PGHOST, PGPORT, PGUSER); the
  roles and the database the block creates get names of their own, and are dropped afterwards.
- `synopsis`: a list of command forms (`[optional]`, `a|b`, placeholders), not a script: every command
  and every option it names must exist in the CLI.
- `no-run: REASON`: not run in CI, for the reason given; a `no-run` without a reason fails.

Inspired by simonw/llm, which checks its docs against the code with cog and pytest.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import PG_URL, missing, shared_transcripts

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: The README and every page of docs/ (docs/cli.md, generated from the code, holds no shell block).
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = ("sh", "bash", "console")
SCRIPT = Path(sys.executable).parent / "sessionstore"
FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)\s*(.*)$")


@dataclass(frozen=True)
class Block:
    """One fenced shell block: where it is, how it is checked, and its text."""

    path: Path
    line: int
    mode: str  # run, pg, synopsis, no-run, or what the fence said that is none of these
    reason: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def script(self) -> str:
        """The commands: the block itself, or its `$ ` lines for a console block."""
        if not self.text.lstrip().startswith("$ ") and "\n$ " not in self.text:
            return self.text
        return "\n".join(line[2:] for line in self.text.splitlines() if line.startswith("$ "))


def blocks(paths: list[Path] = DOCS) -> list[Block]:
    """Every shell block of `paths`, in order."""
    found = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            match = FENCE.match(lines[i])
            if not match:
                i += 1
                continue
            fence, lang, rest = match.groups()
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence[0] * len(fence)), len(lines))
            if lang in SHELLS:
                mode, _, reason = rest.partition(":")
                found.append(Block(path, i + 1, mode.strip() or "run", reason.strip(), "\n".join(lines[i + 1 : end])))
            i = end + 1
    return found


def counts() -> dict[str, int]:
    """How many blocks are run, checked as a synopsis, and exempt (the figures the issue asks for)."""
    tally: dict[str, int] = {}
    for block in blocks():
        tally[block.mode] = tally.get(block.mode, 0) + 1
    return tally


# ------------------------------------------------------------------------------ every block accounted for


def test_the_extraction_finds_the_readmes_blocks() -> None:
    assert blocks([README]), "no shell block found: the extraction no longer reads the README"


@pytest.mark.parametrize("page", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_every_shell_block_runs_or_says_why_not(page: Path) -> None:
    found = blocks([page])
    unknown = [b.name for b in found if b.mode not in ("run", "pg", "synopsis", "no-run")]
    assert not unknown, f"fence words other than pg, synopsis and `no-run: REASON`: {unknown}"
    silent = [b.name for b in found if b.mode == "no-run" and not b.reason]
    assert not silent, f"blocks exempted without saying why on their fence line: {silent}"


def test_the_extraction_reads_fences_as_written(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```sh\necho one\n```\n\n```python\nx = 1\n```\n\n```sh no-run: needs a real API key\nclaude\n```\n"
        "````bash pg\ncreateuser x\n````\n\n```console\n$ echo hi\nhi\n```\n\n```sh no-run\nx\n```\n"
    )
    found = blocks([doc])
    assert [(b.line, b.mode, b.reason) for b in found] == [
        (1, "run", ""),
        (9, "no-run", "needs a real API key"),
        (12, "pg", ""),
        (16, "run", ""),
        (21, "no-run", ""),
    ]
    assert found[3].script() == "echo hi"


# ------------------------------------------------------------------------------ runnable blocks


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME whose Claude Code and Codex folders hold the shared transcripts, imported into its store."""
    transcripts = shared_transcripts()
    home = tmp_path_factory.mktemp("docs-home")
    shutil.copytree(transcripts / "claude-code", home / ".claude" / "projects")
    shutil.copytree(transcripts / "codex", home / ".codex" / "sessions")
    env = environment(home, transcripts)
    for kind, folder in (("claude-code", home / ".claude" / "projects"), ("codex", home / ".codex" / "sessions")):
        subprocess.run([str(SCRIPT), "import", kind, str(folder)], env=env, check=True, capture_output=True)
    return home


def environment(home: Path, transcripts: Path) -> dict[str, str]:
    """A fresh account's environment: the installed script first on PATH, no SESSIONSTORE_ setting of the test run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONSTORE_", "PG", "CLAUDE_", "CODEX_"))}
    env.update(
        HOME=str(home),
        PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        COLUMNS="80",
        SESSIONSTORE_DB_URL=f"sqlite:///{home / 'store.db'}",
        SESSIONSTORE_TRANSCRIPTS=str(transcripts),
    )
    return env


@dataclass
class PgNames:
    """The roles and database a `pg` block creates, renamed so that concurrent runs never meet."""

    owner: str
    alice: str
    bob: str
    database: str
    hostport: str

    def apply(self, script: str) -> str:
        """The block with the README's names (sessions_owner, alice, bob, sessions, db.example) replaced."""
        script = re.sub(r"\bsessions_owner\b", self.owner, script)
        script = re.sub(r"\balice\b", self.alice, script)
        script = re.sub(r"\bbob\b", self.bob, script)
        script = re.sub(r"db\.example/sessions\b", f"{self.hostport}/{self.database}", script)
        return re.sub(r"(?<=\s)sessions(?=\s*(?:#|$|&&))", self.database, script, flags=re.M)


@pytest.fixture
def pg_names() -> Iterator[PgNames]:
    """Unique names for a `pg` block, and everything made under them dropped afterwards."""
    if not PG_URL:
        missing("PG", "a `pg` block needs SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    from sqlalchemy.engine import make_url

    from tests.support.pgadmin import admin_execute

    url = make_url(PG_URL.split("?")[0])
    tag = uuid.uuid4().hex[:8]
    names = PgNames(
        f"docs_owner_{tag}", f"docs_alice_{tag}", f"docs_bob_{tag}", f"docs_{tag}", f"{url.host}:{url.port or 5432}"
    )
    try:
        yield names
    finally:
        base = PG_URL or ""
        admin_execute(base, "postgres", f'DROP DATABASE IF EXISTS "{names.database}" WITH (FORCE)')
        for role in (names.alice, names.bob, names.owner):
            admin_execute(base, "postgres", f'DROP ROLE IF EXISTS "{role}"')


def run_block(block: Block, home: Path, env: dict[str, str], script: str) -> None:
    """Run `script` in bash from `home`; fail with the command that failed and what it printed."""
    body = "set -euo pipefail\ntrap 'echo \"docs block command failed: $BASH_COMMAND\" >&2' ERR\n" + script + "\n"
    proc = subprocess.run(["bash", "-c", body], cwd=home, env=env, capture_output=True, text=True, timeout=300)
    printed = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"{block.name}: the documented commands failed (exit {proc.returncode}):\n{printed[-3000:]}"
    )
    assert "Traceback" not in printed, f"{block.name}: a documented command printed a traceback:\n{printed[-3000:]}"


RUNNABLE = [b for b in blocks() if b.mode in ("run", "pg")]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_a_documented_shell_block_runs(
    block: Block, prepared: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    home = tmp_path / "home"
    shutil.copytree(prepared, home, symlinks=True)
    env = environment(home, shared_transcripts())
    script = block.script()
    if block.mode == "pg":
        names: PgNames = request.getfixturevalue("pg_names")
        from sqlalchemy.engine import make_url

        url = make_url((PG_URL or "").split("?")[0])
        env.update(PGHOST=url.host or "127.0.0.1", PGPORT=str(url.port or 5432), PGUSER=url.username or "postgres")
        script = names.apply(script)
    run_block(block, home, env, script)


# ------------------------------------------------------------------------------ synopsis blocks


def cli_commands() -> dict[tuple[str, ...], set[str]]:
    """Every command path of the CLI with the option names it takes."""
    from sessionstore.cli.reference import leaf_commands

    found: dict[tuple[str, ...], set[str]] = {}
    for path, command in leaf_commands():
        found[path] = {o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
        found[path].add("--help")
    return found


def synopsis_forms(text: str) -> Iterator[tuple[str, tuple[str, ...], list[str]]]:
    """(line, command path, options named) for each command form of a synopsis block.

    ` | ` separates alternatives: a piece that starts with a command name is another command form
    (`pin S U | unpin S U`), any other piece goes on with the command before it (`[--up-to U | --from U]`).
    """
    known = cli_commands()
    names = {path[0] for path in known}
    for raw in text.splitlines():
        line = re.split(r"\s#", raw, maxsplit=1)[0].strip()
        paths: list[tuple[str, ...]] = []
        options: list[str] = []
        for segment in re.split(r"\s\|\s", line) if line else []:
            words = segment.split()
            if words and words[0] == "sessionstore":
                words = words[1:]
            if words and words[0] in names:
                if paths:
                    yield from ((raw, path, options) for path in paths)
                subs = words[1].split("|") if len(words) > 1 and (words[0], words[1].split("|")[0]) in known else []
                paths = [(words[0], sub) for sub in subs] or [(words[0],)]
                options = []
            elif not paths:
                paths = [tuple(words[:1])]
            options += [o for w in words for o in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", w)]
        yield from ((raw, path, options) for path in paths)


SYNOPSES = [b for b in blocks() if b.mode == "synopsis"]


@pytest.mark.parametrize("block", SYNOPSES, ids=[b.name for b in SYNOPSES])
def test_every_command_and_option_a_synopsis_names_exists(block: Block) -> None:
    known = cli_commands()
    wrong: list[str] = []
    forms = list(synopsis_forms(block.text))
    assert {line for line, _, _ in forms} == {line for line in block.text.splitlines() if line.strip()}
    for line, path, options in forms:
        if path not in known:
            wrong.append(f"no command `sessionstore {' '.join(path)}`: {line.strip()}")
            continue
        wrong += [
            f"`sessionstore {' '.join(path)}` has no {o}: {line.strip()}" for o in options if o not in known[path]
        ]
    assert not wrong, f"{block.name}:\n" + "\n".join(wrong)


def test_a_synopsis_with_a_wrong_option_fails() -> None:
    forms = {path: options for _, path, options in synopsis_forms("sessionstore search QUERY [--nope]  # x")}
    assert forms == {("search",): ["--nope"]} and "--nope" not in cli_commands()[("search",)]
