"""The CLI starts at shell speed: a command imports what it uses, nothing more.

Alembic loads only when the stored revision is not the head (one SELECT tells); Textual, mcp, anthropic,
watchfiles and detect-secrets only inside the commands that need them; `--help`, `--version` and an argument
error load neither SQLAlchemy nor the storage core. Checked in a fresh interpreter, on sys.modules.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessionstore import SessionStore

#: Heavy packages no plain read command needs.
HEAVY = ("alembic", "textual", "mcp", "anthropic", "watchfiles", "detect_secrets")

_RUN = """
import json, sys
from sessionstore.cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(json.loads(%r)))
sys.stderr.write("\\nLOADED " + json.dumps({"code": code, "heavy": heavy}) + "\\n")
"""


def _loaded(*argv: str) -> dict[str, object]:
    """Run `sessionstore ARGV` in a new interpreter; its exit code and which HEAVY packages it imported."""
    proc = subprocess.run(
        [sys.executable, "-c", _RUN % json.dumps(HEAVY), *argv], capture_output=True, text=True, timeout=120
    )
    line = [x for x in proc.stderr.splitlines() if x.startswith("LOADED ")][-1]
    result: dict[str, object] = json.loads(line.removeprefix("LOADED "))
    return result


@pytest.fixture
def current_store(tmp_path: Path) -> str:
    """A SQLite store already at the head revision, holding one session."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionStore.open(url) as store:
        store.create_session(title="startup")
    return url


def test_sessions_on_a_current_database_imports_nothing_heavy(current_store: str) -> None:
    assert _loaded("sessions", "--db", current_store) == {"code": 0, "heavy": []}


def test_version_imports_nothing_heavy() -> None:
    assert _loaded("--version") == {"code": 0, "heavy": []}


def test_view_and_search_import_nothing_heavy(current_store: str) -> None:
    with SessionStore.open(current_store) as store:
        sid = store.list()[0]["id"]
        store.get(sid).append({"role": "user", "content": "find the flaky test"})
    assert _loaded("view", sid, "--db", current_store) == {"code": 0, "heavy": []}
    assert _loaded("search", "flaky", "--db", current_store) == {"code": 0, "heavy": []}


def test_an_old_database_still_loads_alembic_and_is_upgraded(tmp_path: Path) -> None:
    """The cheap check must not skip a needed upgrade: an empty file gets the whole schema."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert _loaded("new", "--db", url) == {"code": 0, "heavy": ["alembic"]}
    assert _loaded("sessions", "--db", url) == {"code": 0, "heavy": []}


#: Module prefixes that building the app (for --help, --version or an argument error) must not import.
STORE_SIDE = (
    "sqlalchemy",
    "sessionstore.storage",
    "sessionstore.compaction",
    "sessionstore.interchange",
    "sessionstore.agent",
    "anthropic",
    "textual",
    "mcp",
)

_AS_MAIN = """
import json, runpy, sys
sys.argv = ["sessionstore", *sys.argv[1:]]
try:
    runpy.run_module("sessionstore", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
prefixes = json.loads(%r)
store = sorted(m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in prefixes))
sys.stderr.write("\\nLOADED " + json.dumps({"code": code, "store": store}) + "\\n")
"""


def _store_side(*argv: str) -> dict[str, object]:
    """Run `python -m sessionstore ARGV` in a new interpreter: its exit code and the STORE_SIDE modules it imported."""
    proc = subprocess.run(
        [sys.executable, "-c", _AS_MAIN % json.dumps(STORE_SIDE), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    line = [x for x in proc.stderr.splitlines() if x.startswith("LOADED ")][-1]
    result: dict[str, object] = json.loads(line.removeprefix("LOADED "))
    return result


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--version"], 0),
        (["--help"], 0),
        (["sessions", "--help"], 0),
        (["db", "upgrade", "--help"], 0),
        (["usage", "--help"], 0),
        (["view"], 2),
        (["sessions", "--limit", "many"], 2),
        (["no-such-command"], 2),
    ],
)
def test_help_version_and_argument_errors_load_no_store(argv: list[str], code: int) -> None:
    """Building the app imports neither SQLAlchemy nor the storage core, compaction, interchange or the agent."""
    assert _store_side(*argv) == {"code": code, "store": []}


def test_the_check_sees_a_command_that_loads_the_store(current_store: str) -> None:
    """The same probe on a command that opens the store finds it: an empty list above means something."""
    loaded = _store_side("sessions", "--db", current_store)
    assert loaded["code"] == 0 and isinstance(loaded["store"], list)
    assert {"sqlalchemy", "sessionstore.storage.store"} <= set(loaded["store"])


def _top_level_names() -> list[str]:
    """The names of the app's commands and command groups, as `sessionstore --help` lists them."""
    import typer.main

    from sessionstore.cli.app import app

    return sorted(typer.main.get_command(app).commands)


@pytest.mark.parametrize("name", _top_level_names())
def test_a_command_run_alone_answers_as_the_whole_app_does(name: str) -> None:
    """`main` builds only the command named first (app_for): its help and its usage errors are the whole app's."""
    from typer.testing import CliRunner

    from sessionstore.cli.app import app, app_for

    runner = CliRunner()
    for args in ([name, "--help"], [name, "--no-such-option"]):
        alone, whole = app_for(args), app
        assert alone is not whole
        got = runner.invoke(alone, args, prog_name="sessionstore")
        expected = runner.invoke(whole, args, prog_name="sessionstore")
        assert (got.exit_code, got.output) == (expected.exit_code, expected.output), args


@pytest.mark.parametrize("args", [[], ["--help"], ["--version"], ["--help", "sessions"], ["sessoins"], ["-x"]])
def test_no_command_first_runs_the_whole_app(args: list[str]) -> None:
    from sessionstore.cli.app import app, app_for

    assert app_for(args) is app
