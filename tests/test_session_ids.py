"""What a person types where a session is expected: ids, short prefixes, source tools' ids, odd input.

Issue 16 items 12 and 14 (short prefixes, SQL wildcards, a 100,000-character
id) and issue 11 item 2 (the Claude Code / Codex session id names the
imported session), on both engines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionNotFound, SessionStore
from tests.support.cli import Result, run_cli

FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
SPOTTER_DIR = "claude-code/spotter"
SPOTTER_ID = "258c7280-ae70-4798-800f-63464d01a85d"
CODEX = "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    return run_cli(capsys, *args)


def ok_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    result = cli(capsys, *args, "--json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def refused(result: Result) -> str:
    """The one stderr line of a refusal with exit 2."""
    assert result.code == 2, (result.code, result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    return lines[0]


@pytest.fixture
def three(store_url: str) -> dict[str, str]:
    """Sessions with chosen ids: a wildcard-looking pair and one that shares only a first letter."""
    ids = {
        "lone": "9f1e0c2a-0000-4000-8000-000000000001",
        "underscore": "a_b10000-0000-4000-8000-000000000002",
        "lookalike": "axb20000-0000-4000-8000-000000000003",
        "percent_target": "5e4d4c3b-0000-4000-8000-000000000004",
    }
    with SessionStore.open(store_url) as store:
        for sid in ids.values():
            store.create_session(session_id=sid, title=sid[:4])
    return ids


@pytest.mark.parametrize("length", [1, 2, 3])
def test_a_unique_prefix_shorter_than_four_characters_resolves(
    capsys: pytest.CaptureFixture[str], store_url: str, three: dict[str, str], length: int
) -> None:
    prefix = three["lone"][:length]
    shown = ok_json(capsys, "view", prefix, "--db", store_url)
    assert shown["session"] == three["lone"]


def test_an_ambiguous_short_prefix_says_so(
    capsys: pytest.CaptureFixture[str], store_url: str, three: dict[str, str]
) -> None:
    line = refused(cli(capsys, "view", "a", "--db", store_url))
    assert "ambiguous" in line


@pytest.mark.parametrize("typed", ["5%4%4%b", "5%", "%", "_", "5_4d", "5e4d4c3b%"])
def test_percent_and_underscore_are_not_wildcards(
    capsys: pytest.CaptureFixture[str], store_url: str, three: dict[str, str], typed: str
) -> None:
    line = refused(cli(capsys, "view", typed, "--db", store_url))
    assert "no session" in line


def test_an_underscore_in_an_id_is_matched_literally(
    capsys: pytest.CaptureFixture[str], store_url: str, three: dict[str, str]
) -> None:
    assert ok_json(capsys, "view", "a_b", "--db", store_url)["session"] == three["underscore"]
    assert ok_json(capsys, "view", "axb", "--db", store_url)["session"] == three["lookalike"]


def test_a_100000_character_id_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], store_url: str, three: dict[str, str]
) -> None:
    for command in ("view", "history", "stats"):
        line = refused(cli(capsys, command, "5" * 100_000, "--db", store_url))
        assert "100,000 characters" in line and len(line) < 300
    line = refused(cli(capsys, "export", "%" * 100_000, "--db", store_url))
    assert "100,000 characters" in line


def test_a_nul_character_in_an_id_is_refused(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound, match="NUL"):
        store.get("abc\x00def")


def test_the_claude_code_session_id_and_its_prefixes_name_the_imported_session(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    path = transcripts_dir / FASTHOOKS
    source_id = json.loads(path.read_bytes().splitlines()[1])["sessionId"]
    sid = ok_json(capsys, "import", "claude-code", str(path), "--db", store_url)["files"][0]["session"]
    assert sid != source_id
    for typed in (source_id, source_id[:8], source_id[:3]):
        assert ok_json(capsys, "view", typed, "--db", store_url)["session"] == sid, typed
        by_id = ok_json(capsys, "history", sid, "--db", store_url)
        assert ok_json(capsys, "history", typed, "--db", store_url) == by_id
        by_source = cli(capsys, "export", typed, "--format", "claude-code", "--db", store_url)
        assert by_source.code == 0 and by_source.out.encode() == path.read_bytes(), typed
    listed = {s["id"]: s for s in ok_json(capsys, "sessions", "--db", store_url)}
    assert listed[sid]["source_id"] == source_id and listed[sid]["source"] == "claude-code"
    table = cli(capsys, "sessions", "--db", store_url)
    assert source_id[:8] in table.out
    from sessionstore.cli.browse.app import make_app

    for typed in (source_id, source_id[:8]):
        app = make_app(store_url, session_id=typed)
        try:
            assert app.start_session == sid, "browse opens the imported session by its source id"
        finally:
            app.store.close()


def test_a_claude_code_prefix_names_the_main_session_not_its_sub_agent(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    report = ok_json(capsys, "import", "claude-code", str(transcripts_dir / SPOTTER_DIR), "--db", store_url)
    main = next(f["session"] for f in report["files"] if Path(f["path"]).name == f"{SPOTTER_ID}.jsonl")
    agent = next(f["session"] for f in report["files"] if "subagents" in f["path"])
    assert ok_json(capsys, "view", SPOTTER_ID[:6], "--db", store_url)["session"] == main
    assert ok_json(capsys, "view", SPOTTER_ID, "--db", store_url)["session"] == main
    assert ok_json(capsys, "view", f"{SPOTTER_ID}/agent-acompact", "--db", store_url)["session"] == agent


def test_the_codex_session_id_names_the_imported_session(
    capsys: pytest.CaptureFixture[str], store_url: str, transcripts_dir: Path
) -> None:
    path = transcripts_dir / CODEX
    source_id = json.loads(path.read_bytes().splitlines()[0])["payload"]["id"]
    sid = ok_json(capsys, "import", "codex", str(path), "--db", store_url)["files"][0]["session"]
    assert ok_json(capsys, "view", source_id, "--db", store_url)["session"] == sid
    assert ok_json(capsys, "view", source_id[:10], "--db", store_url)["session"] == sid
    with SessionStore.open(store_url) as store:
        assert store.get(source_id[:13]).id == sid
