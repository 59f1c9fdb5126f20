"""Round trip of our own jsonl export: export, `import jsonl` into a fresh store, export again.

The transcript must come back byte for byte. For a session built here with
every compaction kind, the rebuilt views must also be the ones the store had:
the active view and, for every boundary, the view before it and what it
summarized.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from sessionstore.compaction.engine import compact
from sessionstore.compaction.summarizers.base import SummaryResult
from sessionstore.compaction.summarizers.extractive import ExtractiveSummarizer
from sessionstore import SessionStore
from sessionstore.storage.read.history import boundaries, summarized_messages, view_before
from sessionstore.interchange.importing import import_paths
from sessionstore.storage.write.memory import save_memory
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import ViewEntry
from tests.support.cli import run_cli
from tests.support.messages import FILES, conversation
from tests.support.newstore import engine_of, new_store_url
from tests.support.validity import check_messages

BOUNDARY_FIELDS = ("kind", "trigger", "messages_summarized", "preserved_segment", "summary", "boundary_uuid")


@pytest.fixture
def other_url(store_url: str, tmp_path: Path) -> Iterator[str]:
    """A second, empty database on the same engine as `store_url`."""
    with new_store_url(engine_of(store_url), tmp_path / "other.db") as url:
        yield url


class LateSummarizer:
    """The extractive summarizer, during which another handle appends a user message."""

    name = "extractive"

    def __init__(self, url: str, session_id: str) -> None:
        self.url, self.session_id = url, session_id
        self.inner = ExtractiveSummarizer()

    def summarize(
        self, entries: Sequence[ViewEntry], *, custom_instructions: str | None = None, truncated: bool = False
    ) -> SummaryResult:
        with SessionStore.open(self.url) as other:
            other.get(self.session_id).append({"role": "user", "content": "late: appended while summarizing"})
        return self.inner.summarize(entries, custom_instructions=custom_instructions, truncated=truncated)


def finished(n: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    """About n messages of conversation ending on a finished assistant turn."""
    msgs = list(conversation(n, seed=seed, prefix=prefix))
    while msgs and not (
        msgs[-1]["role"] == "assistant" and all(b.get("type") != "tool_use" for b in msgs[-1]["content"])
    ):
        msgs.pop()
    return msgs


def extend(session: Session, n: int, seed: int) -> None:
    """Append a stretch of conversation that continues the view validly."""
    more = finished(n, seed, prefix=f"s{seed}-")
    if session.active_view()[-1]["role"] == "user":
        more = more[1:]
    session.append_many(more)


def prompts(session: Session) -> list[ViewEntry]:
    """The plain user prompts of the active view."""
    return [
        e
        for e in session.active_entries()
        if e.role == "user" and isinstance(e.content, str) and e.type == "user" and not e.message.is_compact_summary
    ]


def build_session(store: SessionStore, url: str, cwd: Path) -> Session:
    """A session through every compaction kind, an in-flight turn, re-read files and a late append."""
    for name in FILES:
        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / name).write_text(f"# {name}\nvalue = 1\n", encoding="utf-8")
    s = store.create_session(title="round trip", cwd=str(cwd))
    s.append_many(finished(60, 1, "a-"))
    assert compact(s).kind == "full"
    extend(s, 50, 2)
    assert compact(s, from_uuid=prompts(s)[1].uuid).kind == "partial-from"
    extend(s, 50, 3)
    assert compact(s, up_to_uuid=prompts(s)[-1].uuid).kind == "partial-up_to"
    extend(s, 60, 4)
    entries = s.active_entries()
    save_memory(
        s,
        "# Current State\nround trip\n",
        covers_seq=entries[-4].seq,
        covers_uuid=entries[-4].uuid,
        tokens=0,
        tool_calls=0,
    )
    assert compact(s, use_memory=True).kind == "session-memory"
    extend(s, 40, 5)
    s.append({"role": "user", "content": "read the config"})
    s.append(
        {
            "role": "assistant",
            "api_message_id": "live",
            "content": [{"type": "tool_use", "id": "live-1", "name": "Read", "input": {"file_path": FILES[0]}}],
        }
    )
    outcome = compact(s)
    assert outcome.kept == 2, "the in-flight turn is kept verbatim"
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "live-1", "content": "x = 1"}]})
    extend(s, 30, 6)
    assert compact(s, summarizer=LateSummarizer(url, s.id)).attachments > 0
    extend(s, 30, 7)
    return s


def export_jsonl(capsys: pytest.CaptureFixture[str], url: str, sid: str, out: Path) -> bytes:
    result = run_cli(capsys, "export", sid, "--format", "jsonl", "-o", str(out), "--db", url)
    assert result.code == 0, result.err
    return out.read_bytes()


def import_jsonl(capsys: pytest.CaptureFixture[str], url: str, path: Path) -> dict[str, Any]:
    result = run_cli(capsys, "import", "jsonl", str(path), "--json", "--db", url)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert len(report["files"]) == 1 and report["files"][0]["status"] == "imported", report
    return report["files"][0]


def history(session: Session) -> list[tuple[Any, ...]]:
    """Each boundary's facts, the view before it (uuids) and what it summarized (uuids)."""
    out = []
    for b in boundaries(session):
        facts = b.to_dict()
        out.append(
            (
                {k: facts[k] for k in BOUNDARY_FIELDS},
                [e.uuid for e in view_before(session, b.index)],
                [m.uuid for m in summarized_messages(session, b.index)],
            )
        )
    return out


