"""`doctor` finds each kind of damage on both engines, repairs the derived counters, and exits 0/1/2."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.storage.codecs.blobs import put_blob
from sessionstore.storage.engine.db import Database
from sessionstore.storage.upkeep.doctor import Report, api_problems, check, repair
from sessionstore.storage.write.session import Session
from tests.support.cli import run_cli
from tests.support.messages import conversation

TOOL_USE = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}


def _write(store: SessionStore, sql: str, params: dict[str, Any] | None = None) -> None:
    """Run one raw statement in a write transaction (the corruption under test)."""
    store.db.run_write(lambda db: db.execute(sql, params or {}).close())


def _checkpoint(store: SessionStore, s: Session) -> None:
    """Move the session's current figures from its last appended row onto the session row.

    Appends record the running figures on their own rows; a rewrite, an import or a repair
    writes them to the session row. Tests that damage the session row's figures first put
    them there, as a rewrite would.
    """
    state = store.get(s.id).refresh_state()
    _write(
        store,
        "UPDATE sessions SET last_seq = :last, view_tokens = :t, tail_state = :tail WHERE id = :id",
        {"last": state.last_seq, "t": state.view_tokens, "tail": state.tail.dumps(), "id": s.id},
    )


def _codes(report: Report) -> set[str]:
    return {p.code for p in report.problems}


def _seeded(store: SessionStore, n: int = 40) -> Session:
    s = store.create_session(title="seeded")
    s.append_many(list(conversation(n, seed=7)))
    return s


def _with_blob(store: SessionStore, s: Session, data: bytes) -> str:
    """A spilled-replacement row for tool_use t1 pointing at a stored blob of `data`."""

    def body(db: Database) -> str:
        sha = put_blob(db, data)
        db.execute(
            "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
            "created_at) VALUES (:sid, 't1', 'spilled', 'preview', :sha, :size, 0)",
            {"sid": s.id, "sha": sha, "size": len(data)},
        ).close()
        return sha

    return store.db.run_write(body)


def _delete_without_fk(store: SessionStore, sql: str, params: dict[str, Any]) -> None:
    """Delete a parent row behind the foreign keys' back (disabled for this one statement)."""
    if store.db.is_sqlite:
        store.db.conn.execute("PRAGMA foreign_keys = OFF")
        try:
            _write(store, sql, params)
        finally:
            store.db.conn.execute("PRAGMA foreign_keys = ON")
        return

    def body(db: Database) -> None:
        db.execute("SET LOCAL session_replication_role = replica").close()
        db.execute(sql, params).close()

    store.db.run_write(body)


# --------------------------------------------------------------------- clean


def test_a_clean_store_is_clean(store: SessionStore) -> None:
    _seeded(store)
    store.create_session(title="empty")
    notices = store.create_session(title="only notices")
    notices.append({"role": "system", "subtype": "notice", "content": "hook ran"})
    pending = store.create_session()
    pending.append_many(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [TOOL_USE, {**TOOL_USE, "id": "t2"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "b"}]},
        ]
    )
    report = check(store)
    assert report.ok, [str(p) for p in report.problems]
    assert report.database_checked and report.sessions_checked == 4


def test_a_compacted_session_is_clean(store: SessionStore) -> None:
    from sessionstore.compaction.engine import compact, make_summarizer

    s = _seeded(store, 120)
    compact(s, summarizer=make_summarizer("extractive"))
    s.append_many(list(conversation(12, seed=8, prefix="after-")))
    report = check(store, s.id)
    assert report.ok, [str(p) for p in report.problems]
    assert store.db.one("SELECT COUNT(*) FROM compactions WHERE session_id = :id", {"id": s.id})[0] == 1


def test_one_session_is_checked_alone(store: SessionStore) -> None:
    a, b = _seeded(store, 10), _seeded(store, 10)
    _checkpoint(store, b)
    _write(store, "UPDATE sessions SET view_tokens = 1 WHERE id = :id", {"id": b.id})
    alone = check(store, a.id[:8])
    assert alone.ok and alone.sessions_checked == 1 and not alone.database_checked
    assert {p.session_id for p in check(store).problems} == {b.id}


# ---------------------------------------------------------------- corruptions


