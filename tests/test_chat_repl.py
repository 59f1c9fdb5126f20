"""`sessionstore chat` end to end: slash commands and API failures, through the real SDK against the local server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.storage.upkeep.doctor import check
from tests.support.fakeapi import FakeAPI, Reply, start_fake_api
from tests.support.validity import check_messages

ROOT = Path(__file__).resolve().parent.parent

#: Filler that makes a conversation worth compacting (a summary must shrink the view).
PAD = "The long explanation goes on with more detail than any summary keeps. " * 12


def _env(base_url: str | None, key: str | None = "sk-ant-test-chat") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
    env["PYTHONPATH"] = str(ROOT)
    if base_url:
        env["ANTHROPIC_BASE_URL"] = base_url
    if key:
        env["ANTHROPIC_API_KEY"] = key
    return env


def _chat(args: list[str], stdin: str, env: dict[str, str], db: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionstore", "chat", *args, "--workdir", str(workdir), "--db", db],
        input=stdin,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _only_session(db: str) -> Any:
    store = SessionStore.open(db)
    rows = store.list()
    assert len(rows) == 1
    return store, store.get(rows[0]["id"])


def _assert_valid(store: SessionStore, session: Any) -> None:
    assert check_messages(session.active_view()) == []
    report = check(store)
    assert report.ok, [str(p) for p in report.problems]


def _texts(request: Any) -> str:
    return str(request.messages)


def _seeded(db: str, pairs: int) -> str:
    """A session with `pairs` question/answer rounds (no API involved)."""
    with SessionStore.open(db) as store:
        s = store.create_session(title="seeded", model="claude-sonnet-4-6", cwd="/tmp")
        for i in range(pairs):
            s.append({"role": "user", "content": f"seeded question {i} about gooseberry jam"})
            s.append({"role": "assistant", "content": [{"type": "text", "text": f"seeded answer {i}" + " " + PAD}]})
        return s.id


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------- slash commands


def test_slash_commands_never_reach_the_model(sqlite_url: str, tmp_path: Path) -> None:
    out_file = tmp_path / "out.md"
    script = "\n".join(
        [
            "first question about gooseberry",
            "/help",
            "/stats",
            "/compact keep the gooseberry facts",
            "/history",
            "/search gooseberry",
            "/search --all gooseberry",
            f"/export markdown {out_file}",
            "/export nonsense",
            f"/export html {tmp_path}",
            f"/export markdown {tmp_path / 'missing' / 'x.md'}",
            "/frobnicate",
            "/history 99",
            "/history 99999999999999999999",
            "second question",
            "",
        ]
    )
    with start_fake_api() as api:
        api.script("First answer. " + PAD * 20, "Second answer.")
        proc = _chat(["--new"], script, _env(api.base_url), sqlite_url, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert len(api.message_requests) == 2
        assert "/help" not in _texts(api.message_requests[1]) and "/compact" not in _texts(api.message_requests[1])
        assert "call the recall tool with boundary=1" in _texts(api.message_requests[1]), "/compact names recall"
    out = proc.stdout
    assert "First answer." in out and "Second answer." in out
    assert "/history K" in out and "/export FORMAT PATH" in out
    assert "view tokens" in out and "messages" in out
    assert "compacted (full)" in out and "2 messages summarized" in out
    assert "full           manual" in out and "/history K shows the view before boundary K" in out
    assert "«gooseberry»" in out and "hit(s) in 1 session(s)" in out
    assert f"wrote 4 messages to {out_file}" in out and "gooseberry" in out_file.read_text()
    assert "unknown command /frobnicate; the commands are:" in out
    assert "usage: /export" in proc.stderr and "there is no boundary 99" in proc.stderr
    assert "there is no boundary 99999999999999999999" in proc.stderr, "a huge K is not an OverflowError"
    assert f"cannot write to {tmp_path}: it is a folder" in proc.stderr and "does not exist" in proc.stderr
    assert not list(tmp_path.glob("*.partial")), "nothing half-written is left"
    assert "Traceback" not in proc.stderr
    store, session = _only_session(sqlite_url)
    try:
        assert [m.role for m in session.transcript()][:2] == ["user", "assistant"]
        assert not any("/help" in str(m.content) for m in session.transcript())
        _assert_valid(store, session)
    finally:
        store.close()


def test_history_k_pages_the_view_before_a_boundary(sqlite_url: str, tmp_path: Path) -> None:
    sid = _seeded(sqlite_url, 25)
    with SessionStore.open(sqlite_url) as store:
        compact(store.get(sid))
    with start_fake_api() as api:
        api.script("Resumed after the summary.")
        proc = _chat([sid], "/history 1\n\nq\n/stats\n", _env(api.base_url), sqlite_url, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert len(api.message_requests) == 1, "only the resume at start-up calls the model"
    out = proc.stdout
    assert "view before boundary 1 (full, manual): 50 entries" in out
    assert "-- 20 of 50: Enter for more, q to stop --" in out
    assert "-- 40 of 50: Enter for more, q to stop --" in out
    assert "seeded question 19 " in out and "seeded answer 19" in out
    assert "seeded question 20 " not in out.split("-- 40 of 50")[1].split("messages")[0]
    assert "✂" in out


# ---------------------------------------------------------------------- failures


def test_no_api_key_exits_2_before_creating_a_session(sqlite_url: str, tmp_path: Path) -> None:
    proc = _chat(["--new"], "hello\n", _env(None, key=None), sqlite_url, tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no API key: set ANTHROPIC_API_KEY")
    with SessionStore.open(sqlite_url) as store:
        assert store.list() == []


def test_a_workdir_that_is_no_folder_exits_2_before_creating_a_session(sqlite_url: str, tmp_path: Path) -> None:
    """`chat --new --workdir /nonexistent` started a session whose tools could never run."""
    (tmp_path / "file.txt").write_text("x")
    for workdir in (tmp_path / "missing", tmp_path / "file.txt"):
        proc = _chat(["--new"], "hello\n", _env("http://127.0.0.1:9"), sqlite_url, workdir)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: --workdir {workdir}: not a folder"), lines
    with SessionStore.open(sqlite_url) as store:
        assert store.list() == []


def test_connection_refused_keeps_the_message_and_resume_answers_it(sqlite_url: str, tmp_path: Path) -> None:
    down = _closed_port_url()
    proc = _chat(["--new"], "what does the config say?\n/stats\n", _env(down), sqlite_url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"cannot reach the API at {down}" in errors[0]
    assert "Traceback" not in proc.stderr and "messages" in proc.stdout
    store, session = _only_session(sqlite_url)
    try:
        assert [(m.role, m.content) for m in session.transcript()] == [("user", "what does the config say?")]
        _assert_valid(store, session)
        sid = session.id
    finally:
        store.close()
    with start_fake_api() as api:
        api.script("The config says debug=true.")
        again = _chat([sid], "", _env(api.base_url), sqlite_url, tmp_path)
        assert again.returncode == 0, again.stderr
        assert "The config says debug=true." in again.stdout
        assert api.message_requests[0].messages[-1]["content"] in (
            "what does the config say?",
            [{"type": "text", "text": "what does the config say?"}],
        )


def _failing_then_answered(
    sqlite_url: str,
    tmp_path: Path,
    first: list[Reply],
    expect: str,
    args: list[str] | None = None,
    api: FakeAPI | None = None,
) -> tuple[str, list[Any]]:
    """Two messages: the first meets `first`, the second is answered; both end up in the answered request."""
    with start_fake_api() as api:
        api.script(*first, "Answered both.")
        proc = _chat(args or ["--new"], "alpha request\nbeta request\n", _env(api.base_url), sqlite_url, tmp_path)
        assert proc.returncode == 0, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and expect in errors[0], proc.stderr
        assert "Traceback" not in proc.stderr
        assert "Answered both." in proc.stdout
        last = _texts(api.message_requests[-1])
        assert "alpha request" in last and "beta request" in last
        return proc.stderr, api.message_requests


def test_401_is_one_line_and_the_next_turn_answers(sqlite_url: str, tmp_path: Path) -> None:
    _, requests = _failing_then_answered(
        sqlite_url,
        tmp_path,
        [Reply.error(401, "authentication_error", "invalid x-api-key")],
        "the API refused the key (401): check ANTHROPIC_API_KEY",
    )
    assert len(requests) == 2
    store, session = _only_session(sqlite_url)
    try:
        assert [m.role for m in session.transcript()] == ["user", "user", "assistant"]
        _assert_valid(store, session)
    finally:
        store.close()


def test_overloaded_after_retries_is_one_line_and_the_next_turn_answers(sqlite_url: str, tmp_path: Path) -> None:
    _, requests = _failing_then_answered(
        sqlite_url, tmp_path, [Reply.overloaded()] * 3, "the API is overloaded or failing (529) even after retries"
    )
    assert len(requests) == 4
    store, session = _only_session(sqlite_url)
    try:
        _assert_valid(store, session)
    finally:
        store.close()


def test_prompt_still_too_long_after_reactive_compaction(sqlite_url: str, tmp_path: Path) -> None:
    sid = _seeded(sqlite_url, 8)
    _, requests = _failing_then_answered(
        sqlite_url,
        tmp_path,
        [Reply.prompt_too_long(250_000, 200_000)] * 2,
        "still too long for the model after compacting",
        args=[sid],
    )
    assert len(requests) == 3
    store, session = _only_session(sqlite_url)
    try:
        kinds = [c[0] for c in store.db.all('SELECT "trigger" FROM compactions WHERE session_id = :id', {"id": sid})]
        assert "reactive" in kinds
        _assert_valid(store, session)
    finally:
        store.close()


def test_a_reply_with_terminal_escapes_is_printed_as_text(sqlite_url: str, tmp_path: Path) -> None:
    """The model's answer can repeat what a tool printed: it reaches the terminal as text, never as commands."""
    with start_fake_api() as api:
        api.script("Done. \x1b]52;c;cHduZWQ=\x07 \x1b]0;PWN\x1b\\ \x1b[2J \x9b1m end")
        proc = _chat(["--new"], "go\n", _env(api.base_url), sqlite_url, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Done." in proc.stdout and "end" in proc.stdout
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\x9b" not in proc.stdout
    assert "\\x1b]52;c;cHduZWQ=\\x07" in proc.stdout


def test_chat_compacts_through_the_api_when_asked(sqlite_url: str, tmp_path: Path) -> None:
    """`chat SESSION --compaction on-demand` past the threshold: the server writes the summary, the store keeps
    an api-on-demand boundary, and the model's next request opens with the compaction message."""
    from sessionstore.storage.read.history import boundaries

    with SessionStore.open(sqlite_url) as store:
        s = store.create_session(title="api", model="claude-sonnet-4-6", cwd="/tmp", context_window=40_000)
        for i in range(60):
            s.append({"role": "user", "content": f"seeded question {i} about gooseberry jam"})
            s.append({"role": "assistant", "content": [{"type": "text", "text": f"seeded answer {i} {PAD}"}]})
        sid = s.id
    with start_fake_api(default="Noted, and the jam is fine.") as api:
        result = _chat(
            [sid, "--compaction", "on-demand"], "what about the jam?\n", _env(api.base_url), sqlite_url, tmp_path
        )
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        compacted = [r for r in api.message_requests if "compaction" in r.body]
        answered = [r for r in api.message_requests if "compaction" not in r.body]
    assert len(compacted) == 1
    assert answered[-1].messages[0]["content"][0]["type"] == "compaction"
    store, session = _only_session(sqlite_url)
    try:
        assert [b.kind for b in boundaries(session)] == ["api-on-demand"]
        _assert_valid(store, session)
    finally:
        store.close()
