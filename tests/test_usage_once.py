"""Each API response counts once across forks, continuations and copies (issue #35), on both engines.

A fork copies its view's messages with their response ids and usage; a Claude Code resume copies a
session's lines into a new file under a new session id. Neither is spend that happened again: the
console script's `usage` total stays what it was, and deleting the original leaves it too (the
copies then carry the responses they share).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path


from tests.support.outside import private_env, sessionstore

CODEX_COMPACTED = "019c8a59"
SPOTTER = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _total(url: str, env: dict[str, str]) -> dict[str, object]:
    ran = sessionstore(url, env, "usage", "--json")
    assert ran.code == 0 and not ran.traceback, ran.err
    return json.loads(ran.out)["total"]


def _session_ids(url: str, env: dict[str, str], *source_ids: str) -> list[str]:
    """The ids of the sessions imported from these source ids (prefixes), as `sessions --json` lists them."""
    ran = sessionstore(url, env, "sessions", "--json")
    assert ran.code == 0, ran.err
    listed = json.loads(ran.out)
    return [next(s["id"] for s in listed if (s["source_id"] or "").startswith(p)) for p in source_ids]


def _resumed_copy(original: Path, folder: Path) -> Path:
    """What `claude --resume` leaves: the same lines under a new session id, in a file of its own."""
    new_id = str(uuid.uuid4())
    old_id = original.stem
    folder.mkdir()
    target = folder / f"{new_id}.jsonl"
    target.write_text(original.read_text(encoding="utf-8").replace(old_id, new_id), encoding="utf-8")
    return target


def test_forks_copies_and_deletes_leave_the_usage_total_as_it_was(
    store_url: str, transcripts_dir: Path, tmp_path: Path
) -> None:
    env = private_env(tmp_path / "home")
    for source, path in (("claude-code", SPOTTER), ("codex", "codex")):
        ran = sessionstore(store_url, env, "import", source, str(transcripts_dir / path))
        assert ran.code == 0, ran.err
    before = _total(store_url, env)
    assert before["responses"] > 400 and before["cost_usd"] > 1

    codex, spotter = _session_ids(store_url, env, CODEX_COMPACTED, "258c7280-ae70")
    forked = sessionstore(store_url, env, "fork", codex, "-b", "1", "--json")
    assert forked.code == 0, forked.err
    assert sessionstore(store_url, env, "fork", spotter).code == 0
    assert _total(store_url, env) == before

    copy = _resumed_copy(transcripts_dir / SPOTTER, tmp_path / "resumed")
    ran = sessionstore(store_url, env, "import", "claude-code", str(copy))
    assert ran.code == 0, ran.err
    assert _total(store_url, env) == before

    # A fork goes: its copies were never counted. The original of a whole copy goes: the copy
    # (the resume holds every line of the file) now carries each response it shares.
    for sid in (json.loads(forked.out)["id"], spotter):
        ran = sessionstore(store_url, env, "delete", sid, "--yes")
        assert ran.code == 0, ran.err
    assert _total(store_url, env) == before


def test_a_continuation_counts_only_what_it_adds(store_url: str, transcripts_dir: Path, tmp_path: Path) -> None:
    env = private_env(tmp_path / "home")
    ran = sessionstore(store_url, env, "import", "claude-code", str(transcripts_dir / SPOTTER))
    assert ran.code == 0, ran.err
    before = _total(store_url, env)
    (spotter,) = _session_ids(store_url, env, "258c7280-ae70")
    # A local write to an imported session goes to its continuation (a fork of its view).
    ran = sessionstore(store_url, env, "compact", spotter)
    assert ran.code == 0, ran.err
    ran = sessionstore(store_url, env, "sessions", "--json")
    assert len(json.loads(ran.out)) == 2, "the compaction did not make a continuation"
    assert _total(store_url, env) == before
