"""A kill at each fault point of an SDK adapter append and of the import of its lines, then the recovery.

An append is two transactions: the entries kept (`agent_sdk.append.*`, what the SDK waits for),
then their lines imported into the session (`agent_sdk.import.*`, when the adapter's appends pause,
on flush or close, or by the next command). A forked child appends a batch of real Claude Code lines
and imports it with one point armed and SIGKILLs itself there.

- Killed in the append before COMMIT the store is exactly as it was; after it, the entries are
  kept and their session is as it was (the lines pending). The SDK's retry of the batch (a uuid
  already stored is not added again) and the import give the reference store.
- Killed in the import, the entries are kept and the session is as it was (before COMMIT) or as one
  clean append and import left the reference store (after it); the next catch-up gives the
  reference store.

The reference store is one clean append and import: the same entries, summary, session rows and
export, and doctor finds nothing. The first batch of a key (over a thousand lines: a mid-file flush,
the session's dictionary) and a later one (the session's last block reopened) each reach their points.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("claude_agent_sdk")

from sessionstore import SessionStore  # noqa: E402
from sessionstore.integrations.agent_sdk import AgentSdkStore  # noqa: E402
from sessionstore.integrations.sdk_entries import catch_up  # noqa: E402
from sessionstore.storage import doctor, faults  # noqa: E402
from tests.conftest import PG_URL, Templates  # noqa: E402
from tests.support.faultcases import case_for  # noqa: E402
from tests.support.wholestate import session_rows  # noqa: E402
from tests.test_fault_points import _assert_killed_at, _fork  # noqa: E402

KEY = {"project_key": "-work-project", "session_id": "258c7280-ae70-4798-800f-63464d01a85d"}
FIRST = 1_100  # lines in the first batch: more than importing.BATCH, so one flush happens mid-batch
GROWTH = 40  # lines in the later batch
#: Points only a later batch reaches (the session's last, partial block taken back).
GROWTH_ONLY = ("agent_sdk.import.after_tail_block",)
#: Points only a key's first batch reaches (its dictionary trained, a flush mid-batch).
FIRST_ONLY = ("agent_sdk.import.after_dictionary", "agent_sdk.import.mid_file")


def _points() -> list[str]:
    return [p for p in faults.POINTS if case_for(p) == "agent_sdk"]


@pytest.fixture(params=["sqlite", "postgresql"])
def new_url(request: pytest.FixtureRequest, tmp_path: Path, templates: Templates) -> Iterator[Any]:
    """A maker of new, migrated stores on one engine (dropped afterwards)."""
    if request.param == "postgresql" and not PG_URL:
        pytest.skip("needs SESSIONSTORE_TEST_PG_URL")
    made: list[Iterator[str]] = []

    def new() -> str:
        if request.param == "sqlite":
            return templates.sqlite(tmp_path / f"s{len(made)}-{len(list(tmp_path.iterdir()))}.db")
        schema = templates.postgresql(PG_URL or "")
        made.append(schema)
        return next(schema)

    try:
        yield new
    finally:
        for schema in made:
            next(schema, None)


def _lines(transcripts_dir: Path) -> list[dict[str, Any]]:
    path = transcripts_dir / "claude-code" / "spotter" / f"{KEY['session_id']}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()][: FIRST + GROWTH]


def _append(store: SessionStore, batch: list[dict[str, Any]]) -> None:
    """The SDK's append of a batch, then the import of its lines (what the adapter does when its appends pause)."""
    adapter = AgentSdkStore(store)
    asyncio.run(adapter.append(KEY, batch))  # type: ignore[arg-type]
    adapter.close()


def _state(url: str) -> dict[str, Any]:
    """What the adapter and a person see: entries, listing and summary (times left out), the session's rows."""
    with SessionStore.open(url) as store:
        adapter = AgentSdkStore(store)

        async def look() -> dict[str, Any]:
            summaries = await adapter.list_session_summaries(KEY["project_key"])
            return {
                "entries": await adapter.load(KEY),  # type: ignore[arg-type]
                "listed": [s["session_id"] for s in await adapter.list_sessions(KEY["project_key"])],
                "summaries": [(s["session_id"], s["data"]) for s in summaries],
            }

        state = asyncio.run(look())
        linked = store.db.one("SELECT linked_session, entry_count, imported_count FROM agent_sdk_keys")
        state["pending"] = None if linked is None else int(linked[1]) - int(linked[2])
        state["key"] = None if linked is None else int(linked[1])
        state["session"] = session_rows(store, str(linked[0])) if linked and linked[0] else None
        state["sessions"] = int(store.db.one("SELECT count(*) FROM sessions")[0])
        assert doctor.check(store).problems == [] and doctor.check_database(store) == []
    return state


@pytest.mark.parametrize("scenario", ["first batch", "later batch"])
def test_a_kill_at_each_point_then_the_retried_batch_gives_one_clean_append(
    new_url: Any, transcripts_dir: Path, scenario: str
) -> None:
    lines = _lines(transcripts_dir)
    before, batch = ([], lines[:FIRST]) if scenario == "first batch" else (lines[:FIRST], lines[FIRST:])
    skip = GROWTH_ONLY if scenario == "first batch" else FIRST_ONLY
    points = [p for p in _points() if p not in skip]
    reference_url = new_url()
    with SessionStore.open(reference_url) as store:
        if before:
            _append(store, before)
        old_url = new_url()
        with SessionStore.open(old_url) as old:
            if before:
                _append(old, before)
        _append(store, batch)
    reference, old_state = _state(reference_url), _state(old_url)
    assert reference["session"] is not None and reference != old_state
    for point in points:
        url = new_url()
        if before:
            with SessionStore.open(url) as store:
                _append(store, before)
        in_append = point.startswith("agent_sdk.append.")
        _assert_killed_at(_fork(url, point, lambda st: _append(st, batch)), point, url)
        killed = _state(url)
        kept = {**reference, "session": old_state["session"], "sessions": old_state["sessions"], "pending": len(batch)}
        if in_append:
            assert killed == (kept if point.endswith(".after_commit") else old_state), point
            with SessionStore.open(url) as store:
                _append(store, batch)  # the SDK's retry of the batch, then the import
        else:
            assert killed == (reference if point.endswith(".after_commit") else kept), point
            with SessionStore.open(url) as store:
                catch_up(store)  # what the adapter's next flush or close, or the next command, does
        assert _state(url) == reference, point