def test_wrong_view_tokens_is_reported_and_repaired(store: SessionStore) -> None:
    s = _seeded(store)
    right = s.view_tokens
    _checkpoint(store, s)
    _write(store, "UPDATE sessions SET view_tokens = view_tokens + 777 WHERE id = :id", {"id": s.id})
    report = check(store)
    assert _codes(report) == {"view_tokens"}
    problem = report.problems[0]
    assert problem.repairable and problem.session_id == s.id and str(right) in problem.message
    fixed = repair(store)
    assert fixed.ok
    assert fixed.repairs == [f"session {s.id}: set view_tokens from {right + 777} to {right}"]
    assert s.view_tokens == right == sum(e.tokens for e in s.active_entries())
    assert repair(store).repairs == [], "a second repair has nothing to do"


def test_wrong_running_total_on_the_last_appended_row_is_repaired(store: SessionStore) -> None:
    s = _seeded(store)
    right = s.view_tokens
    _write(store, "UPDATE messages SET view_tokens = view_tokens + 5 WHERE session_id = :id AND seq = 40", {"id": s.id})
    assert store.get(s.id).view_tokens == right + 5, "the appended row's figure is the session's current one"
    assert _codes(check(store)) == {"view_tokens"}
    assert repair(store).repairs == [f"session {s.id}: set view_tokens from {right + 5} to {right}"]
    assert store.get(s.id).view_tokens == right and check(store).ok
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_5_1_0", "content": "x"}]})
    assert store.get(s.id).view_tokens == sum(e.tokens for e in store.get(s.id).active_entries())


def test_missing_blob_is_reported(store: SessionStore) -> None:
    s = _seeded(store)
    sha = _with_blob(store, s, b"x" * 5000)
    assert check(store).ok
    _delete_without_fk(store, "DELETE FROM blobs WHERE sha256 = :sha", {"sha": sha})
    report = check(store)
    assert {"blob_missing", "foreign_key"} <= _codes(report)
    assert any(sha in p.message and "t1" in p.message for p in report.problems if p.code == "blob_missing")
    assert not repair(store).ok, "a lost blob cannot be repaired"


def test_corrupt_blob_is_reported(store: SessionStore) -> None:
    s = _seeded(store)
    sha = _with_blob(store, s, b"spilled tool output\n" * 400)
    _write(
        store,
        "UPDATE blobs SET data = :data WHERE sha256 = :sha",
        {"data": zlib.compress(b"something else entirely"), "sha": sha},
    )
    report = check(store)
    assert _codes(report) == {"blob_corrupt"}
    assert sha in report.problems[0].message


def test_open_view_row_pointing_at_no_message(store: SessionStore) -> None:
    s = _seeded(store)
    _write(
        store,
        "INSERT INTO view_entries (session_id, valid_from, key, seq, valid_to, content_json, tokens) "
        "VALUES (:id, 0, 5, 9999, NULL, NULL, 3)",
        {"id": s.id},
    )
    report = check(store)
    assert {"view_missing_message", "view_tokens", "explicit_count"} <= _codes(report)
    assert any("9999" in p.message for p in report.problems if p.code == "view_missing_message")
    after = repair(store)
    assert _codes(after) == {"view_missing_message"}, "counters are repaired, the dangling row is only reported"
    assert store.db.one("SELECT COUNT(*) FROM view_entries WHERE seq = 9999")[0] == 1, "repair deletes nothing"


def test_gap_in_seq(store: SessionStore) -> None:
    s = _seeded(store)
    total = s.last_seq
    _write(store, "DELETE FROM messages WHERE session_id = :id AND seq IN (12, 13, 20)", {"id": s.id})
    report = check(store)
    gap = [p for p in report.problems if p.code == "seq_gap"]
    assert len(gap) == 1
    assert gap[0].message == f"transcript seq has 3 hole(s) below {total}: 12..13, 20"
    assert "seq_gap" in _codes(repair(store)), "holes in the transcript are never papered over"


def test_last_seq_behind_the_transcript_is_repaired(store: SessionStore) -> None:
    s = _seeded(store, 10)
    _checkpoint(store, s)
    # Rows past the session row's last_seq that carry no running figures: written behind the append path.
    _write(
        store,
        "UPDATE messages SET view_tokens = NULL, tail_state = NULL WHERE session_id = :id AND seq > 4",
        {"id": s.id},
    )
    _write(store, "UPDATE sessions SET last_seq = 4 WHERE id = :id", {"id": s.id})
    assert _codes(check(store)) == {"last_seq"}
    fixed = repair(store)
    assert fixed.ok and fixed.repairs == [f"session {s.id}: set last_seq from 4 to 10"]
    fresh = store.get(s.id)
    fresh.append({"role": "user", "content": "appends continue after the repair"})
    assert fresh.last_seq == 11


