"""The write operations the fault-point test kills, each with a deterministic starting state.

A case builds its session (`setup`, in the test process) and runs one operation
on it (`run`, in a forked child that dies at the point under test). Every
message has a fixed uuid and timestamp, so two sessions set up alike and given
the same operation end in the same view: the reference for "the new one".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from sessionstore import SessionStore
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.interchange.importing import import_paths
from sessionstore.storage.upkeep import doctor
from sessionstore.storage.write.memory import save_memory
from sessionstore.storage.write.apicompaction import commit_api_compaction
from sessionstore.storage.write.pins import pin, unpin
from sessionstore.storage.records.state import ViewSnapshot
from tests.support.layers import T0, assistant, at, parallel_round, tool_round, user
from tests.support.messages import conversation


@dataclass(frozen=True)
class Case:
    """One operation: `setup(store) -> session id`, then `run(store, session id)` in the child."""

    name: str
    setup: Callable[[SessionStore], str]
    run: Callable[[SessionStore, str], None]


def _fixed(messages: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """Give every message a fixed uuid and timestamp (a second apart)."""
    out = []
    for i, m in enumerate(messages):
        out.append({**m, "uuid": f"{tag}-{i:05d}", "timestamp": m.get("timestamp") or at(i / 60)})
    return out


def _complete(n: int, seed: int) -> list[dict[str, Any]]:
    """A conversation of at most n messages that ends on a finished assistant turn."""
    msgs = [{k: v for k, v in m.items() if k != "usage"} for m in conversation(n, seed=seed)]
    while msgs[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in msgs[-1]["content"]):
        msgs.pop()
    return msgs


def _layer_only(store: SessionStore, **changes: Any) -> Any:
    """The store's config with `changes`, and session memory kept from updating: it writes in a
    transaction of its own after a layer's rewrite, which is not the write a layer's case kills."""
    return store.config.replace(memory_init_tokens=10_000_000, **changes)


def _session(store: SessionStore, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    s = store.create_session(title="faults", **kwargs)
    s.append_many(messages)
    return s.id


def _conversation_setup(store: SessionStore) -> str:
    return _session(store, _fixed(_complete(60, 3), "c"))


def _pivot(store: SessionStore, sid: str) -> str:
    """The uuid of the user prompt nearest the middle of the view."""
    entries = store.get(sid).active_entries()
    prompts = [e for e in entries if e.role == "user" and isinstance(e.content, str)]
    return prompts[len(prompts) // 2].uuid


def _memory_setup(store: SessionStore) -> str:
    sid = _session(store, _fixed(_complete(120, 4), "m"))
    s = store.get(sid)
    entries = s.active_entries()
    covered = entries[len(entries) // 2]
    save_memory(
        s,
        "# Current State\nhalf way through the requests\n",
        covers_seq=covered.seq,
        covers_uuid=covered.uuid,
        tokens=0,
        tool_calls=0,
    )
    return sid


def _run_memory(store: SessionStore, sid: str) -> None:
    config = store.config.replace(
        memory_keep_min_tokens=500, memory_keep_min_text_messages=1, memory_keep_max_tokens=5_000
    )
    compact(store.get(sid), use_memory=True, config=config)


def _micro_setup(store: SessionStore) -> str:
    msgs = [user("Read the whole package")]
    for i in range(13):
        msgs += tool_round(f"r{i:02d}", f"contents of r{i:02d}\n" * 40)
    msgs.append(assistant("Read everything."))
    return _session(store, _fixed(msgs, "u"))


def _run_micro(store: SessionStore, sid: str) -> None:
    config = _layer_only(store, snip_enabled=False)
    Pipeline(store, config=config).prepare(store.get(sid), now=T0 + timedelta(minutes=30))


def _snip_setup(store: SessionStore) -> str:
    msgs = [
        user("Fix the failing test"),
        assistant("Fixed it."),
        user("ok"),
        user("Now update the docs"),
        assistant("Updated.", usage={"input_tokens": 5_000, "output_tokens": 100}),
    ]
    return _session(store, _fixed(msgs, "n"))


def _run_snip(store: SessionStore, sid: str) -> None:
    Pipeline(store, config=_layer_only(store, microcompact_enabled=False)).prepare(store.get(sid), now=T0)


COLLAPSE_WINDOW, COLLAPSE_START = 60_000, 36_000


def _collapse_setup(store: SessionStore) -> str:
    msgs = [user("Audit every module of the package")]
    for i in range(10):
        msgs += tool_round(f"t{i}", f"module {i} line\n" * 300)
    msgs.append(assistant("Audit finished.", usage={"input_tokens": COLLAPSE_START, "output_tokens": 0}))
    return _session(store, _fixed(msgs, "k"), context_window=COLLAPSE_WINDOW)


def _run_collapse(store: SessionStore, sid: str) -> None:
    config = _layer_only(store, collapse_enabled=True, microcompact_enabled=False)
    Pipeline(store, config=config).prepare(store.get(sid), now=T0)


def _spill_setup(store: SessionStore) -> str:
    over = {f"o{i}": str(i) * 40_000 for i in range(4)} | {"o_big": "z" * 40_001}
    return _session(store, _fixed([user("go"), *parallel_round(over), assistant("read them")], "p"))


def _run_spill(store: SessionStore, sid: str) -> None:
    Pipeline(store, config=_layer_only(store)).prepare(store.get(sid), now=T0)


def _batch(tag: str) -> list[dict[str, Any]]:
    return _fixed([user(f"{tag}: one more thing"), *tool_round(f"{tag}-t", "ran it"), assistant("done")], tag)


def _doctor_setup(store: SessionStore) -> str:
    """A session whose stored running total is off by 7 (on the session row, where a repair writes it)."""
    sid = _conversation_setup(store)
    state = store.get(sid).refresh_state()
    store.db.run_write(
        lambda db: db.execute(
            "UPDATE sessions SET last_seq = :last, view_tokens = :tokens, tail_state = :tail WHERE id = :id",
            {"last": state.last_seq, "tokens": state.view_tokens + 7, "tail": state.tail.dumps(), "id": sid},
        ).close()
    )
    return sid


def _first_prompt(store: SessionStore, sid: str) -> str:
    """The uuid of the session's first typed user prompt (a message with text to pin)."""
    return next(e.uuid for e in store.get(sid).active_entries() if e.role == "user" and isinstance(e.content, str))


