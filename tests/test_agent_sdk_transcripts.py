"""Real Claude Code sessions replayed by the SDK's own import_session_to_store become the sessions
`sessionstore import claude-code` makes of the same files.

Each shared transcript is laid out as the SDK expects (`<config>/projects/<project key>/<id>.jsonl`,
subagents under `<id>/subagents/`), imported once with the CLI into one store and replayed with
`import_session_to_store` (default batch size, and batches of one line) through the adapter into
another. Both must hold the same sessions: transcript, active view, every boundary's past view,
`history`, the subagent link, and `export --format claude-code` byte-identical to the file. The
SDK's store-backed readers and mutators give on the adapter what they give on its
InMemorySessionStore (and, for messages, what the SDK reads from the file itself).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import (  # noqa: E402
    InMemorySessionStore,
    delete_session_via_store,
    fork_session_via_store,
    get_session_info_from_store,
    get_session_messages,
    get_session_messages_from_store,
    get_subagent_messages_from_store,
    import_session_to_store,
    list_sessions_from_store,
    list_subagents_from_store,
    project_key_for_directory,
    rename_session_via_store,
    tag_session_via_store,
)

from sessionstore import SessionStore  # noqa: E402
from sessionstore.integrations.agent_sdk import AgentSdkStore  # noqa: E402
from tests.conftest import PG_URL, TRANSCRIPTS, Templates  # noqa: E402
from tests.support.agent_sdk import UUID_PATTERN as _UUID  # noqa: E402
from tests.support.agent_sdk import Laid, lay_out, main_files as _main_files  # noqa: E402
from tests.support.cli import run_cli  # noqa: E402


def _by_source(store: SessionStore) -> dict[str, str]:
    """source key -> session id of every imported session."""
    return {str(k): str(s) for s, k in store.db.all("SELECT session_id, source_key FROM imports")}


def _session_state(capsys: pytest.CaptureFixture[str], url: str, session_id: str) -> dict[str, Any]:
    """What a person and the API see of one session, its own id and timestamps of the import left out."""
    with SessionStore.open(url) as store:
        session = store.get(session_id)
        row = store.db.one(
            "SELECT title, cwd, model, view_version, view_tokens FROM sessions WHERE id = :id", {"id": session_id}
        )
        state: dict[str, Any] = {
            "row": tuple(row),
            "transcript": [m.to_dict() for m in session.transcript()],
            "view": session.active_view(),
        }
    shown = run_cli(capsys, "history", session_id, "--json", "--full", "--db", url)
    assert shown.code == 0, shown.err
    history = json.loads(shown.out.replace(session_id, "SESSION"))
    state["history"] = history
    for k in range(1, len(history) + 1):
        before = run_cli(capsys, "history", session_id, "-b", str(k), "--json", "--db", url)
        assert before.code == 0, before.err
        state[f"before {k}"] = json.loads(before.out.replace(session_id, "SESSION"))
    return state


def _export(capsys: pytest.CaptureFixture[str], url: str, session_id: str, out: Path) -> bytes:
    done = run_cli(capsys, "export", session_id, "--format", "claude-code", "-o", str(out), "--db", url)
    assert done.code == 0, done.err
    return out.read_bytes()


#: On PostgreSQL, one-line batches replay the files up to this size.
ONE_LINE_PG_BYTES = 100_000


def _replay(laid: Laid, url: str, monkeypatch: pytest.MonkeyPatch, batch_size: int | None) -> None:
    """import_session_to_store into the adapter; then the SDK reads the same messages from it as from the file."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(laid.project_dir.parent.parent))
    extra = {} if batch_size is None else {"batch_size": batch_size}
    where = str(laid.workdir)

    async def run() -> None:
        with AgentSdkStore.open(url) as adapter:
            await import_session_to_store(laid.session_id, adapter, directory=where, **extra)
            from_store = await get_session_messages_from_store(adapter, laid.session_id, directory=where)
        assert from_store and from_store == get_session_messages(laid.session_id, directory=where)

    asyncio.run(run())


def _engines() -> list[str]:
    return ["sqlite", "postgresql"]


@pytest.fixture(params=_engines())
def two_urls(request: pytest.FixtureRequest, tmp_path: Path, templates: Templates) -> Iterator[tuple[str, str]]:
    """Two new stores on one engine: the CLI's import and the SDK's replay."""
    if request.param == "sqlite":
        yield templates.sqlite(tmp_path / "cli.db"), templates.sqlite(tmp_path / "sdk.db")
        return
    if not PG_URL:
        pytest.skip("needs SESSIONSTORE_TEST_PG_URL")
    first, second = templates.postgresql(PG_URL), templates.postgresql(PG_URL)
    try:
        yield next(first), next(second)
    finally:
        next(first, None)
        next(second, None)


