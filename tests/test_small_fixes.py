"""Smaller things a user hit (issue 21, item 7), each on both engines where it touches the store."""

from __future__ import annotations

import pytest

from sessionstore import SessionStore
from tests.support.cli import run_cli
from tests.support.messages import conversation


def test_recall_around_takes_the_short_uuid_view_prints(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    from sessionstore.compaction.engine import compact

    s = store.create_session(title="recall")
    s.append_many(list(conversation(40, seed=3)))
    target = next(m for m in s.transcript() if m.seq == 11)
    compact(s)
    others = [m.uuid for m in s.transcript() if m.uuid != target.uuid]
    short = next(target.uuid[:n] for n in range(8, 37) if not any(u.startswith(target.uuid[:n]) for u in others))
    result = run_cli(capsys, "recall", s.id, "-b", "1", "--around", short, "--db", store_url)
    assert result.code == 0, result.err
    assert f"uuid={target.uuid}" in result.out
    by_seq = run_cli(capsys, "recall", s.id, "-b", "1", "--around", "11", "--db", store_url)
    assert by_seq.code == 0 and f"uuid={target.uuid}" in by_seq.out


def test_chat_with_neither_session_nor_new_says_what_to_give(
    capsys: pytest.CaptureFixture[str], sqlite_url: str
) -> None:
    result = run_cli(capsys, "chat", "--db", sqlite_url)
    assert result.code == 2 and "not both" not in result.err and "--new" in result.err


def test_sessions_limit_zero_does_not_say_there_are_none(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    store.create_session(title="one")
    result = run_cli(capsys, "sessions", "--limit", "0", "--db", store_url)
    assert result.code == 0 and "no sessions here yet" not in result.err and "--limit" in result.err


def test_search_json_total_is_exact_or_null(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    import json

    s = store.create_session(title="many")
    s.append_many(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"kiwifruit number {i}"} for i in range(12)]
    )
    page = json.loads(run_cli(capsys, "search", "kiwifruit", "--limit", "5", "--json", "--db", store_url).out)
    assert len(page["hits"]) == 5 and page["total"] is None and page["more"] is True
    whole = json.loads(run_cli(capsys, "search", "kiwifruit", "--limit", "50", "--json", "--db", store_url).out)
    assert len(whole["hits"]) == 12 and whole["total"] == 12 and whole["more"] is False


def test_history_refuses_options_it_would_ignore(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    from sessionstore.compaction.engine import compact

    s = store.create_session(title="history")
    s.append_many(list(conversation(30, seed=5)))
    compact(s)
    full = run_cli(capsys, "history", s.id, "--full", "--db", store_url)
    assert full.code == 2 and "--full needs --json" in full.err and full.err.count("\n") == 1
    paged = run_cli(capsys, "history", s.id, "-b", "1", "--limit", "5", "--db", store_url)
    assert paged.code == 2 and "--limit" in paged.err and paged.err.count("\n") == 1
    assert run_cli(capsys, "history", s.id, "-b", "1", "--db", store_url).code == 0
    assert run_cli(capsys, "history", s.id, "--full", "--json", "--db", store_url).code == 0


def test_stats_counts_a_spill_a_compaction_removed_from_the_view_as_gone(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str
) -> None:
    import json

    from sessionstore.compaction.pipeline import Pipeline

    s = store.create_session(title="spills")
    s.append({"role": "user", "content": "look at the log"})
    s.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/tmp/log"}}],
        }
    )
    s.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "line of the log\n" * 20_000}],
        }
    )
    s.append({"role": "assistant", "content": "the disk is full"})
    Pipeline(store).prepare(s)
    before = json.loads(run_cli(capsys, "stats", s.id, "--json", "--db", store_url).out)
    assert (before["spilled_now"], before["spilled_ever"]) == (1, 1)
    s.append_many(list(conversation(12, seed=8)))
    assert run_cli(capsys, "compact", s.id, "--db", store_url).code == 0
    after = json.loads(run_cli(capsys, "stats", s.id, "--json", "--db", store_url).out)
    assert (after["spilled_now"], after["spilled_ever"]) == (0, 1)


def test_the_latest_typed_message_is_never_the_compact_summary(store: SessionStore) -> None:
    from sessionstore.compaction.engine import compact
    from sessionstore.storage.read.paging import typed_user_text

    s = store.create_session(title="preview")
    s.append_many(list(conversation(30, seed=4)))
    typed = [m.content for m in s.transcript() if m.role == "user" and isinstance(m.content, str)]
    compact(s)
    assert any(m.is_compact_summary for m in s.transcript())
    assert typed_user_text(s, latest=True) == typed[-1].strip()


DOC = {
    "type": "document",
    "title": "release notes",
    "source": {"type": "text", "media_type": "text/plain", "data": "the quasarwidget flag is gone in 2.0"},
}
SERVER_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "nebulafish changelog"},
}


def test_documents_and_server_tool_calls_are_shown_and_searched(store: SessionStore) -> None:
    import io

    from sessionstore.interchange.export import export_markdown

    s = store.create_session(title="docs")
    s.append({"role": "user", "content": [DOC, {"type": "text", "text": "what changed?"}]})
    s.append({"role": "assistant", "content": [SERVER_CALL, {"type": "text", "text": "looking"}]})
    out = io.StringIO()
    export_markdown(s, out)
    text = out.getvalue()
    assert "the quasarwidget flag is gone in 2.0" in text and "nebulafish changelog" in text
    assert [h.seq for h in store.search("quasarwidget")] == [1]