def test_a_compacted_session_comes_back_exactly(
    capsys: pytest.CaptureFixture[str], store_url: str, other_url: str, tmp_path: Path
) -> None:
    with SessionStore.open(store_url) as st:
        original = build_session(st, store_url, tmp_path)
        exported = export_jsonl(capsys, store_url, original.id, tmp_path / "first.jsonl")
        original_view = original.active_view()
        original_history = history(original)
    assert len(original_history) == 6
    assert b"late: appended while summarizing" in exported

    row = import_jsonl(capsys, other_url, tmp_path / "first.jsonl")
    assert row["warnings"] == [] and row["boundaries"] == 6
    assert row["messages_added"] == len(exported.splitlines())
    assert export_jsonl(capsys, other_url, row["session"], tmp_path / "second.jsonl") == exported
    with SessionStore.open(other_url) as st:
        copy = st.get(row["session"])
        assert copy.active_view() == original_view
        assert check_messages(copy.active_view()) == []
        assert history(copy) == original_history

    again = json.loads(
        run_cli(capsys, "import", "jsonl", str(tmp_path / "first.jsonl"), "--json", "--db", other_url).out
    )
    assert again["files"][0]["status"] == "unchanged"


def test_every_shared_transcript_round_trips(
    store: SessionStore, other_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    results = import_paths(store, [transcripts_dir / "claude-code"], source="claude-code")
    results += import_paths(store, [transcripts_dir / "codex"], source="codex")
    assert len(results) == len(list(transcripts_dir.rglob("*.jsonl")))
    from sessionstore.interchange.export import export_jsonl as write_jsonl

    with SessionStore.open(other_url) as fresh:
        for k, result in enumerate(results):
            first = tmp_path / f"{k}-first.jsonl"
            original = store.get(result.session_id or "")
            with open(first, "w", encoding="utf-8") as out:
                write_jsonl(original, out)
            [back] = import_paths(fresh, [first], source="jsonl")
            assert back.status == "imported", result.path
            copy = fresh.get(back.session_id or "")
            second = tmp_path / f"{k}-second.jsonl"
            with open(second, "w", encoding="utf-8") as out:
                write_jsonl(copy, out)
            assert second.read_bytes() == first.read_bytes(), result.path
            assert check_messages(copy.active_view()) == [], result.path
            assert len(boundaries(copy)) == len(boundaries(original)), result.path


def test_import_jsonl_names_bad_lines_and_keeps_the_rest(
    capsys: pytest.CaptureFixture[str], sqlite_url: str, tmp_path: Path
) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = st.create_session(title="bad lines")
        s.append_many(finished(30, 8, "b-"))
        compact(s)
        extend(s, 20, 9)
        clean = export_jsonl(capsys, sqlite_url, s.id, tmp_path / "clean.jsonl")
    lines = clean.splitlines(keepends=True)
    robot = json.loads(lines[4])
    robot.update(uuid="robot-1", message={"role": "robot", "content": "beep"})
    foreign = b'{"type":"user","uuid":"cc-1","parentUuid":null,"message":{"role":"user","content":"hi"}}\n'
    bad = {
        3: (b'{"seq": 3, "uuid":\n', "malformed JSON"),
        6: (json.dumps(robot).encode() + b"\n", "role must be one of"),
        9: (foreign, "not a sessionstore export line"),
    }
    out: list[bytes] = []
    for raw in lines:
        if len(out) + 1 in bad:
            out.append(bad[len(out) + 1][0])
        out.append(raw)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(out))
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"

    strict = run_cli(capsys, "import", "jsonl", str(path), "--strict", "--db", fresh)
    assert strict.code == 2 and "--strict" in strict.err
    with SessionStore.open(fresh) as st:
        assert st.list() == []

    with SessionStore.open(fresh) as st:
        [result] = import_paths(st, [path])
        assert result.source == "jsonl", "the export's shape is recognized without being told"
        assert len(result.warnings) == len(bad)
        for number, (_, fragment) in bad.items():
            assert any(f"{path.resolve()}:{number}:" in w and fragment in w for w in result.warnings), number
        copy = st.get(result.session_id or "")
        assert check_messages(copy.active_view()) == []
    assert export_jsonl(capsys, fresh, copy.id, tmp_path / "again.jsonl") == clean
