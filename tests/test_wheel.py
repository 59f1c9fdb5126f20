"""The wheel a user installs works: built from the checkout, installed into a fresh venv outside it.

Every other test runs the editable install, which would hide a subpackage the wheel
leaves out or a data file it does not ship. This one builds the wheel, installs it
with pip into a new virtual environment in a temporary folder, and runs the main
commands from there, with no path back into the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.support.interrupt import FAULTHANDLER_ENV, TERMINAL_SIGINT, interrupt

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "sessionstore" / "fixtures" / "demo_conversation.jsonl"


def build_wheel(work: Path, dist: Path) -> None:
    """Build the wheel into `dist` from a copy of the checkout in `work`: setuptools writes `build/` and
    `*.egg-info` beside the sources, and two xdist workers building the checkout itself at once collide there."""
    source = work / "source"
    shutil.copytree(
        REPO,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "node_modules"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(dist)],
        check=True,
        cwd=work,
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `sessionstore` executable of a fresh venv holding only the built wheel and its dependencies."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    build_wheel(root, dist)
    wheel = next(dist.glob("sessionstore-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 and "No matching distribution" in done.stderr + done.stdout:
        pytest.skip(
            f"the package index is unreachable, so the wheel's dependencies cannot install: {done.stderr[-300:]}"
        )
    assert done.returncode == 0, done.stderr
    return venv / "bin" / "sessionstore"


def run(exe: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the installed command from a folder outside the checkout, with a clean environment."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "SESSIONSTORE_DB_URL", "VIRTUAL_ENV"}}
    env["HOME"] = str(cwd)
    env["XDG_DATA_HOME"] = str(cwd / "data")
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_wheel_ships_every_package_under_the_project_name() -> None:
    """Every importable folder is in the wheel, and nothing lands at the top level but `sessionstore`."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        build_wheel(Path(tmp), Path(tmp))
        names = zipfile.ZipFile(next(Path(tmp).glob("*.whl"))).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"sessionstore"}
    for folder, installed_as in [
        ("sessionstore", "sessionstore"),
        ("compaction", "sessionstore/compaction"),
        ("cli", "sessionstore/cli"),
        ("migrations", "sessionstore/migrations"),
    ]:
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder).as_posix()
            if folder == "sessionstore" and rel.split("/")[0] in {"compaction", "cli", "migrations"}:
                continue
            assert f"{installed_as}/{rel}" in names, f"{folder}/{rel} is missing from the wheel"
    assert "sessionstore/migrations/script.py.mako" in names
    assert "sessionstore/fixtures/demo_conversation.jsonl" in names
    assert "sessionstore/cli/browse/browse.tcss" in names
    assert "sessionstore/data/prices.json" in names, "the price table ships as package data"


