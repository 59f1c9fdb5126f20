"""Layer 1: the tool-result budget, spills, the blob store and the spill commands."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from sessionstore.cli.app import main
from sessionstore.compaction.budget import CLOSE_TAG, OPEN_TAG, preview
from sessionstore.compaction.pipeline import Pipeline
from sessionstore import SessionStore
from sessionstore.storage.codecs.blobs import BlobNotFound, get_blob, put_blob
from sessionstore.storage.write.replacements import get_replacement, load_replacements
from sessionstore.storage.write.rewrite import Keep, commit_rewrite
from sessionstore.storage.write.spill import SpillNotFound, materialize_spill, spill_filename, spill_original
from tests.support.cli import run_cli
from tests.support.layers import (
    assert_transcript_kept,
    assert_valid_view,
    parallel_round,
    result_contents,
    tool_round,
    transcript,
    user,
)

EMOJI = "\U0001f600"


@pytest.fixture
def pipeline(store: SessionStore) -> Pipeline:
    return Pipeline(store, config=store.config.replace(microcompact_enabled=False))


def _preview_of(text: str) -> str:
    """The preview part of a <persisted-output> replacement."""
    head, _, rest = text.partition(" bytes):\n")
    assert head.startswith(OPEN_TAG)
    assert rest.endswith("\n" + CLOSE_TAG)
    return rest[: -len(CLOSE_TAG) - 1]


def _spilled(session) -> dict[str, str]:
    return {tid: c for tid, c in result_contents(session).items() if isinstance(c, str) and c.startswith(OPEN_TAG)}


# ------------------------------------------------------------------ blob store


def test_blob_store_is_content_addressed_and_compressed(store: SessionStore) -> None:
    data = ("line of log output\n" * 5000).encode()
    sha = put_blob(store.db, data)
    assert sha == hashlib.sha256(data).hexdigest()
    assert put_blob(store.db, data) == sha
    rows = store.db.all("SELECT sha256, size, compression, data FROM blobs")
    assert len(rows) == 1
    assert rows[0][1] == len(data) and rows[0][2] == "zlib" and len(bytes(rows[0][3])) < len(data) // 10
    assert get_blob(store.db, sha) == data
    noise = os.urandom(3000)
    assert get_blob(store.db, put_blob(store.db, noise)) == noise
    with pytest.raises(BlobNotFound):
        get_blob(store.db, "0" * 64)


# ------------------------------------------------------------ per-result limit


def test_per_result_limit_spills_just_above_50000_chars(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append_many([user("read both"), *tool_round("at_limit", "a" * 50_000), *tool_round("over", "b" * 50_001)])
    before = transcript(s)
    prepared = pipeline.prepare(s)
    shown = result_contents(s)
    assert shown["at_limit"] == "a" * 50_000
    assert shown["over"].startswith(OPEN_TAG)
    assert "50,001 bytes" in shown["over"]
    assert "'over'" in shown["over"]
    assert prepared.report["budget"].acted and prepared.report["budget"].items == 1
    assert prepared.messages == s.active_view()
    assert_valid_view(prepared.messages)
    assert assert_transcript_kept(s, before) == []
    assert spill_original(s, "over") == b"b" * 50_001
    decision = get_replacement(store.db, s.id, "over")
    assert decision is not None and decision.kind == "spilled" and decision.original_size == 50_001


def test_per_message_budget_boundary(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    exactly = {f"e{i}": str(i) * 40_000 for i in range(5)}
    over = {f"o{i}": str(i) * 40_000 for i in range(4)} | {"o_big": "z" * 40_001}
    s.append_many([user("go"), *parallel_round(exactly), *parallel_round(over)])
    prepared = pipeline.prepare(s)
    assert set(_spilled(s)) == {"o_big"}
    spilled = prepared.report["budget"].details["spilled"]
    assert [(x["tool_use_id"], x["rule"]) for x in spilled] == [("o_big", "per_message")]
    assert_valid_view(prepared.messages)


def test_per_message_budget_spills_largest_fresh_until_under(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    outputs = {
        "small": "s" * 10_000,
        "mid": "m" * 45_000,
        "big": "b" * 49_000,
        "big2": "c" * 48_000,
        "mid2": "n" * 47_000,
        "tiny": "t" * 20_000,
    }
    s.append_many([user("go"), *parallel_round(outputs)])
    pipeline.prepare(s)
    assert set(_spilled(s)) == {"big"}


def test_results_split_over_several_user_entries_count_as_one_message(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    calls = {f"p{i}": "x" * 45_000 for i in range(5)}
    s.append_many(
        [
            user("go"),
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": t, "name": "Bash", "input": {}} for t in calls],
            },
            *[
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": out}]}
                for t, out in calls.items()
            ],
        ]
    )
    prepared = pipeline.prepare(s)
    assert list(_spilled(s)) == ["p0"]
    assert_valid_view(prepared.messages)


def test_seen_results_are_not_spilled_when_the_message_grows(store: SessionStore, pipeline: Pipeline) -> None:
    ids = ["first", "second", "third", "fourth", "fifth"]
    sizes = [49_000, 49_000, 48_000, 47_000, 46_000]
    s = store.create_session()
    s.append_many(
        [
            user("go"),
            {"role": "assistant", "content": [{"type": "tool_use", "id": t, "name": "Bash", "input": {}} for t in ids]},
        ]
    )
    s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "first", "content": "f" * 49_000}]})
    assert not pipeline.prepare(s).report["budget"].acted
    s.append_many(
        [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": t, "content": "g" * n}]}
            for t, n in zip(ids[1:], sizes[1:], strict=True)
        ]
    )
    prepared = pipeline.prepare(s)
    assert list(_spilled(s)) == ["second"]
    assert_valid_view(prepared.messages)
    s.append({"role": "user", "content": "and this"})
    assert pipeline.prepare(s).report["budget"].acted is False


def test_non_text_results_are_never_spilled(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 80_000}}
    s.append_many([user("look"), *tool_round("img", [{"type": "text", "text": "y" * 60_000}, image])])
    prepared = pipeline.prepare(s)
    assert not prepared.report["budget"].acted
    assert_valid_view(prepared.messages)


def test_text_block_results_are_spilled_as_joined_text(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    parts = [{"type": "text", "text": "p" * 30_000}, {"type": "text", "text": "q" * 30_000}]
    s.append_many([user("look"), *tool_round("blocks", parts)])
    pipeline.prepare(s)
    assert spill_original(s, "blocks") == ("p" * 30_000 + "\n" + "q" * 30_000).encode()


# ---------------------------------------------------------------- the preview


def test_preview_is_2000_bytes(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append_many([user("go"), *tool_round("big", "0123456789" * 6_000)])
    pipeline.prepare(s)
    shown = result_contents(s)["big"]
    assert _preview_of(shown) == ("0123456789" * 200)
    assert "first 2,000 bytes" in shown


@pytest.mark.parametrize("prefix_len, expected_bytes", [(1996, 2000), (1997, 1997), (1998, 1998), (1999, 1999)])
def test_preview_cuts_on_a_utf8_boundary(prefix_len: int, expected_bytes: int) -> None:
    data = ("a" * prefix_len + EMOJI * 10).encode()
    head = preview(data, 2000)
    assert len(head.encode()) == expected_bytes
    assert data.startswith(head.encode())


def test_emoji_at_preview_boundary_and_spill_cat_byte_for_byte(
    store: SessionStore, store_url: str, pipeline: Pipeline, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    original = "a" * 1999 + EMOJI * 50_000 + "\u00e9nd\r\n\x00tail"
    s = store.create_session()
    s.append_many([user("go"), *tool_round("emoji", original)])
    pipeline.prepare(s)
    head = _preview_of(result_contents(s)["emoji"])
    assert head == "a" * 1999
    capsysbinary.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["spill", "cat", s.id, "emoji", "--db", store_url])
    assert exit_info.value.code in (0, None)
    assert capsysbinary.readouterr().out == original.encode()


# -------------------------------------------------------------- idempotency


def test_replacement_is_byte_identical_across_calls_and_reopen(store: SessionStore, store_url: str) -> None:
    config = store.config.replace(microcompact_enabled=False)
    s = store.create_session()
    s.append_many([user("go"), *tool_round("r1", "r" * 70_000)])
    Pipeline(store, config=config).prepare(s)
    first = result_contents(s)["r1"]
    version = s.view_version
    again = Pipeline(store, config=config).prepare(s)
    assert result_contents(s)["r1"] == first
    assert not again.report["budget"].acted and s.view_version == version
    with SessionStore.open(store_url) as reopened:
        s2 = reopened.get(s.id)
        prepared = Pipeline(reopened, config=config).prepare(s2)
        assert not prepared.report["budget"].acted
        assert result_contents(s2)["r1"] == first
        assert load_replacements(reopened.db, s.id)["r1"].text == first
    assert store.db.one("SELECT COUNT(*) FROM blobs")[0] == 1


def test_recorded_decision_is_reapplied_where_the_view_shows_the_original(
    store: SessionStore, pipeline: Pipeline
) -> None:
    s = store.create_session()
    s.append_many([user("go"), *tool_round("r1", "r" * 70_000)])
    pipeline.prepare(s)
    replaced = result_contents(s)["r1"]
    snap = s.snapshot()
    plan = [Keep(e.seq, e.message.content) if e.replaced else Keep(e.seq) for e in snap.entries]
    commit_rewrite(s, base_version=snap.view_version, snapshot_last_seq=snap.last_seq, plan=plan)
    assert result_contents(s)["r1"] == "r" * 70_000
    prepared = Pipeline(store, config=pipeline.config).prepare(s)
    assert prepared.report["budget"].details["reapplied"] == 1
    assert result_contents(s)["r1"] == replaced


def test_dry_run_writes_nothing(store: SessionStore, pipeline: Pipeline) -> None:
    s = store.create_session()
    s.append_many([user("go"), *tool_round("r1", "r" * 70_000)])
    before = transcript(s)
    version = s.view_version
    prepared = pipeline.prepare(s, dry_run=True)
    assert prepared.report["budget"].acted
    assert prepared.messages[-1]["content"][0]["content"].startswith(OPEN_TAG)
    assert s.view_version == version
    assert transcript(s) == before
    assert store.db.one("SELECT COUNT(*) FROM blobs")[0] == 0
    assert store.db.one("SELECT COUNT(*) FROM replacements")[0] == 0


# ------------------------------------------------------------ spill commands


def test_spill_list_and_materialize_cli(
    store: SessionStore, store_url: str, pipeline: Pipeline, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    s = store.create_session()
    s.append_many([user("go"), *tool_round("toolu_A", "A" * 60_000), *tool_round("toolu_B", "B" * 55_555)])
    pipeline.prepare(s)
    listed = run_cli(capsys, "spill", "list", s.id, "--db", store_url, "--json")
    assert listed.code == 0
    rows = json.loads(listed.out)
    assert [(r["tool_use_id"], r["original_size"], r["kind"]) for r in rows] == [
        ("toolu_A", 60_000, "spilled"),
        ("toolu_B", 55_555, "spilled"),
    ]
    table = run_cli(capsys, "spill", "list", s.id, "--db", store_url)
    assert table.code == 0 and "toolu_A" in table.out
    out = run_cli(capsys, "spill", "materialize", s.id, "toolu_B", str(tmp_path / "spills"), "--db", store_url)
    assert out.code == 0
    path = Path(out.out.strip())
    assert path.parent == (tmp_path / "spills").resolve()
    assert path.read_bytes() == b"B" * 55_555
    missing = run_cli(capsys, "spill", "cat", s.id, "toolu_nope", "--db", store_url)
    assert missing.code == 2 and "toolu_nope" in missing.err and missing.err.count("\n") == 1


def test_spill_original_of_unknown_id_raises(store: SessionStore) -> None:
    s = store.create_session()
    with pytest.raises(SpillNotFound):
        spill_original(s, "never")


# --------------------------------------------------------------- path safety

HOSTILE_IDS = [
    "../../x",
    "/etc/passwd",
    "a/../../b",
    "..",
    ".",
    "~root",
    "C:\\Windows\\x",
    "x" * 200,
    "con",
    "a b\tc\nd",
]


def _store_spill(store: SessionStore, session_id: str, tool_use_id: str, data: bytes) -> None:
    """A spill decision written directly (ids the message validator would refuse included)."""
    sha = put_blob(store.db, data)
    store.db.execute(
        "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
        "created_at) VALUES (:s, :t, 'spilled', 'x', :sha, :n, 0)",
        {"s": session_id, "t": tool_use_id, "sha": sha, "n": len(data)},
    ).close()


def test_materialize_stays_inside_the_directory(store: SessionStore, tmp_path: Path) -> None:
    s = store.create_session()
    for n, tool_use_id in enumerate(HOSTILE_IDS):
        _store_spill(store, s.id, tool_use_id, b"payload " + tool_use_id.encode())
        sandbox = tmp_path / f"sandbox{n}"
        target = sandbox / "a" / "b" / "out"
        path = materialize_spill(s, tool_use_id, target)
        assert path.parent == target.resolve(), tool_use_id
        assert path.read_bytes() == b"payload " + tool_use_id.encode()
        assert [p for p in sandbox.resolve().rglob("*") if not p.is_dir()] == [path], tool_use_id


@pytest.mark.parametrize("tool_use_id", ["a\x00b", "\x00", "y" * 10_000, "../" * 300, "/" + "z/" * 500])
def test_file_names_are_safe_whatever_the_id(tool_use_id: str, tmp_path: Path) -> None:
    name = spill_filename(tool_use_id)
    assert "/" not in name and "\x00" not in name and "\\" not in name
    assert len(name) < 100 and not name.startswith(".")
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_distinct_ids_get_distinct_files() -> None:
    names = {spill_filename(i) for i in ["a/b", "a_b", "a?b", "a b", "a\x00b"]}
    assert len(names) == 5


def test_materialize_does_not_follow_a_planted_symlink(store: SessionStore, tmp_path: Path) -> None:
    s = store.create_session()
    _store_spill(store, s.id, "toolu_link", b"new content")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / spill_filename("toolu_link")).symlink_to(outside)
    path = materialize_spill(s, "toolu_link", folder)
    assert not path.is_symlink() and path.read_bytes() == b"new content"
    assert outside.read_bytes() == b"keep me"