#: An on-demand compaction reply as the API returns it (the foreground case appends it).
API_REPLY = {
    "id": "msg_fault_compaction",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-7",
    "stop_reason": "compaction",
    "content": [{"type": "compaction", "content": "Summary for the fault test.", "signature": "c2ln"}],
    "usage": {"input_tokens": 0, "output_tokens": 0},
}


def _background_setup(store: SessionStore) -> str:
    """A conversation whose last message arrived while a background compaction request was in flight."""
    sid = _conversation_setup(store)
    store.get(sid).append({"role": "user", "content": "appended while the compaction ran"})
    return sid


def _run_background_swap(store: SessionStore, sid: str) -> None:
    """The swap of a background compaction sent before the last message: that message must follow the reply."""
    session = store.get(sid)
    state = session.refresh_state()
    sent = ViewSnapshot([], state.view_version, state.last_seq - 1, state.view_tokens)
    commit_api_compaction(session, API_REPLY, sent=sent, background=True)


def _pinned_setup(store: SessionStore) -> str:
    sid = _conversation_setup(store)
    pin(store.get(sid), _first_prompt(store, sid))
    return sid


CASES: dict[str, Case] = {
    c.name: c
    for c in [
        Case("append", _conversation_setup, lambda st, sid: st.get(sid).append(_batch("a1")[0])),
        Case("append_many", _conversation_setup, lambda st, sid: st.get(sid).append_many(_batch("a2"))),
        Case("rewrite.full", _conversation_setup, lambda st, sid: compact(st.get(sid))),
        Case(
            "rewrite.partial-from", _conversation_setup, lambda st, sid: compact(st.get(sid), from_uuid=_pivot(st, sid))
        ),
        Case(
            "rewrite.partial-up_to",
            _conversation_setup,
            lambda st, sid: compact(st.get(sid), up_to_uuid=_pivot(st, sid)),
        ),
        Case("rewrite.session-memory", _memory_setup, _run_memory),
        Case("rewrite.microcompact", _micro_setup, _run_micro),
        Case("rewrite.snip", _snip_setup, _run_snip),
        Case("rewrite.collapse", _collapse_setup, _run_collapse),
        Case("rewrite.spill", _spill_setup, _run_spill),
        Case("rewrite.api-boundary", _conversation_setup, lambda st, sid: st.get(sid).append(API_REPLY)),
        Case("rewrite.api-background", _background_setup, _run_background_swap),
        Case("doctor.repair", _doctor_setup, lambda st, sid: doctor.repair(st, sid)),
        Case("pin", _conversation_setup, lambda st, sid: pin(st.get(sid), _first_prompt(st, sid))),
        Case("unpin", _pinned_setup, lambda st, sid: unpin(st.get(sid), _first_prompt(st, sid))),
    ]
}


#: The PostgreSQL-only writes of sharing and access (tests/test_fault_points_sharing.py).
SHARING = ("share", "unshare", "grant", "revoke")


def case_for(point: str) -> str:
    """The case whose operation reaches `point` (the longest matching prefix)."""
    names = [
        name
        for name in [*CASES, *SHARING, "import", "migration", "fork", "search.index", "vacuum", "agent_sdk"]
        if point.startswith(name + ".")
    ]
    return max(names, key=len)


# ------------------------------------------------------------------ import


IMPORT_BIG_LINES = 1_100  # more than importing.BATCH, so one flush happens mid-file


def write_import_files(folder: Path, tag: str) -> dict[str, int]:
    """Two Claude Code files (a big one first, then a small one); returns path -> line count."""
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, n in (("a", IMPORT_BIG_LINES), ("b", 12)):
        sid = f"{tag}-{name}"
        lines, parent = [], None
        for i in range(n):
            u = f"{sid}-{i:05d}"
            role = "user" if i % 2 == 0 else "assistant"
            lines.append(
                json.dumps(
                    {
                        "type": role,
                        "uuid": u,
                        "parentUuid": parent,
                        "sessionId": sid,
                        "timestamp": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
                        "isSidechain": False,
                        # an envelope long enough that the first batch trains the metadata dictionary on SQLite
                        # (revision 0013), inside the import's transaction like everything else it writes
                        "cwd": "/home/someone/projects/fault-points",
                        "version": "2.1.0",
                        "gitBranch": f"feature/line-{i}",
                        "message": {"role": role, "content": f"line {i} of {sid}"},
                    }
                )
            )
            parent = u
        path = folder / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        counts[str(path.resolve())] = n
    return counts


def run_import(store: SessionStore, folder: str) -> None:
    import_paths(store, [folder])


def child_url(url: str, name: str) -> str:
    """The URL a forked child uses: on PostgreSQL tagged with an application_name to wait for."""
    if not url.startswith("postgresql"):
        return url
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def child_name() -> str:
    return f"fault{os.getpid()}x{os.urandom(3).hex()}"