def test_installed_wheel_runs_the_main_commands(installed: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'store.db'}"
    assert run(installed, "--version", cwd=tmp_path).stdout.startswith("sessionstore ")
    up = run(installed, "db", "upgrade", "--db", db, cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    new = run(installed, "new", "--title", "wheel", "--db", db, cwd=tmp_path)
    assert new.returncode == 0, new.stderr
    sid = new.stdout.strip()
    appended = run(installed, "append", sid, str(FIXTURE), "--db", db, cwd=tmp_path)
    assert appended.returncode == 0, appended.stderr
    compacted = run(installed, "compact", sid, "--db", db, cwd=tmp_path)
    assert compacted.returncode == 0, compacted.stderr
    history = run(installed, "history", sid, "--json", "--db", db, cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert len(json.loads(history.stdout)) >= 1
    cc = tmp_path / "session.jsonl"
    exported = run(installed, "export", sid, "--format", "claude-code", "-o", str(cc), "--db", db, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    html = run(installed, "export", sid, "--format", "html", "-o", str(tmp_path / "s.html"), "--db", db, cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    other = f"sqlite:///{tmp_path / 'other.db'}"
    imported = run(installed, "import", "claude-code", str(cc), "--db", other, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    listed = run(installed, "sessions", "--json", "--db", other, cwd=tmp_path)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1, listed.stderr
    doctor = run(installed, "doctor", "--db", db, cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    current = run(installed, "db", "current", "--db", db, cwd=tmp_path)
    assert current.returncode == 0, current.stderr
    default = run(installed, "sessions", cwd=tmp_path)
    assert default.returncode == 0 and "Traceback" not in default.stderr, default.stderr


def test_installed_wheel_starts_the_browser(installed: Path, tmp_path: Path) -> None:
    """`browse` needs its stylesheet from the wheel: start it headless on the installed package."""
    script = (
        "import asyncio, sys\n"
        "from sessionstore.cli.browse.app import make_app\n"
        "async def main():\n"
        "    app = make_app(sys.argv[1])\n"
        "    async with app.run_test(size=(80, 24)) as pilot:\n"
        "        await pilot.pause()\n"
        "        print(type(app.screen).__name__)\n"
        "    app.store.close()\n"
        "asyncio.run(main())\n"
    )
    python = installed.parent / "python"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "SESSIONSTORE_DB_URL", "VIRTUAL_ENV"}}
    done = subprocess.run(
        [str(python), "-c", script, f"sqlite:///{tmp_path / 'b.db'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SessionsScreen"


MCP_CLIENT = (
    "import json, sys, anyio\n"
    "from mcp import Client, StdioServerParameters\n"
    "async def main():\n"
    "    params = StdioServerParameters(command=sys.argv[1], args=['mcp', '--db', sys.argv[2]])\n"
    "    async with Client(params) as client:\n"
    "        answer = await client.call_tool('list_sessions', {})\n"
    "        print(json.dumps(answer.structured_content))\n"
    "anyio.run(main)\n"
)


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "SESSIONSTORE_DB_URL", "VIRTUAL_ENV"}}
    env["HOME"] = str(home)
    env["XDG_DATA_HOME"] = str(home / "data")
    return env


def test_installed_wheel_serves_mcp_and_watches_live(installed: Path, tmp_path: Path) -> None:
    """The lazily imported parts (mcp, watchfiles) are dependencies of the wheel: run both from it."""
    db = f"sqlite:///{tmp_path / 'store.db'}"
    new = run(installed, "new", "--title", "served", "--db", db, cwd=tmp_path)
    assert new.returncode == 0, new.stderr
    sid = new.stdout.strip()
    assert run(installed, "append", sid, str(FIXTURE), "--db", db, cwd=tmp_path).returncode == 0
    source = tmp_path / "exported.jsonl"
    assert (
        run(installed, "export", sid, "-f", "claude-code", "-o", str(source), "--db", db, cwd=tmp_path).returncode == 0
    )
    served = subprocess.run(
        [str(installed.parent / "python"), "-c", MCP_CLIENT, str(installed), db],
        cwd=tmp_path,
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert served.returncode == 0, served.stderr[-2000:]
    assert [s["title"] for s in json.loads(served.stdout)["sessions"]] == ["served"]

    watched = tmp_path / "projects"
    watched.mkdir()
    watch = subprocess.Popen(
        [str(installed), "watch", str(watched), "--db", db],
        cwd=tmp_path,
        env={**_clean_env(tmp_path), **FAULTHANDLER_ENV},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **TERMINAL_SIGINT,
    )
    try:
        assert watch.stderr is not None
        said = watch.stderr.readline()  # `watching DIR (Ctrl-C to stop)` once it follows changes: no fixed wait
        assert said.startswith("watching "), said
        (watched / "live.jsonl").write_bytes(source.read_bytes())
        found = []
        for _ in range(120):
            listed = run(installed, "sessions", "--json", "--db", db, cwd=tmp_path)
            found = [s for s in json.loads(listed.stdout or "[]") if s.get("title") != "served"]
            if found or watch.poll() is not None:
                break
            time.sleep(0.5)
        assert watch.poll() is None, f"watch stopped: {watch.communicate()[1][-2000:]}"
        assert len(found) == 1, "the live watch did not capture the new file"
        served_row = [s for s in json.loads(listed.stdout) if s.get("title") == "served"][0]
        for _ in range(60):
            if found[0]["messages"] == served_row["messages"]:
                break
            time.sleep(0.5)
            found = [
                s
                for s in json.loads(run(installed, "sessions", "--json", "--db", db, cwd=tmp_path).stdout)
                if s.get("title") != "served"
            ]
        assert found[0]["messages"] == served_row["messages"], (found, served_row)
    finally:
        _, err = interrupt(watch, 30)
    assert "Traceback" not in err, err[-2000:]
