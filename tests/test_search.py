"""Full-text search through `store.search()`, on both engines: completeness, boundaries, filters, bad queries."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.interchange.importing import import_paths
from sessionstore.storage.derived.search import SearchQueryError, message_text, parse_query, snippet

JAPANESE = "東京都の天気は晴れです。明日は大阪に行きます"

#: Filler that makes a conversation worth compacting (a summary must shrink the view).
PAD = "The long explanation goes on with more detail than any summary keeps. " * 12


def _conversation(store: SessionStore, title: str, cwd: str, words: list[str]) -> Any:
    """A session with one user/assistant pair per word, each message naming the word."""
    s = store.create_session(title=title, cwd=cwd)
    for i, word in enumerate(words):
        s.append({"role": "user", "content": f"question {i} about {word} please"})
        s.append(
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}: {word} is done" + " " + PAD}]}
        )
    return s


def _view_seqs(session: Any) -> set[int]:
    return {e.seq for e in session.active_entries()}


def _phrase_of(text: str) -> str | None:
    """A distinctive run of words from a message (a line with letters, cut at word boundaries)."""
    for line in text.splitlines():
        words = [w for w in line.split() if '"' not in w]
        if len(words) >= 6 and sum(ch.isalpha() for ch in line) > 30:
            return " ".join(words[1:6])
    return None


def test_imported_compacted_phrase_is_found_with_its_boundary(store: SessionStore, transcripts_dir: Path) -> None:
    import_paths(store, [transcripts_dir / "claude-code"], source="claude-code")
    import_paths(store, [transcripts_dir / "codex"], source="codex")
    checked = 0
    for info in store.list(limit=100):
        session = store.get(info["id"])
        rows = store.db.all(
            "SELECT boundary_seq, summarized_seqs_json FROM compactions WHERE session_id = :id ORDER BY boundary_seq",
            {"id": session.id},
        )
        active = _view_seqs(session)
        for index, (_, seqs_json) in enumerate(rows, 1):
            earlier = set().union(*(set(json.loads(r[1])) for r in rows[: index - 1])) if index > 1 else set()
            for seq in json.loads(seqs_json):
                if seq in active or seq in earlier:
                    continue
                content = store.db.one(
                    "SELECT unpacked(content_json) FROM messages WHERE session_id = :id AND seq = :s",
                    {"id": session.id, "s": seq},
                )[0]
                phrase = _phrase_of(message_text(json.loads(content)))
                if phrase is None:
                    continue
                hits = store.search(f'"{phrase}"', session=session.id, limit=200)
                mine = [h for h in hits if h.seq == seq]
                assert mine, f"{phrase!r} (seq {seq}) not found in {session.id}"
                assert mine[0].boundary == index
                assert mine[0].open == f"sessionstore show {session.id} {mine[0].uuid}"
                assert "«" in mine[0].snippet
                checked += 1
                break
    assert checked >= 1, "no imported compaction with a searchable replaced message"


def test_japanese_substring_and_file_path_are_found(store: SessionStore) -> None:
    s = store.create_session(title="jp", cwd="/w")
    s.append({"role": "user", "content": JAPANESE})
    s.append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Read",
                    "input": {"file_path": "/srv/app/src/word_freq/core.py"},
                }
            ],
        }
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "def main(): ..."}]})
    jp = store.search("大阪に行き")
    assert [(h.seq, h.role) for h in jp] == [(1, "user")]
    assert "«大阪に行き»" in jp[0].snippet
    assert [h.seq for h in store.search("東京")] == [1]  # two characters: below the trigram length
    path = store.search("src/word_freq/core.py")
    assert [(h.seq, h.role) for h in path] == [(2, "assistant")]
    assert [h.seq for h in store.search("word_freq/core")] == [2]


def test_what_is_indexed_and_what_is_not(store: SessionStore) -> None:
    s = store.create_session(title="blocks")
    s.append({"role": "user", "content": "start"})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "private musing zebracorn", "signature": "sigXYZsecretsig"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "grep -rn frobnicate ./lib"}},
            ],
        }
    )
    s.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "lib/x.c:12: frobnicate()"}],
                }
            ],
        }
    )
    assert store.search("zebracorn") == []
    assert store.search("sigXYZsecretsig") == []
    assert {(h.seq, h.role) for h in store.search("frobnicate")} == {(2, "assistant"), (3, "tool")}


def test_in_active_excludes_compacted_messages_and_boundary_is_reported(store: SessionStore) -> None:
    s = _conversation(store, "compacted", "/w", ["alphaword", "betaword", "gammaword", "deltaword"])
    before = set(range(1, 9))
    compact(s, custom_instructions=None)
    s.append({"role": "user", "content": "later question about alphaword again"})
    active = _view_seqs(s)
    all_hits = store.search("alphaword", limit=50)
    assert {h.seq for h in all_hits} >= {1, 2, max(active)}
    compacted = store.search("alphaword", in_="compacted", limit=50)
    assert compacted and all(h.seq not in active and h.boundary == 1 for h in compacted)
    assert {h.seq for h in compacted} <= before
    only_active = store.search("alphaword", in_="active", limit=50)
    assert only_active and all(h.seq in active and h.boundary is None for h in only_active)
    assert all(h.open == f"sessionstore show {s.id} {h.uuid}" for h in only_active)


def test_filters_combine(store: SessionStore) -> None:
    a = _conversation(store, "a", "/home/me/proj", ["widget", "gadget"])
    b = _conversation(store, "b", "/home/me/project-two", ["widget"])
    summary = a.append({"role": "user", "content": "Summary: the widget was rebuilt", "is_compact_summary": True})
    a.append({"role": "assistant", "content": "widget ok"})
    assert {h.session for h in store.search("widget", limit=50)} == {a.id, b.id}
    assert {h.session for h in store.search("widget", cwd="/home/me/proj")} == {a.id}
    assert {h.session for h in store.search("widget", cwd="/home/me")} == {a.id, b.id}
    assert [h.seq for h in store.search("widget", role="summary")] == [summary.seq]
    user_a = store.search("widget", role="user", session=a.id, limit=50)
    assert {(h.session, h.seq) for h in user_a} == {(a.id, 1)}
    assert store.search("widget", role="user", session=a.id, since="2999-01-01") == []
    assert len(store.search("widget", role="user", since="7d", cwd="/home/me", limit=50)) == 2
    assert len(store.search("widget", limit=1)) == 1


def test_ranking_best_first_and_ties_newest_first(store: SessionStore) -> None:
    s = store.create_session(title="rank")
    s.append({"role": "user", "content": "a note on a kumquat among many other fruit words"})
    s.append({"role": "assistant", "content": "kumquat kumquat: kumquat, kumquat"})
    s.append({"role": "user", "content": "a note on a kumquat among many other fruit words"})
    hits = store.search("kumquat", limit=10)
    assert hits[0].seq == 2
    assert [h.seq for h in hits[1:]] == [3, 1]


def test_a_message_appended_after_the_index_was_built_is_found(store: SessionStore) -> None:
    s = _conversation(store, "grow", "/w", ["firstthing"])
    assert len(store.search("firstthing")) == 2
    s.append({"role": "user", "content": "now secondthing appears"})
    assert [h.seq for h in store.search("secondthing")] == [3]
    other = SessionStore.open(store.url)
    try:
        other.get(s.id).append({"role": "assistant", "content": "secondthing again"})
    finally:
        other.close()
    assert [h.seq for h in store.search("secondthing")] == [4, 3]


def test_deleted_session_is_never_shown(store: SessionStore) -> None:
    keep = _conversation(store, "keep", "/w", ["persimmon"])
    gone = _conversation(store, "gone", "/w", ["persimmon"])
    assert {h.session for h in store.search("persimmon")} == {keep.id, gone.id}
    store.delete(gone.id)
    assert {h.session for h in store.search("persimmon")} == {keep.id}


def test_search_during_concurrent_appends_never_errors(store: SessionStore) -> None:
    s = store.create_session(title="busy")
    s.append({"role": "user", "content": "seed marmalade 0"})
    errors: list[BaseException] = []
    stop = threading.Event()
    searched = threading.Event()

    def writer() -> None:
        w = SessionStore.open(store.url)
        try:
            ws = w.get(s.id)
            for i in range(1, 150):
                ws.append({"role": "assistant" if i % 2 else "user", "content": f"marmalade {i}"})
                if i == 75:  # half way, until the reader has searched once: the searches meet the appends
                    searched.wait(timeout=120)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            stop.set()
            w.close()

    thread = threading.Thread(target=writer)
    thread.start()
    seen = 0
    reader = SessionStore.open(store.url)
    try:
        while not stop.is_set():
            committed = reader.get(s.id).refresh_state().last_seq
            hits = reader.search("marmalade", limit=1000)
            assert len(hits) >= committed
            assert len({h.seq for h in hits}) == len(hits)
            seen += 1
            searched.set()
    finally:
        searched.set()
        thread.join()
        reader.close()
    assert not errors, errors
    assert seen >= 1
    assert len(store.search("marmalade", limit=1000)) == 150


@pytest.mark.parametrize(
    "query",
    [
        "NEAR(",
        "foo*",
        "-bar",
        "AND",
        '"unbalanced quote',
        "a OR b",
        "x:y",
        "col:value",
        "(paren",
        "^caret",
        "it's",
        "foo.bar()",
    ],
)
def test_fts_syntax_is_searched_literally(store: SessionStore, query: str) -> None:
    s = store.create_session(title="syntax")
    literal = query.replace('"', "")
    s.append({"role": "user", "content": f"before {literal} after"})
    s.append({"role": "assistant", "content": "unrelated"})
    hits = store.search(query)
    assert [h.seq for h in hits] == [1]


@pytest.mark.parametrize("query", ["", "   ", '""', "*", "-", "...", '" "', "()"])
def test_empty_or_punctuation_only_queries_are_refused(store: SessionStore, query: str) -> None:
    with pytest.raises(SearchQueryError):
        store.search(query)


def test_bad_filters_are_refused(store: SessionStore) -> None:
    with pytest.raises(SearchQueryError, match="role"):
        store.search("x1y", role="robot")
    with pytest.raises(SearchQueryError, match="in must be"):
        store.search("x1y", in_="nowhere")
    with pytest.raises(SearchQueryError, match="since"):
        store.search("x1y", since="last tuesday")


@pytest.mark.parametrize(
    "filters", [{"limit": 10**20}, {"limit": 0}, {"since": "99999999d"}, {"since": "9999999999999999999999w"}]
)
def test_out_of_range_filters_are_refused_not_overflowed(store: SessionStore, filters: dict) -> None:
    with pytest.raises(SearchQueryError):
        store.search("x1y", **filters)


def test_query_language() -> None:
    assert parse_query('fix "flaky test" src/a.py') == ["fix", "flaky test", "src/a.py"]
    assert parse_query('"open phrase') == ["open phrase"]
    assert parse_query("Word word WORD") == ["Word"]
    marked = snippet("x " * 100 + "the Flaky Test failed", ["flaky test"])
    assert "«Flaky Test»" in marked and marked.startswith("…")
    assert re.search(r"«", snippet("nothing here", ["absent"])) is None


def test_a_spilled_tool_result_is_found_by_its_original_content(store: SessionStore) -> None:
    from sessionstore.compaction.pipeline import Pipeline
    from tests.support.layers import result_contents, tool_round, user

    s = store.create_session(title="spill")
    original = "line of output\n" * 3000 + "the needle: quasar-7781 was here\n" + "more output\n" * 2000
    s.append_many([user("run the build"), *tool_round("big", original)])
    Pipeline(store, config=store.config.replace(microcompact_enabled=False)).prepare(s)
    shown = result_contents(s)["big"]
    assert "quasar-7781" not in shown, "the view shows a preview, not the original"
    hits = store.search("quasar-7781")
    assert [(h.role, h.boundary) for h in hits] == [("tool", None)]
    assert "«quasar-7781»" in hits[0].snippet
