"""`history S` and `history S -b K` fit 80 columns, and the view's tokens are one figure in the table and `--json`.

The shared Claude Code file with an automatic compaction: its boundary recorded
167,094 tokens (the agent's count, system prompt and tools included) while the
entries before it sum to fewer; the table printed the first as the view's size.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_paths
from tests.conftest import TRANSCRIPTS, shared_transcripts
from tests.support.cli import run_cli_process

COMPACTED = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(database url, session id) of the shared file imported once for the module."""
    shared_transcripts()
    url = f"sqlite:///{tmp_path_factory.mktemp('history') / 'store.db'}"
    with SessionStore.open(url) as store:
        (result,) = import_paths(store, [TRANSCRIPTS / COMPACTED])
        assert result.session_id is not None
        return url, result.session_id


def test_history_tables_fit_80_columns(imported: tuple[str, str]) -> None:
    sqlite_url, sid = imported
    env = {**os.environ, "COLUMNS": "80"}
    for args in (("history", sid), ("history", sid, "-b", "1")):
        result = run_cli_process(*args, "--db", sqlite_url, env=env)
        assert result.code == 0, result.err
        lines = result.out.splitlines()
        assert len(lines) > 3
        too_wide = [line for line in lines if len(line) > 80]
        assert not too_wide, too_wide[:3]
        assert any(line.endswith("…") for line in lines), "long texts end in an ellipsis, not past the edge"


def test_the_view_tokens_agree_between_the_table_and_json(imported: tuple[str, str]) -> None:
    sqlite_url, sid = imported
    table = run_cli_process("history", sid, "-b", "1", "--db", sqlite_url)
    as_json = run_cli_process("history", sid, "-b", "1", "--json", "--db", sqlite_url)
    assert table.code == 0 and as_json.code == 0, table.err + as_json.err
    data = json.loads(as_json.out)
    assert data["tokens"] == sum(e["tokens"] for e in data["entries"])
    said = re.search(r"tokens: ([\d,]+) in these entries", table.out)
    assert said is not None, table.out[:400]
    assert int(said.group(1).replace(",", "")) == data["tokens"]
    pre = data["boundary"]["pre_tokens"]
    assert pre != data["tokens"], "the agent's own count is a different figure"
    assert f"the agent counted {pre:,}" in table.out
