"""`prepare` on a new user's options (issue 16, item 18).

`--query-source bogus` was accepted (and silently changed which layers run);
`--messages` without `--json` was ignored; `warning: yes` at 13% fill of a 40k
window said nothing about why. Now unknown sources are refused (API and CLI,
exit 2), `--messages` needs `--json`, and the warning says what the design
means by it: how much context is left before auto-compact.
"""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.errors import InvalidQuerySource
from sessionstore.compaction.pipeline import Pipeline
from tests.support.cli import run_cli


def _session(url: str, window: int = 40_000, words: int = 3_000) -> str:
    with SessionStore.open(url) as st:
        s = st.create_session(context_window=window)
        s.append_many(
            [
                {"role": "user", "content": "summarize this: " + "word " * words},
                {"role": "assistant", "content": "Here is the summary."},
                {"role": "user", "content": "thanks"},
            ]
        )
        return s.id


@pytest.mark.parametrize("source", ["bogus", "Main", "agent:", "", "compaction"])
def test_unknown_query_source_exits_2(capsys: pytest.CaptureFixture[str], sqlite_url: str, source: str) -> None:
    sid = _session(sqlite_url)
    out = run_cli(capsys, "prepare", sid, "--query-source", source, "--db", sqlite_url)
    assert out.code == 2 and "unknown query source" in out.err and "agent:NAME" in out.err
    assert len(out.err.strip().splitlines()) == 1


@pytest.mark.parametrize("source", ["main", "compact", "session_memory", "agent:explore"])
def test_known_query_sources_run(capsys: pytest.CaptureFixture[str], sqlite_url: str, source: str) -> None:
    sid = _session(sqlite_url)
    out = run_cli(capsys, "prepare", sid, "--query-source", source, "--json", "--db", sqlite_url)
    assert out.code == 0, out.err
    assert json.loads(out.out)["report"]["autocompact"]["details"]["query_source"] == source


def test_api_refuses_an_unknown_query_source(store: SessionStore) -> None:
    s = store.create_session()
    s.append({"role": "user", "content": "hi"})
    version = s.view_version
    with pytest.raises(InvalidQuerySource, match="bogus"):
        Pipeline(store).prepare(s, query_source="bogus")
    assert s.refresh_state().view_version == version


def test_messages_without_json_is_refused(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    sid = _session(sqlite_url)
    out = run_cli(capsys, "prepare", sid, "--messages", "--db", sqlite_url)
    assert out.code == 2 and "--messages needs --json" in out.err
    ok = run_cli(capsys, "prepare", sid, "--messages", "--json", "--db", sqlite_url)
    assert ok.code == 0 and json.loads(ok.out)["messages"][0]["role"] == "user"


def test_warning_says_how_much_context_is_left(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    """40k window: effective 20,000, threshold 7,000, warning level 0 (the design's numbers)."""
    sid = _session(sqlite_url)
    data = json.loads(run_cli(capsys, "prepare", sid, "--dry-run", "--json", "--db", sqlite_url).out)
    assert data["thresholds"]["autocompact_threshold"] == 7_000 and data["thresholds"]["warning_at"] == 0
    assert data["warning"] is True and data["above_threshold"] is False
    left = 7_000 - data["tokens"]
    assert data["tokens_until_autocompact"] == left
    assert data["context_left_percent"] == round(100 * left / 7_000)
    line = " ".join(run_cli(capsys, "prepare", sid, "--dry-run", "--db", sqlite_url).out.split())
    assert f"{data['context_left_percent']}% of the context" in line and "left before auto-compact" in line
    assert "always on" in line


def test_no_warning_on_a_big_window_says_so(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    sid = _session(sqlite_url, window=200_000)
    data = json.loads(run_cli(capsys, "prepare", sid, "--dry-run", "--json", "--db", sqlite_url).out)
    assert data["warning"] is False and data["thresholds"]["warning_at"] == 160_000
    assert data["context_left_percent"] > 90


def test_a_tiny_window_keeps_a_positive_threshold_and_no_none_percent(
    capsys: pytest.CaptureFixture[str], sqlite_url: str
) -> None:
    """`new --context-window 5`: the reserve and buffer shrink with the window, so the threshold stays positive."""
    sid = _session(sqlite_url, window=5, words=10)
    data = json.loads(run_cli(capsys, "prepare", sid, "--dry-run", "--json", "--db", sqlite_url).out)
    assert 0 < data["thresholds"]["autocompact_threshold"] < 5 and data["context_left_percent"] == 0
    out = run_cli(capsys, "prepare", sid, "--dry-run", "--db", sqlite_url)
    line = " ".join(out.out.split())
    assert out.code == 0 and "None" not in line
    assert "0% of the context" in line and "always on" in line
