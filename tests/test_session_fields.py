"""Session fields the schema bounds are refused alike on both engines, never as a driver error.

`new --model <201 characters>` worked on SQLite and printed a
StringDataRightTruncation traceback on PostgreSQL.
"""

from __future__ import annotations

import pytest

from sessionstore import SessionStore, SessionStoreError
from tests.support.cli import run_cli


@pytest.mark.parametrize(
    "fields,words",
    [
        ({"model": "m" * 201}, "model"),
        ({"session_id": "s" * 37}, "session_id"),
        ({"parent_id": "p" * 37}, "parent_id"),
        ({"context_window": 2**31}, "context_window"),
    ],
)
def test_too_long_or_too_large_is_refused(store: SessionStore, fields: dict, words: str) -> None:
    with pytest.raises(SessionStoreError, match=words):
        store.create_session(**fields)
    assert store.list() == []


def test_the_longest_allowed_values_are_kept(store: SessionStore) -> None:
    s = store.create_session(model="m" * 200, context_window=2**31 - 1)
    row = store.list()[0]
    assert (row["id"], row["model"], row["context_window"]) == (s.id, "m" * 200, 2**31 - 1)


def test_cli_says_it_in_one_line(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    result = run_cli(capsys, "new", "--model", "m" * 201, "--db", store_url)
    assert result.code == 2 and result.err.startswith("error: model") and len(result.err.strip().splitlines()) == 1
