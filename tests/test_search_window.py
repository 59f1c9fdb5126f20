"""Search at a bounded cost: a common query ranked among its newest matches, filters applied before that
window, terms checked as written, and substring-only matches found when whole words are too few.

On PostgreSQL these run through sessionstore_search_window() (revision 0011), which ranks the rows
holding every word first and reads texts only in rank order; on SQLite through the FTS5 window.
"""

from __future__ import annotations

from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.storage.derived import search as search_module


def _started(store: SessionStore, title: str, cwd: str | None = None) -> Any:
    """A new session opened by a user message that matches no query here."""
    session = store.create_session(title=title, cwd=cwd)
    session.append({"role": "user", "content": "start"})
    return session


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> int:
    """A window of 3 matches on both engines (the real ones hold hundreds)."""
    monkeypatch.setattr(search_module, "RANK_WINDOW", 3)
    monkeypatch.setattr(search_module, "PG_RANK_WINDOW", 3)
    return 3


def test_a_common_query_is_ranked_among_its_newest_matches(store: SessionStore, small_window: int) -> None:
    session = _started(store, "window")
    old = session.append({"role": "assistant", "content": "kubernetes " * 30 + "rollout"})
    newer = [session.append({"role": "user", "content": f"note {i}: kubernetes once"}) for i in range(small_window + 1)]
    hits = store.search("kubernetes", limit=2)
    assert len(hits) == 2
    assert old.seq not in {h.seq for h in hits}
    assert {h.seq for h in hits} <= {m.seq for m in newer}


def test_the_best_match_wins_when_the_window_holds_it(store: SessionStore) -> None:
    session = _started(store, "no window")
    old = session.append({"role": "assistant", "content": "kubernetes " * 30 + "rollout"})
    for i in range(4):
        session.append({"role": "user", "content": f"note {i}: kubernetes once"})
    assert store.search("kubernetes", limit=2)[0].seq == old.seq


@pytest.mark.parametrize("how", ["session", "cwd", "role"])
def test_filters_apply_before_the_window(store: SessionStore, small_window: int, how: str) -> None:
    mine = _started(store, "mine", cwd="/work/mine")
    wanted = mine.append({"role": "assistant", "content": "the kubernetes rollout is done"})
    other = store.create_session(title="other", cwd="/work/other")
    for i in range(small_window * 3):
        other.append({"role": "user", "content": f"kubernetes question {i}"})
    kwargs = {"session": {"session": mine.id}, "cwd": {"cwd": "/work/mine"}, "role": {"role": "assistant"}}[how]
    hits = store.search("kubernetes", limit=5, **kwargs)
    assert [(h.session, h.seq) for h in hits] == [(mine.id, wanted.seq)]


def test_terms_are_checked_as_written_not_as_words(store: SessionStore) -> None:
    session = _started(store, "phrases")
    # Holds the words def, handle and event many times (ranks high on them) but never the phrase.
    session.append({"role": "assistant", "content": "handle_event and def, " * 20 + "event handle def"})
    phrase = session.append({"role": "assistant", "content": "def handle_event(msg): pass"})
    hits = store.search('"def handle_event"', limit=10)
    assert [h.seq for h in hits] == [phrase.seq]
    dotted = session.append({"role": "user", "content": "see Ecto.Migration(up) here"})
    session.append({"role": "user", "content": "EctoXMigration(up) is not it"})
    assert [h.seq for h in store.search("ecto.migration(", limit=10)] == [dotted.seq]


def test_matches_inside_longer_words_are_found_when_whole_words_are_few(store: SessionStore) -> None:
    session = store.create_session(title="substrings")
    inside = [session.append({"role": "user", "content": f"{i} comments were left"}) for i in range(3)]
    word = session.append({"role": "user", "content": "one comment here"})
    hits = store.search("comment", limit=10)
    assert {h.seq for h in hits} == {word.seq} | {m.seq for m in inside}
    if not store.db.is_sqlite:
        assert hits[0].seq == word.seq  # the whole word ranks above matches inside longer words
