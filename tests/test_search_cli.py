"""`sessionstore search` and the search index under `doctor`, through the CLI, on both engines."""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from tests.support.cli import run_cli, run_cli_process

HIT_KEYS = {"session", "title", "cwd", "seq", "uuid", "role", "timestamp", "snippet", "boundary", "open"}

#: Filler that makes a conversation worth compacting (a summary must shrink the view).
PAD = "The long explanation goes on with more detail than any summary keeps. " * 12


def _filled(url: str) -> str:
    with SessionStore.open(url) as store:
        s = store.create_session(title="cli search", cwd="/home/me/app")
        for i in range(4):
            s.append({"role": "user", "content": f"round {i}: the parser chokes on tabs"})
            s.append({"role": "assistant", "content": f"looked at src/parser.py line {i}" + " " + PAD})
        compact(s)
        s.append({"role": "user", "content": "the parser again, after compaction"})
        return s.id


def test_json_shape_and_open_commands(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    sid = _filled(store_url)
    result = run_cli(capsys, "search", "parser", "--role", "user", "--limit", "50", "--json", "--db", store_url)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["query"] == "parser" and doc["total"] == len(doc["hits"]) == 5
    assert all(set(h) == HIT_KEYS for h in doc["hits"])
    replaced = [h for h in doc["hits"] if h["boundary"] is not None]
    assert {h["boundary"] for h in replaced} == {1} and len(replaced) == 4
    assert all(h["open"] == f"sessionstore show {sid} {h['uuid']}" for h in replaced)
    latest = [h for h in doc["hits"] if h["boundary"] is None]
    assert [h["open"] for h in latest] == [f"sessionstore show {sid} {latest[0]['uuid']}"]
    assert "«parser»" in latest[0]["snippet"]


def test_filters_on_the_command_line(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    sid = _filled(store_url)

    def seqs(*args: str) -> list[int]:
        result = run_cli(capsys, "search", *args, "--json", "--db", store_url)
        assert result.code == 0, result.err
        return sorted(h["seq"] for h in json.loads(result.out)["hits"])

    assert seqs("src/parser.py", "--in", "compacted") == [2, 4, 6, 8]
    assert seqs("parser", "--in", "active", "--role", "user") == [seqs("again")[0]]
    assert seqs("parser", "--cwd", "/home/me", "--session", sid[:8], "--role", "assistant", "--since", "1d") == [
        2,
        4,
        6,
        8,
    ]
    assert seqs("parser", "--cwd", "/elsewhere") == []
    assert len(seqs("parser", "--limit", "2")) == 2


def test_table_groups_hits_by_session(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    sid = _filled(store_url)
    result = run_cli(capsys, "search", '"chokes on tabs"', "--db", store_url)
    assert result.code == 0, result.err
    assert result.out.count(sid) >= 2 and "boundary 1" in result.out
    assert f"open: sessionstore show {sid} SEQ" in result.out
    assert "hit(s) in 1 session(s)" in result.out


@pytest.mark.parametrize("query", ["NEAR(", "*tabs", "-parser", '"unbalanced', "parser AND", "col:x", "a'b"])
def test_fts_syntax_never_reaches_the_user_as_an_engine_error(
    capsys: pytest.CaptureFixture[str], store_url: str, query: str
) -> None:
    _filled(store_url)
    result = run_cli(capsys, "search", "--json", "--db", store_url, "--", query)
    assert result.code == 0, result.err
    assert json.loads(result.out)["query"] == query


@pytest.mark.parametrize(
    "args",
    [
        [""],
        ["   "],
        ["*"],
        ["-"],
        ['""'],
        ["--", "-"],
        ["x1", "--role", "robot"],
        ["x1", "--in", "nowhere"],
        ["x1", "--since", "yesterday"],
        ["x1", "--limit", "0"],
        ["x1", "--since", "99999999d"],
        ["x1", "--limit", "99999999999999999999"],
        ["x1", "--session", "nosuchsession"],
    ],
)
def test_bad_queries_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, args: list[str]
) -> None:
    _filled(sqlite_url)
    result = run_cli(capsys, "search", "--db", sqlite_url, *args)
    assert result.code == 2
    assert result.out == ""
    assert len(result.err.strip().splitlines()) == 1 and result.err.startswith("error: ")


def test_help_documents_the_query_language(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "search", "--help")
    assert result.code == 0
    for words in ('"exact phrases"', "substring", "Examples", "--in", "--since", "--cwd"):
        assert words in result.out


def test_search_in_a_real_process(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    _filled(url)
    result = run_cli_process("search", "tabs", "--json", "--db", url)
    assert result.code == 0, result.err
    assert json.loads(result.out)["total"] == 5
    bad = run_cli_process("search", "", "--db", url)
    assert bad.code == 2 and "Traceback" not in bad.err and len(bad.err.strip().splitlines()) == 1


def _break_index(store: SessionStore, sid: str) -> None:
    """Lose one index row and change another's text, as a bug or a hand edit would."""
    if store.db.is_sqlite:
        store.db.run_write(
            lambda db: db.execute("DELETE FROM search_rows WHERE session_id = :s AND seq = 1", {"s": sid}).close()
        )
        store.db.run_write(
            lambda db: db.execute(
                "UPDATE search_fts SET body = 'tampered' WHERE rowid = (SELECT text_id FROM search_rows "
                "WHERE session_id = :s AND seq = 2)",
                {"s": sid},
            ).close()
        )
    else:
        store.db.run_write(
            lambda db: db.execute("DELETE FROM search_docs WHERE session_id = :s AND seq = 1", {"s": sid}).close()
        )
        store.db.run_write(
            lambda db: db.execute(
                "UPDATE search_docs SET body = 'tampered' WHERE session_id = :s AND seq = 2", {"s": sid}
            ).close()
        )


def test_doctor_checks_the_index_and_repair_rebuilds_it(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    sid = _filled(store_url)
    with SessionStore.open(store_url) as store:
        assert len(store.search("chokes", role="user", limit=50)) == 4
        assert run_cli(capsys, "doctor", "--db", store_url).code == 0
        _break_index(store, sid)
        assert sorted(h.seq for h in store.search("chokes", role="user", limit=50)) == [3, 5, 7]
    found = run_cli(capsys, "doctor", "--json", "--db", store_url)
    assert found.code == 1
    codes = {p["code"] for p in json.loads(found.out)["problems"]}
    assert {"search-missing", "search-stale"} <= codes
    fixed = run_cli(capsys, "doctor", "--repair", "--db", store_url)
    assert fixed.code == 0, fixed.out
    assert "rebuilt the search index" in fixed.out
    with SessionStore.open(store_url) as store:
        assert sorted(h.seq for h in store.search("chokes", role="user", limit=50)) == [1, 3, 5, 7]
        assert store.search("tampered") == []


def test_doctor_repair_of_one_session(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    sid = _filled(store_url)
    with SessionStore.open(store_url) as store:
        store.search("chokes")
        _break_index(store, sid)
    assert run_cli(capsys, "doctor", sid, "--db", store_url).code == 1
    fixed = run_cli(capsys, "doctor", sid, "--repair", "--db", store_url)
    assert fixed.code == 0 and "reindexed for search" in fixed.out
