"""Hostile and broken input, through the API and the CLI: a typed error or safe storage, never half a write.

Each file of tests/data/bad is appended to a session whose last assistant turn
has a pending tool_use `t1`. Rejected files must raise an `InvalidMessage`
subclass (API) or exit 2 with one `error:` line (CLI) and leave the transcript
and the session row untouched; stored files must come back byte for byte
(transcript, resume, `view --json`, `export`). Large inputs are generated here,
not committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from sessionstore import (
    InvalidContent,
    InvalidMessage,
    InvalidRole,
    OrphanToolResult,
    SessionStore,
    UnknownBlockType,
)
from sessionstore.storage.upkeep.doctor import check
from sessionstore.storage.write.session import Session
from tests.conftest import PG_URL, _pg_schema_url
from tests.support.cli import run_cli

BAD = Path(__file__).resolve().parent / "data" / "bad"
TOOL_USE = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat out.bin"}}

# file -> (API error class, words in the API error, words in the CLI error line)
REJECTED: dict[str, tuple[type[InvalidMessage], str, str]] = {
    "malformed.json": (InvalidMessage, "must be a dict", "invalid JSON"),
    "truncated.json": (InvalidMessage, "must be a dict", "invalid JSON"),
    "truncated_second_line.jsonl": (InvalidMessage, "must be a dict", ":2: invalid JSON"),
    "invalid_utf8.jsonl": (InvalidMessage, "must be a dict", "not valid UTF-8"),
    "content_number.json": (InvalidContent, "got int", "got int"),
    "role_null.json": (InvalidRole, "got None", "got None"),
    "blocks_not_objects.json": (InvalidContent, "must be an object", "must be an object"),
    "block_type_number.json": (UnknownBlockType, "has no 'type'", "has no 'type'"),
    "tool_use_id_number.json": (InvalidContent, "tool_use_id", "tool_use_id"),
    "unknown_role.json": (InvalidRole, "'developer'", "'developer'"),
    "unknown_block_type.json": (UnknownBlockType, "'video'", "'video'"),
    "unknown_tool_result.json": (OrphanToolResult, "toolu_never_issued", "toolu_never_issued"),
    "bad_second_in_batch.jsonl": (InvalidContent, "got int", "got int"),
    "nul_in_uuid.json": (InvalidMessage, "NUL", "NUL"),
}
STORED = [
    "nul_in_content.json",
    "path_ids.json",
    "sql_strings.json",
    "unicode_exotic.json",
    "raw_line_separators.jsonl",
]
# Valid JSON that must be refused with a typed error (lone surrogates, 500-deep values); the CLI screens them too.
CORE_GAPS = {
    "lone_surrogate.json": "lone surrogate",
    "nested_500.json": "nested more than 100 levels",
}
DEEP = 100_000


def parse(raw: bytes) -> list[Any] | None:
    """The messages a file holds (JSON object, list or JSON Lines), None when it is not JSON."""
    try:
        value = json.loads(raw)
    except ValueError:
        try:
            return [json.loads(line) for line in raw.split(b"\n") if line.strip()]
        except ValueError:
            return None
    return value if isinstance(value, list) else [value]


def seeded(store: SessionStore) -> Session:
    s = store.create_session(title="bad input")
    s.append_many(
        [{"role": "user", "content": "run it"}, {"role": "assistant", "api_message_id": "m0", "content": [TOOL_USE]}]
    )
    return s


def state(store: SessionStore, session_id: str) -> tuple[Any, ...]:
    """The session row and the whole transcript, to prove a rejected append wrote nothing."""
    row = store.db.one("SELECT * FROM sessions WHERE id = :id", {"id": session_id})
    return tuple(row), [m.to_dict() for m in store.get(session_id).transcript()]


def assert_rejected_by_api(store: SessionStore, raw: bytes, error: type[Exception], words: str) -> None:
    s = seeded(store)
    before = state(store, s.id)
    messages = parse(raw)
    with pytest.raises(error) as info:
        s.append_many(messages if messages is not None else [raw])
    assert words in str(info.value)
    assert state(store, s.id) == before


def assert_rejected_by_cli(capsys: pytest.CaptureFixture[str], url: str, path: Path, words: str) -> None:
    with SessionStore.open(url) as store:
        sid = seeded(store).id
        before = state(store, sid)
    result = run_cli(capsys, "append", sid, str(path), "--db", url)
    assert result.code == 2, result
    assert result.err.startswith("error: ") and words in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
    with SessionStore.open(url) as store:
        assert state(store, sid) == before


# ------------------------------------------------------------------ rejected


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_api_rejects(store: SessionStore, name: str) -> None:
    error, words, _ = REJECTED[name]
    assert_rejected_by_api(store, (BAD / name).read_bytes(), error, words)


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_cli_rejects(capsys: pytest.CaptureFixture[str], store_url: str, name: str) -> None:
    assert_rejected_by_cli(capsys, store_url, BAD / name, REJECTED[name][2])


@pytest.mark.parametrize("name", sorted(CORE_GAPS))
def test_cli_screens_what_the_core_misses(capsys: pytest.CaptureFixture[str], store_url: str, name: str) -> None:
    assert_rejected_by_cli(capsys, store_url, BAD / name, CORE_GAPS[name])


@pytest.mark.parametrize("name", sorted(CORE_GAPS))
def test_api_rejects_what_the_cli_screens(store: SessionStore, name: str) -> None:
    assert_rejected_by_api(store, (BAD / name).read_bytes(), InvalidMessage, "")


def test_api_rejects_nul_in_tool_ids(store: SessionStore) -> None:
    assert_rejected_by_api(store, (BAD / "nul_in_tool_ids.json").read_bytes(), InvalidContent, "NUL")


def test_cli_rejects_nul_in_tool_ids(capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    assert_rejected_by_cli(capsys, store_url, BAD / "nul_in_tool_ids.json", "NUL")


@pytest.fixture
def deep_file(tmp_path: Path) -> Path:
    """A message whose tool input nests DEEP lists: [[[[...]]]] (generated, not committed)."""
    path = tmp_path / "deep.json"
    head = b'{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}], "metadata": {"d": '
    path.write_bytes(head + b"[" * DEEP + b"]" * DEEP + b"}}")
    return path


def test_cli_deep_nesting_is_a_clear_error(capsys: pytest.CaptureFixture[str], store_url: str, deep_file: Path) -> None:
    assert_rejected_by_cli(capsys, store_url, deep_file, "nested too deeply")


def test_cli_deep_nesting_as_a_separate_process(sqlite_url: str, deep_file: Path) -> None:
    from tests.support.cli import run_cli_process

    with SessionStore.open(sqlite_url) as store:
        sid = seeded(store).id
    result = run_cli_process("append", sid, str(deep_file), "--db", sqlite_url)
    assert result.code == 2 and result.err.startswith("error: ") and "nested too deeply" in result.err
    assert "Traceback" not in result.err and "RecursionError" not in result.err


def test_api_deep_nesting_is_a_typed_error(store: SessionStore) -> None:
    deep: Any = "leaf"
    for _ in range(DEEP):
        deep = [deep]
    s = seeded(store)
    before = state(store, s.id)
    try:
        with pytest.raises(InvalidMessage):
            s.append(
                {
                    "role": "user",
                    "metadata": {"d": deep},
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
                }
            )
    finally:
        assert state(store, s.id) == before


# -------------------------------------------------------------------- stored


def expected(name: str) -> list[dict[str, Any]]:
    messages = parse((BAD / name).read_bytes())
    assert messages is not None
    return messages


def assert_same(stored: list[dict[str, Any]], sent: list[dict[str, Any]]) -> None:
    """Every given field of each sent message comes back exactly (export / transcript shape)."""
    assert len(stored) == len(sent)
    for got, message in zip(stored, sent, strict=True):
        assert got["message"] == {"role": message["role"], "content": message["content"]}
        for key in ("uuid", "parent_uuid", "api_message_id"):
            if key in message:
                assert got[key] == message[key]


@pytest.mark.parametrize("name", STORED)
def test_api_stores_exactly(store_url: str, name: str) -> None:
    sent = expected(name)
    with SessionStore.open(store_url) as store:
        s = seeded(store)
        s.append_many(sent)
        assert_same([m.to_dict() for m in list(s.transcript())[2:]], sent)
        sid = s.id
    with SessionStore.open(store_url) as store:
        resumed = store.get(sid)
        assert_same([m.to_dict() for m in list(resumed.transcript())[2:]], sent)
        assert [e.content for e in resumed.active_entries()[2:]] == [m["content"] for m in sent]
        report = check(store)
        assert report.ok, [str(p) for p in report.problems]


@pytest.mark.parametrize("name", STORED)
def test_cli_stores_exactly(capsys: pytest.CaptureFixture[str], store_url: str, name: str) -> None:
    sent = expected(name)
    with SessionStore.open(store_url) as store:
        sid = seeded(store).id
    assert run_cli(capsys, "append", sid, str(BAD / name), "--db", store_url).code == 0
    view = run_cli(capsys, "view", sid, "--json", "--db", store_url)
    assert view.code == 0
    assert [e["content"] for e in json.loads(view.out)["entries"][2:]] == [m["content"] for m in sent]
    exported = run_cli(capsys, "export", sid, "-f", "jsonl", "--db", store_url)
    assert exported.code == 0
    lines = [json.loads(line) for line in exported.out.split("\n") if line.strip()]
    assert_same(lines[2:], sent)


def test_sql_lookalikes_leave_the_schema_alone(store: SessionStore) -> None:
    s = seeded(store)
    s.append_many(expected("sql_strings.json"))
    other = store.create_session(title="'; DROP TABLE sessions; --")
    assert {x["title"] for x in store.list()} == {"bad input", "'; DROP TABLE sessions; --"}
    assert store.get(other.id).title == "'; DROP TABLE sessions; --"
    content = store.get(s.id).message("x' OR '1'='1").content
    assert isinstance(content, list) and content[0]["content"] == "Robert'); DROP TABLE sessions;--"


# ----------------------------------------------------------- 100 MB payload

PAYLOAD_MB = 100
CHILD = r"""
import base64, hashlib, json, os, sys
import psutil
from sessionstore import SessionStore

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

