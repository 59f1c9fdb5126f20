"""The short uuids `view` shows are ones `compact --from/--up-to` accept, and they tell the rows apart."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_paths
from tests.support.cli import run_cli, run_cli_process
from tests.support.messages import conversation

CODEX = "codex/localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def shown_uuids(url: str, sid: str, *args: str) -> list[str]:
    """The uuid column of the `view` table (a wide terminal, so nothing folds)."""
    result = run_cli_process(*args, sid, "--db", url, env={**os.environ, "COLUMNS": "250"})
    assert result.code == 0, result.err
    rows = [line.split("│") for line in result.out.splitlines() if re.match(r"│\s*\d+\s*│", line)]
    return [cells[5].strip() for cells in rows]


def test_view_rows_of_a_codex_session_are_told_apart(sqlite_url: str, transcripts_dir: Path) -> None:
    with SessionStore.open(sqlite_url) as st:
        [result] = import_paths(st, [transcripts_dir / CODEX])
        uuids = [e.uuid for e in st.get(result.session_id or "").active_entries()]
    shown = shown_uuids(sqlite_url, result.session_id or "", "view")
    assert len(shown) == len(uuids) > 100
    assert len(set(shown)) == len(shown), "every row shows a different uuid"
    for short, full in zip(shown, uuids, strict=True):
        assert full.startswith(short) and len(short) >= min(8, len(full))
        assert short == full or not any(u.startswith(short) for u in uuids if u != full)


def test_compact_accepts_the_uuid_prefix_view_shows(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        msgs = list(conversation(40, seed=3))
        while msgs[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in msgs[-1]["content"]):
            msgs.pop()
        s.append_many(msgs)
        prompts = [e.uuid for e in s.active_entries() if e.role == "user" and isinstance(e.content, str)]
    short = shown_uuids(sqlite_url, s.id, "view")
    pivot = next(x for x in short if prompts[2].startswith(x))
    assert len(pivot) >= 8 and sum(u.startswith(pivot) for u in prompts) == 1  # the shortest unique prefix, 8 or more
    result = run_cli(capsys, "compact", s.id, "--up-to", pivot, "--json", "--db", sqlite_url)
    assert result.code == 0, result.err
    assert json.loads(result.out)["kind"] == "partial-up_to"
    with SessionStore.open(sqlite_url) as st:
        assert prompts[2] in [e.uuid for e in st.get(s.id).active_entries()]


def test_an_ambiguous_prefix_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session()
        s.append_many(
            [
                {"role": "user", "content": "a", "uuid": "abc-1"},
                {"role": "assistant", "content": "b", "uuid": "abc-2"},
                {"role": "user", "content": "c", "uuid": "abd-3"},
                {"role": "assistant", "content": "d", "uuid": "abd-4"},
            ]
        )
        version = s.refresh_state().view_version
    result = run_cli(capsys, "compact", s.id, "--from", "ab", "--db", sqlite_url)
    assert result.code == 2 and result.err.startswith("error: --from: 'ab' is ambiguous: it starts at least 4 messages")
    assert result.err.count("\n") == 1
    with SessionStore.open(sqlite_url) as st:
        assert st.get(s.id).refresh_state().view_version == version, "nothing compacted"
