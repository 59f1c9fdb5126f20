"""A Codex rollout's `model_context_window` becomes the imported session's window, on both engines."""

from __future__ import annotations

from pathlib import Path

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_file

ROLLOUT = "codex/localpush/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"


def test_the_rollouts_context_window_is_the_sessions(store: SessionStore, transcripts_dir: Path) -> None:
    session = store.get(import_file(store, transcripts_dir / ROLLOUT).session_id or "")
    assert session.context_window == 258_400


def test_a_rollout_that_reports_no_window_keeps_the_default(
    store: SessionStore, transcripts_dir: Path, tmp_path: Path
) -> None:
    data = (transcripts_dir / ROLLOUT).read_bytes().replace(b'"model_context_window":258400', b'"other":1')
    path = tmp_path / Path(ROLLOUT).name
    path.write_bytes(data)
    assert store.get(import_file(store, path).session_id or "").context_window == 200_000
