"""A Claude Code export either imports back as the same view and history, or is refused naming jsonl.

Both engines. A partial compaction comes back with its kind (a field Claude
Code ignores) and its summary (the kept run hangs from its boundary, which is
no leaf however it is stamped); a view the format cannot express (a snip) is
refused before anything is written, instead of a file that imports as
another view.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.export import export_claude_code
from sessionstore.interchange.fidelity import UnfaithfulExport
from sessionstore.interchange.importers import parse_file
from sessionstore.interchange.importing import import_file
from sessionstore.storage.write.continuation import continuation_of
from sessionstore.storage.read.history import boundaries
from tests.support.cli import claude_code_round_trip, run_cli
from tests.test_claude_code_roundtrip import other_url, round_trip, snapshot  # noqa: F401  (other_url is a fixture)
from tests.test_roundtrip import build_session

SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"
FASTHOOKS = "claude-code/fasthooks/sample_main_transcript.jsonl"
#: A user message in the middle of the file's active view (after its own compaction).
PIVOT = "11503a95-8cfe-4979-8e77-5600dcc250c3"


def test_a_partial_compaction_of_an_imported_session_never_imports_as_another_view(
    capsys: pytest.CaptureFixture[str],
    store_url: str,
    other_url: str,  # noqa: F811  (the fixture imported above)
    transcripts_dir: Path,
    tmp_path: Path,
) -> None:
    """The user's path: import, `compact --from`, export claude-code. The compaction went to the local
    continuation, whose view starts with the file's boundary, copied with its compaction (boundary 1):
    that export imports back as the same view and history; the source-side session still exports as its file."""
    with SessionStore.open(store_url) as store:
        sid = import_file(store, transcripts_dir / SPOTTER).session_id or ""
    assert run_cli(capsys, "compact", sid, "--from", PIVOT, "--db", store_url).code == 0
    with SessionStore.open(store_url) as store, SessionStore.open(other_url) as other:
        local = continuation_of(store.get(sid), create=False)
        assert local is not None and [b.kind for b in boundaries(local)] == ["full", "partial-from"]
        copy = round_trip(store, other, local.id, tmp_path, "claude-code")
        assert snapshot(copy) == snapshot(local)
        out = io.BytesIO()
        export_claude_code(store.get(sid), out)
        assert out.getvalue() == (transcripts_dir / SPOTTER).read_bytes()


def line(uuid: str, parent: str | None, kind: str, stamp: str, **extra: object) -> str:
    entry: dict[str, object] = {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s-1",
        "type": kind,
        "uuid": uuid,
        "timestamp": f"2026-01-01T00:00:{stamp}Z",
        **extra,
    }
    if kind in ("user", "assistant"):
        entry["message"] = {"role": kind, "content": f"text of {uuid}"}
    return json.dumps(entry)


def test_a_kept_prefix_hangs_from_its_boundary_even_when_the_boundary_is_stamped_last(tmp_path: Path) -> None:
    """A partial-from compaction writes its summary, then its boundary a millisecond later: the summary is the leaf."""
    segment = {"headUuid": "u1", "anchorUuid": "b", "tailUuid": "u2"}
    lines = [
        line("u1", None, "user", "01.000"),
        line("a1", "u1", "assistant", "02.000"),
        line("u2", "a1", "user", "03.000"),
        line("a2", "u2", "assistant", "04.000"),
        line(
            "b",
            None,
            "system",
            "05.001",
            subtype="compact_boundary",
            logicalParentUuid="a2",
            content="Conversation compacted",
            compactMetadata={"trigger": "manual", "preservedSegment": segment},
        ),
        line("s", "u2", "user", "05.000", isCompactSummary=True),
    ]
    path = tmp_path / "s-1.jsonl"
    path.write_text("\n".join(lines) + "\n")
    plan = parse_file(path, "claude-code")
    assert plan.active_chain == ["b", "u1", "a1", "u2", "s"]


def test_a_snipped_view_is_refused_in_the_claude_code_format(
    capsys: pytest.CaptureFixture[str], store: SessionStore, store_url: str, tmp_path: Path
) -> None:
    """Claude Code's chain cannot leave a message out of its middle: the export says so and writes nothing."""
    from sessionstore.compaction.pipeline import Pipeline

    s = store.create_session(title="snip")
    s.append_many(
        [
            {"role": "user", "content": "fix the bug"},
            {"role": "assistant", "content": "done, see the diff"},
            {"role": "user", "content": "ok"},
            {"role": "user", "content": "now add a test"},
            {"role": "assistant", "content": "added"},
            {"role": "user", "content": "thanks"},
            {"role": "user", "content": "and the docs?"},
            {"role": "assistant", "content": "updated"},
        ]
    )
    assert Pipeline(store).prepare(s).report["snip"].acted
    with pytest.raises(UnfaithfulExport, match="--format jsonl"):
        export_claude_code(s, io.BytesIO())
    result = run_cli(capsys, "export", s.id, "-f", "claude-code", "--db", store_url)
    assert result.code == 2 and result.out == "" and result.err.count("\n") == 1 and "jsonl" in result.err
    out = tmp_path / "as-recorded.jsonl"
    result = run_cli(capsys, "export", s.id, "-f", "claude-code", "--as-recorded", "-o", str(out), "--db", store_url)
    assert result.code == 0, result.err
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert {w["uuid"] for w in written} >= {m.uuid for m in s.transcript() if m.type != "system"}


def test_every_kind_comes_back_with_its_kind(
    store_url: str,
    other_url: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    with SessionStore.open(store_url) as st, SessionStore.open(other_url) as other:
        original = build_session(st, store_url, tmp_path)
        copy = round_trip(st, other, original.id, tmp_path, "claude-code")
        kinds = [b.kind for b in boundaries(original)]
        assert {"partial-from", "partial-up_to"} <= set(kinds)
        assert [b.kind for b in boundaries(copy)] == kinds


@pytest.mark.parametrize("shape", ["bom", "crlf", "no-final-newline", "all"])
def test_the_file_s_own_bytes_come_back_bom_crlf_and_missing_final_newline_included(
    empty_store_url: str, transcripts_dir: Path, tmp_path: Path, shape: str
) -> None:
    """Through the console script: a real transcript as an editor on Windows may leave it (a UTF-8 byte order
    mark on line 1, CRLF line ends, no newline after the last line) imports and exports byte for byte."""
    data = (transcripts_dir / FASTHOOKS).read_bytes()
    if shape in ("bom", "all"):
        data = b"\xef\xbb\xbf" + data
    if shape in ("crlf", "all"):
        data = data.replace(b"\n", b"\r\n")
    if shape in ("no-final-newline", "all"):
        data = data.rstrip(b"\r\n")
    path = tmp_path / f"{shape}.jsonl"
    path.write_bytes(data)
    assert claude_code_round_trip(empty_store_url, str(path), str(tmp_path / "back.jsonl")) == data
