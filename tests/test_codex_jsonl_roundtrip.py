"""A Codex session's `export -f jsonl` and `import jsonl` keep the session's model, cwd, title and source id.

A Codex rollout says them in its session header, not on each message, so an export of
messages alone lost them (the re-import had no model, no cwd, a title from the first
prompt and a digest for a source id). The export's first line carries them (`session`).
"""

from __future__ import annotations

import json
from pathlib import Path

from sessionstore import SessionStore
from sessionstore.interchange.export import export_jsonl
from sessionstore.interchange.importing import import_paths

ROLLOUT = "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
FACTS = ("title", "cwd", "model", "context_window", "source_id", "messages", "view_tokens")


def _facts(store: SessionStore, session_id: str) -> dict[str, object]:
    row = next(r for r in store.list(limit=100) if r["id"] == session_id)
    return {k: row[k] for k in FACTS}


def test_a_codex_session_survives_the_jsonl_round_trip(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    [first] = import_paths(store, [transcripts_dir / ROLLOUT], source="codex")
    original = _facts(store, first.session_id or "")
    assert original["model"] and original["cwd"] and original["title"]
    assert original["source_id"] == "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"
    assert original["context_window"] == 258_400
    exported = tmp_path / "codex.jsonl"
    with open(exported, "w", encoding="utf-8") as out:
        export_jsonl(store.get(first.session_id or ""), out)

    with SessionStore.open(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh:
        [back] = import_paths(fresh, [exported])
        assert back.status == "imported" and back.source == "jsonl" and back.warnings == []
        assert _facts(fresh, back.session_id or "") == original
        assert fresh.get("019c8bfe").id == back.session_id, "the source id finds the copy, as it found the original"
        again = tmp_path / "again.jsonl"
        with open(again, "w", encoding="utf-8") as out:
            export_jsonl(fresh.get(back.session_id or ""), out)
    assert again.read_bytes() == exported.read_bytes()


def test_a_header_with_bad_values_falls_back_to_what_the_messages_say(sqlite_url: str, tmp_path: Path) -> None:
    with SessionStore.open(sqlite_url) as store:
        s = store.create_session(title="made here", cwd="/work/here", model="claude-sonnet-4-6")
        s.append({"role": "user", "content": "hello there"})
        path = tmp_path / "made.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            export_jsonl(s, out)
    first, *rest = path.read_text().splitlines(keepends=True)
    line = json.loads(first)
    assert line["session"]["source_id"] is None and line["session"]["title"] == "made here"
    line["session"] = {"source_id": "x" * 501, "title": 7, "model": "m" * 201, "context_window": -3}
    path.write_text(json.dumps(line) + "\n" + "".join(rest))
    with SessionStore.open(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh:
        [back] = import_paths(fresh, [path])
        assert back.status == "imported"
        copy = fresh.get(back.session_id or "")
        assert copy.title == "hello there" and copy.model is None and copy.context_window == 200_000
        row = fresh.db.one("SELECT source_key FROM imports WHERE session_id = :id", {"id": copy.id})
        assert row is not None and str(row[0]).startswith("jsonl-")