def digest(text):
    h = hashlib.sha256()
    for i in range(0, len(text), 1 << 20):
        h.update(text[i:i + (1 << 20)].encode())
    return h.hexdigest(), len(text)

url, size = sys.argv[1], int(sys.argv[2])
with SessionStore.open(url) as store:
    s = store.create_session()
    s.append_many([{"role": "user", "content": "cat the log"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "big", "name": "Bash", "input": {"command": "cat big.log"}}]}])
    sid = s.id
block = base64.b64encode(os.urandom(1 << 20)).decode()
head, tail = "BEGIN big tool output\n", "\nEND big tool output"
body = size - len(head) - len(tail)
payload = "".join([head] + [block] * (body // len(block)) + [block[: body % len(block)], tail])
with_payload = psutil.Process().memory_info().rss
want = digest(payload)
with SessionStore.open(url) as store:
    returned = store.get(sid).append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "big", "content": payload}]})
    got_returned = digest(returned.content[0]["content"])
del payload, returned
with SessionStore.open(url) as store:
    s = store.get(sid)
    got_transcript = digest(list(s.transcript())[-1].content[0]["content"])
    got_view = digest(s.active_view()[-1]["content"][0]["content"])
print(json.dumps({"with_payload": with_payload, "peak": peak(), "want": want, "returned": got_returned,
                  "transcript": got_transcript, "view": got_view}))
"""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def big_append(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Append a generated 100 MB tool result in a child process; what it measured and read back."""
    if request.param == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{tmp_path_factory.mktemp('big') / 'big.db'}"])
    elif PG_URL:
        urls = _pg_schema_url(PG_URL)
    else:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL")
    url = next(urls)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(PAYLOAD_MB * 1_000_000)], capture_output=True, text=True, timeout=540
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield json.loads(proc.stdout)
    for _ in urls:
        pass


def test_100mb_tool_result_is_stored_and_returned_intact(big_append: dict[str, Any]) -> None:
    want = big_append["want"]
    assert want[1] == PAYLOAD_MB * 1_000_000
    assert big_append["returned"] == big_append["transcript"] == big_append["view"] == want


def test_100mb_tool_result_peak_rss_is_bounded(big_append: dict[str, Any]) -> None:
    """Beyond the caller's own copy of the payload, append + resume + read peak below 4x the payload."""
    grown = big_append["peak"] - big_append["with_payload"]
    assert grown < 4 * PAYLOAD_MB * 1_000_000, f"peak RSS grew by {grown / 1e6:.0f} MB for a {PAYLOAD_MB} MB payload"