def test_duplicate_open_key(store: SessionStore) -> None:
    s = _seeded(store, 10)
    _write(
        store,
        "INSERT INTO view_entries (session_id, valid_from, key, seq, valid_to, content_json, tokens) "
        "VALUES (:id, 0, 100, 1, NULL, NULL, 0), (:id, 1, 100, 2, NULL, NULL, 0)",
        {"id": s.id},
    )
    report = check(store)
    assert {"view_duplicate_key", "view_duplicate_seq", "explicit_count"} <= _codes(report)


def test_view_that_breaks_invariant_3(store: SessionStore) -> None:
    s = store.create_session()
    s.append_many([{"role": "user", "content": "go"}, {"role": "assistant", "content": [TOOL_USE]}])
    _checkpoint(store, s)
    # Written behind validation's back: a new exchange before t1's result leaves t1 unanswered
    # and its late result answering nothing.
    late = json.dumps([{"type": "tool_result", "tool_use_id": "t1", "content": "a"}])
    for seq, role, content in ((3, "user", '"hi"'), (4, "assistant", '"done"'), (5, "user", late)):
        _write(
            store,
            "INSERT INTO messages (session_id, seq, uuid, role, type, content_json, tokens) "
            "VALUES (:id, :seq, :uuid, :role, :role, :content, 1)",
            {"id": s.id, "seq": seq, "uuid": f"raw-{seq}", "role": role, "content": content},
        )
    _write(store, "UPDATE sessions SET last_seq = 5, view_tokens = view_tokens + 3 WHERE id = :id", {"id": s.id})
    report = check(store)
    invalid = [p.message for p in report.problems if p.code == "view_invalid"]
    assert any("not answered" in m for m in invalid), invalid
    assert any("answers no tool_use" in m for m in invalid), invalid


def _explicit_view(store: SessionStore, s: Session, kept: list[Any]) -> None:
    """Make `kept` (stored messages) the explicit view, as a rewrite would, with consistent counters."""

    _checkpoint(store, s)

    def body(db: Database) -> None:
        for i, m in enumerate(kept):
            db.execute(
                "INSERT INTO view_entries (session_id, valid_from, key, seq, valid_to, content_json, tokens) "
                "VALUES (:id, 1, :key, :seq, NULL, NULL, :tokens)",
                {"id": s.id, "key": (i + 1) * 65536, "seq": m.seq, "tokens": m.tokens},
            ).close()
        db.execute(
            "UPDATE sessions SET base_seq = last_seq, view_version = 1, explicit_count = :n, view_tokens = :t "
            "WHERE id = :id",
            {"n": len(kept), "t": sum(m.tokens for m in kept), "id": s.id},
        ).close()

    store.db.run_write(body)


@pytest.mark.parametrize("dropped,reported", [("thinking", True), ("blank text", False)])
def test_split_streamed_response(store: SessionStore, dropped: str, reported: bool) -> None:
    s = store.create_session()
    stored = s.append_many(
        [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "api_message_id": "m1",
                "content": [{"type": "thinking", "thinking": "plan", "signature": "sig"}],
            },
            {"role": "assistant", "api_message_id": "m1", "content": [{"type": "text", "text": "blank"}]},
            {"role": "assistant", "api_message_id": "m1", "content": [TOOL_USE]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
        ]
    )
    # The door refuses blank text; an import records it as the tool wrote it.
    _write(
        store,
        "UPDATE messages SET content_json = :c WHERE session_id = :id AND seq = 3",
        {"c": json.dumps([{"type": "text", "text": " \n"}]), "id": s.id},
    )
    gone = 2 if dropped == "thinking" else 3
    _explicit_view(store, s, [m for m in stored if m.seq != gone])
    report = check(store)
    if reported:
        assert _codes(report) == {"view_split_response"}
        assert report.problems[0].message == "response 'm1': 2 of its 3 recorded pieces are in the view"
    else:
        assert report.ok, "a blank piece the API would refuse may be left out"


@pytest.mark.parametrize("damaged", ["{}", "{not json"])
def test_wrong_tail_state_is_repaired_and_append_validation_works_again(store: SessionStore, damaged: str) -> None:
    s = store.create_session()
    s.append_many([{"role": "user", "content": "go"}, {"role": "assistant", "content": [TOOL_USE]}])
    _checkpoint(store, s)
    _write(store, "UPDATE sessions SET tail_state = :t WHERE id = :id", {"t": damaged, "id": s.id})
    assert _codes(check(store)) == {"tail_state"}
    fixed = repair(store)
    assert fixed.ok and "tail_state" in fixed.repairs[0]
    fresh = store.get(s.id)
    fresh.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]})
    assert check(store).ok