@pytest.mark.parametrize("batch_size", [None, 1], ids=["default-batches", "one-line-batches"])
def test_replayed_sessions_are_the_imported_sessions(
    transcripts_dir: Path,
    tmp_path: Path,
    two_urls: tuple[str, str],
    batch_size: int | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli_url, sdk_url = two_urls
    boundaries = 0
    for n, source in enumerate(_main_files(transcripts_dir)):
        if batch_size == 1 and "postgresql" in sdk_url and source.stat().st_size > ONE_LINE_PG_BYTES:
            continue  # thousands of one-line transactions: the big files take them on SQLite
        laid = lay_out(source, tmp_path / f"t{n}")
        imported = run_cli(capsys, "import", "claude-code", str(laid.project_dir), "--db", cli_url)
        assert imported.code == 0, imported.err
        _replay(laid, sdk_url, monkeypatch, batch_size)
        with SessionStore.open(cli_url) as store:
            by_cli = _by_source(store)
        with SessionStore.open(sdk_url) as store:
            by_sdk = _by_source(store)
        for source_key, path in laid.files.items():
            cli_id, sdk_id = by_cli[source_key], by_sdk[source_key]
            state = _session_state(capsys, sdk_url, sdk_id)
            assert state == _session_state(capsys, cli_url, cli_id), source_key
            boundaries += len(state["history"])
            assert _export(capsys, sdk_url, sdk_id, tmp_path / "sdk.jsonl") == path.read_bytes(), source_key
        _check_parents(cli_url, sdk_url, by_cli, by_sdk)
    assert boundaries > 0  # the shared transcripts hold compactions: past views were compared too


def _check_parents(cli_url: str, sdk_url: str, by_cli: dict[str, str], by_sdk: dict[str, str]) -> None:
    """A subagent session is linked to its parent session in both stores alike."""

    def parents(url: str, ids: dict[str, str]) -> dict[str, str | None]:
        back = {v: k for k, v in ids.items()}
        with SessionStore.open(url) as store:
            rows = store.db.all("SELECT id, parent_id FROM sessions")
        return {back[str(i)]: back.get(str(p)) if p else None for i, p in rows if str(i) in back}

    assert parents(sdk_url, by_sdk) == parents(cli_url, by_cli)
    assert any("/agent-" in k for k in by_sdk) is any("/agent-" in k for k in by_cli)


def _uuids_as_ordinals(value: Any, seen: dict[str, str] | None = None) -> Any:
    """The value with each UUID string replaced by its order of first appearance (forks draw new ones)."""
    seen = {} if seen is None else seen
    if isinstance(value, str) and _UUID.match(value):
        return seen.setdefault(value, f"uuid-{len(seen)}")
    if isinstance(value, list):
        return [_uuids_as_ordinals(v, seen) for v in value]
    if isinstance(value, dict):
        return {k: _uuids_as_ordinals(v, seen) for k, v in value.items()}
    return value


#: The shared main transcripts by name (collected when the folder is there; the fixture skips otherwise).
SHARED_NAMES = [p.name for p in _main_files(TRANSCRIPTS)] if (TRANSCRIPTS / "claude-code").is_dir() else ["absent"]


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_the_sdk_helpers_give_on_the_adapter_what_they_give_in_memory(
    transcripts_dir: Path,
    tmp_path: Path,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    source = next(p for p in _main_files(transcripts_dir) if p.name == name)
    laid = lay_out(source, tmp_path)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(laid.project_dir.parent.parent))
    sid, where = laid.session_id, str(laid.workdir)

    async def observe(store: Any) -> dict[str, Any]:
        await import_session_to_store(sid, store, directory=where)
        seen: dict[str, Any] = {"messages": await get_session_messages_from_store(store, sid, directory=where)}
        seen["subagents"] = sorted(await list_subagents_from_store(store, sid, directory=where))
        seen["subagent messages"] = [
            await get_subagent_messages_from_store(store, sid, agent, directory=where) for agent in seen["subagents"]
        ]
        await rename_session_via_store(store, sid, "renamed by the SDK", directory=where)
        await tag_session_via_store(store, sid, "sdk-tag", directory=where)
        info = await get_session_info_from_store(store, sid, directory=where)
        seen["info"] = None if info is None else {**vars(info), "last_modified": None}
        listed = await list_sessions_from_store(store, directory=where)
        seen["listed"] = [{**vars(i), "last_modified": None} for i in listed]
        fork = await fork_session_via_store(store, sid, directory=where, title="the fork")
        pk = project_key_for_directory(where)
        seen["fork"] = _uuids_as_ordinals(
            [
                {k: v for k, v in e.items() if k != "timestamp"}
                for e in await store.load({"project_key": pk, "session_id": fork.session_id}) or []
            ]
        )
        await delete_session_via_store(store, sid, directory=where)
        seen["after delete"] = (
            await store.load({"project_key": pk, "session_id": sid}),
            await store.list_subkeys({"project_key": pk, "session_id": sid}),
            sorted(s["session_id"] == fork.session_id for s in await store.list_sessions(pk)),
        )
        return seen

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        with AgentSdkStore.open(store_url) as adapter:
            ours = await observe(adapter)
        return ours, await observe(InMemorySessionStore())

    ours, reference = asyncio.run(both())
    assert ours == reference
    assert ours["messages"] == get_session_messages(sid, directory=where)
    assert all(ours["subagent messages"]) and bool(ours["subagents"]) is (len(laid.files) > 1)
    _check_only_the_fork_is_left(capsys, store_url)


def _check_only_the_fork_is_left(capsys: pytest.CaptureFixture[str], url: str) -> None:
    """The deleted session left nothing behind: one key, one session (the fork's), and doctor finds nothing."""
    with SessionStore.open(url) as store:
        keys = store.db.all("SELECT linked_session FROM agent_sdk_keys")
        sessions = store.db.all("SELECT id FROM sessions")
        tables = ("messages", "source_lines", "view_entries", "imports", "import_files", "compactions")
        held = {t: {str(r[0]) for r in store.db.all(f"SELECT DISTINCT session_id FROM {t}")} for t in tables}
    assert len(keys) == 1 and [tuple(r) for r in sessions] == [tuple(keys[0])]
    assert all(ids <= {str(keys[0][0])} for ids in held.values()), held
    checked = run_cli(capsys, "doctor", "--db", url)
    assert checked.code == 0, checked.out + checked.err


CC_APPENDER = """
import asyncio, json, sys
from sessionstore.integrations.agent_sdk import AgentSdkStore

async def main():
    lines = json.loads(open(sys.argv[2]).read())
    key = json.loads(sys.argv[3])
    with AgentSdkStore.open(sys.argv[1]) as adapter:
        for i in range(0, len(lines), 3):
            await adapter.append(key, lines[i : i + 3])

asyncio.run(main())
"""


def test_two_processes_feeding_one_session_keep_its_export_and_its_entries_one(
    transcripts_dir: Path, tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two processes append halves of a transcript to one key at once: every line is kept, and the session
    the lines became exports exactly the entries `load` gives, in their stored order."""
    import subprocess
    import sys

    from sessionstore.integrations.agent_sdk import entry_line

    source = next(p for p in _main_files(transcripts_dir) if p.name == "tool_heavy.jsonl")
    lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    key = {"project_key": "-work", "session_id": "5a1e0b2c-0000-4000-8000-0000000000aa"}
    halves = []
    for n, part in enumerate((lines[: len(lines) // 2], lines[len(lines) // 2 :])):
        halves.append(tmp_path / f"half{n}.json")
        halves[-1].write_text(json.dumps(part), encoding="utf-8")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CC_APPENDER, store_url, str(half), json.dumps(key)], stderr=subprocess.PIPE
        )
        for half in halves
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    with AgentSdkStore.open(store_url) as adapter:
        loaded = asyncio.run(adapter.load(key)) or []  # type: ignore[arg-type]
        (linked,) = adapter.store.db.one("SELECT linked_session FROM agent_sdk_keys")
    assert sorted(map(entry_line, loaded)) == sorted(map(entry_line, lines))
    exported = _export(capsys, store_url, str(linked), tmp_path / "out.jsonl")
    assert exported == "".join(entry_line(e) + "\n" for e in loaded).encode()


def test_the_cli_works_on_a_replayed_session(
    transcripts_dir: Path, tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The installed console script reads, searches, forks and exports an SDK session like any other."""
    import subprocess
    import sys

    source = next(p for p in _main_files(transcripts_dir) if (p.with_suffix("") / "subagents").is_dir())
    laid = lay_out(source, tmp_path)
    _replay(laid, store_url, monkeypatch, None)
    with SessionStore.open(store_url) as store:
        session = _by_source(store)[laid.session_id]
        word = next(
            w
            for m in store.get(session).transcript()
            if m.role == "user" and isinstance(m.content, str)
            for w in m.content.split()
            if len(w) > 6 and w.isalpha()
        )
    script = str(Path(sys.executable).parent / "sessionstore")
    for args in (
        ["sessions"],
        ["history", session],
        ["history", session, "-b", "1"],
        ["usage"],
        ["export", session, "-f", "markdown"],
        ["export", session, "-f", "html"],
        ["fork", session, "--before-boundary", "1"],
        ["doctor"],
    ):
        done = subprocess.run([script, *args, "--db", store_url], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr, args
        assert done.stdout.strip(), args
        if args[0] in ("sessions", "history", "search", "usage"):
            assert max(len(line) for line in done.stdout.splitlines()) <= 80, args
    with SessionStore.open(store_url) as store:  # the search index takes SDK sessions like any other
        assert session in {hit.session for hit in store.search(word)}


#: Rounds of concurrent appends: each gave the race a fresh chance (the old code lost about one round in two).
ROUNDS = 3


def test_appends_to_several_keys_at_once_beside_the_imports_make_whole_sessions(
    transcripts_dir: Path, store_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The SDK mirrors a session and its subagents side by side: appends to three keys at once (each on its
    own `asyncio.to_thread` thread) while the catch-up thread imports after every batch, all on the
    adapter's one connection. No append fails, every key becomes its own session, whole (none noted as a
    copy, none left pending), exporting its lines byte for byte. (A thread once ran its statements inside
    another's transaction: an import was committed half-way by an append's COMMIT, its savepoint gone, and
    the next catch-up took the half-written session for a copy; or an append failed on an aborted one.)"""
    from sessionstore.integrations.agent_sdk import entry_line

    source = next(p for p in _main_files(transcripts_dir) if (p.with_suffix("") / "subagents").is_dir())
    agent = next((source.with_suffix("") / "subagents").glob("*.jsonl"))
    main_lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()][:300]
    agent_lines = [json.loads(line) for line in agent.read_text(encoding="utf-8").splitlines()]

    async def feed(adapter: AgentSdkStore, key: dict[str, str], lines: list[Any], step: int) -> None:
        for i in range(0, len(lines), step):
            await adapter.append(key, lines[i : i + step])  # type: ignore[arg-type]

    async def together(keys: tuple[tuple[dict[str, str], list[Any], int], ...]) -> None:
        with AgentSdkStore.open(store_url, import_after=0.0) as adapter:
            await asyncio.gather(*(feed(adapter, key, lines, step) for key, lines, step in keys))

    wanted: dict[tuple[str, str], list[Any]] = {}
    for n in range(ROUNDS):
        main_id, other_id = f"5a1e0b2c-0000-4000-8000-{n:012d}", f"5a1e0b2c-0000-4000-9000-{n:012d}"
        keys = (
            ({"project_key": "-w", "session_id": main_id}, [{**e, "sessionId": main_id} for e in main_lines], 5),
            (
                {"project_key": "-w", "session_id": main_id, "subpath": f"subagents/{agent.stem}"},
                [{**e, "sessionId": main_id} for e in agent_lines],
                1,
            ),
            (
                {"project_key": "-w", "session_id": other_id},
                [{**e, "sessionId": other_id} for e in main_lines[:150]],
                3,
            ),
        )
        for key, lines, _ in keys:
            wanted[(key["session_id"], key.get("subpath", ""))] = lines

        asyncio.run(together(keys))
    with SessionStore.open(store_url) as store:
        rows = store.db.all(
            "SELECT sdk_session_id, subpath, linked_session, import_note, imported_count, entry_count FROM agent_sdk_keys"
        )
    assert len(rows) == len(wanted) == 3 * ROUNDS
    for sdk_id, subpath, linked, note, done, count in rows:
        assert note is None and linked and done == count == len(wanted[(sdk_id, subpath)]), (sdk_id, subpath, note)
        out = tmp_path / f"{linked}.jsonl"
        expected = "".join(entry_line(e) + "\n" for e in wanted[(sdk_id, subpath)]).encode()
        assert _export(capsys, store_url, str(linked), out) == expected, (sdk_id, subpath)


def test_lines_of_a_session_imported_otherwise_are_kept_as_entries_and_say_so(
    transcripts_dir: Path,
    tmp_path: Path,
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A session `import claude-code` brought in already, mirrored by the SDK too: no second session, every
    entry kept, the key noting whose copy its lines are (and later batches not tried again)."""
    source = next(p for p in _main_files(transcripts_dir) if p.name == "tool_heavy.jsonl")
    laid = lay_out(source, tmp_path)
    imported = run_cli(capsys, "import", "claude-code", str(laid.files[laid.session_id]), "--db", store_url)
    assert imported.code == 0, imported.err
    _replay(laid, store_url, monkeypatch, 5)
    with SessionStore.open(store_url) as store:
        sessions = store.db.all("SELECT id FROM sessions")
        note = store.db.one("SELECT linked_session, import_note FROM agent_sdk_keys")
        loaded = asyncio.run(
            AgentSdkStore(store).load({"project_key": laid.project_dir.name, "session_id": laid.session_id})
        )
    assert len(sessions) == 1 and note[0] is None
    assert note[1] == f"its lines are a copy of session {sessions[0][0]}, imported otherwise; kept as entries only"
    assert loaded == [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
