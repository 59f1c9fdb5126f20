"""Search indexes a message whole: a word at the end of a 1.2M-character message is found (both engines)."""

from __future__ import annotations

from sessionstore import SessionStore


def test_a_word_at_the_end_of_a_long_message_is_found(store: SessionStore) -> None:
    s = store.create_session(title="long")
    words = " ".join(f"filler{i % 997}" for i in range(150_000))
    text = words[: 1_200_000 - len(" zebracorn")] + " zebracorn"
    assert len(text) == 1_200_000
    s.append({"role": "user", "content": "read the log"})
    s.append({"role": "assistant", "content": text})
    hits = store.search("zebracorn")
    assert [(h.session, h.seq) for h in hits] == [(s.id, 2)]
    assert "zebracorn" in hits[0].snippet