def test_unreadable_content_and_bad_compaction_rows(store: SessionStore) -> None:
    s = _seeded(store, 10)
    _write(store, "UPDATE messages SET content_json = '{broken' WHERE session_id = :id AND seq = 5", {"id": s.id})
    _write(
        store,
        "INSERT INTO compactions (session_id, boundary_seq, summary_seq, replaced_version, kind, trigger, "
        "pre_tokens, post_tokens, messages_summarized, summarized_seqs_json, head_uuid, created_at, ordinal) "
        "VALUES (:id, 1, 777, 0, 'full', 'manual', 10, 5, 0, '[]', 'no-such-uuid', 0, 1)",
        {"id": s.id},
    )
    report = check(store)
    assert {"bad_json", "compaction"} <= _codes(report)
    compaction = " | ".join(p.message for p in report.problems if p.code == "compaction")
    assert "not a compact_boundary" in compaction
    assert "summary seq 777 has no message" in compaction
    assert "'no-such-uuid' is not in the transcript" in compaction


def test_schema_damage(store: SessionStore) -> None:
    _seeded(store, 4)
    _write(store, "DROP INDEX ix_view_entries_open")
    _write(store, "UPDATE alembic_version SET version_num = 'abc123'")
    report = check(store)
    messages = [p.message for p in report.problems]
    assert "index ix_view_entries_open on view_entries is missing" in messages
    assert any("schema revision is abc123" in m for m in messages)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # a PostgreSQL catalogue check
def test_postgres_invalid_index(store: SessionStore) -> None:
    _write(
        store,
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = "
        "(SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = 'ix_sessions_updated_at' AND n.nspname = current_schema())",
    )
    report = check(store)
    assert [p.message for p in report.problems] == ["index ix_sessions_updated_at is invalid (rebuild it with REINDEX)"]


# ----------------------------------------------------------------- invariant 3


@pytest.mark.parametrize(
    "messages,words",
    [
        ([{"role": "assistant", "content": "hi"}], "first message sent is assistant"),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [TOOL_USE]},
                {"role": "user", "content": "no result"},
                {"role": "assistant", "content": "x"},
            ],
            "not answered",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                    ],
                }
            ],
            "answers no tool_use",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [TOOL_USE]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "a"},
                        {"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                    ],
                },
            ],
            "comes after",
        ),
        ([{"role": "user", "content": ""}], "empty content"),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "both user"),
    ],
)
def test_api_problems(messages: list[dict[str, Any]], words: str) -> None:
    assert any(words in p for p in api_problems(messages)), api_problems(messages)


def test_api_problems_allows_the_pending_last_turn() -> None:
    pending: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [TOOL_USE, {**TOOL_USE, "id": "t2"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "r"}]},
    ]
    assert api_problems(pending) == []
    assert api_problems([]) == []


# ------------------------------------------------------------------------ CLI


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    with SessionStore.open(store_url) as st:
        s = _seeded(st, 12)
        right = s.view_tokens
    clean = run_cli(capsys, "doctor", "--db", store_url)
    assert clean.code == 0 and "no problems" in clean.out
    with SessionStore.open(store_url) as st:
        _checkpoint(st, s)
        _write(st, "UPDATE sessions SET view_tokens = 3 WHERE id = :id", {"id": s.id})
    broken = run_cli(capsys, "doctor", s.id, "--db", store_url, "--json")
    assert broken.code == 1
    payload = json.loads(broken.out)
    assert payload["ok"] is False and [p["code"] for p in payload["problems"]] == ["view_tokens"]
    fixed = run_cli(capsys, "doctor", "--repair", "--db", store_url)
    assert fixed.code == 0
    assert f"repaired: session {s.id}: set view_tokens from 3 to {right}" in fixed.out
    missing = run_cli(capsys, "doctor", "no-such-session", "--db", store_url)
    assert missing.code == 2 and missing.err.startswith("error: no session")
    assert len(missing.err.strip().splitlines()) == 1


def test_cli_lists_problems_in_text(capsys: pytest.CaptureFixture[str], sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = _seeded(st, 12)
        _checkpoint(st, s)
        _write(st, "UPDATE sessions SET explicit_count = 2 WHERE id = :id", {"id": s.id})
    result = run_cli(capsys, "doctor", "--db", sqlite_url)
    assert result.code == 1
    assert f"problem [explicit_count]: session {s.id}: explicit_count is 2 but the view has 0 open row(s)" in result.out
    assert result.out.rstrip().endswith("1 problem(s)")
