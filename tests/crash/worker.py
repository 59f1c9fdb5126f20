"""The child of the crash harness: loops over random writes until it is killed.

`python -m tests.crash.worker URL SESSION LOG SEED`. After each operation
commits, one line goes to LOG (flushed): what the parent may then require.
"""

from __future__ import annotations

import random
import sys
import uuid

from sessionstore.compaction.engine import compact
from sessionstore.compaction.full import NothingToCompact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore import RewriteConflict, SessionStore
from sessionstore.interchange.importing import import_file
from sessionstore.storage.memory import save_memory


def _round(rng: random.Random, tag: str, big: bool = False) -> list[dict]:
    """A complete API round: request, tool call, result (over the spill cap when `big`), answer."""
    tid = f"t-{uuid.uuid4().hex[:12]}"
    size = rng.randint(60_000, 120_000) if big else rng.randint(10, 3000)
    return [
        {"role": "user", "content": f"{tag}: please check module {rng.randint(0, 99)}", "uuid": str(uuid.uuid4())},
        {"role": "assistant", "uuid": str(uuid.uuid4()), "api_message_id": f"m-{tid}",
         "content": [{"type": "tool_use", "id": tid, "name": rng.choice(["Read", "Bash"]),
                      "input": {"file_path": f"src/m{rng.randint(0, 9)}.py"}}]},
        {"role": "user", "uuid": str(uuid.uuid4()),
         "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"{tid} " + "x" * size}]},
        {"role": "assistant", "uuid": str(uuid.uuid4()), "content": f"checked ({tag})"},
    ]


def _finish_pending(session, log) -> None:
    """After a kill mid-round, answer what is still pending so the conversation goes on."""
    tail = session.refresh_state().tail
    if tail.pending:
        msg = {"role": "user", "uuid": str(uuid.uuid4()),
               "content": [{"type": "tool_result", "tool_use_id": i, "content": "recovered"} for i in tail.pending]}
        session.append(msg)
        log(f"msg {msg['uuid']}")
    if session.refresh_state().tail.last_role == "user":
        msg = {"role": "assistant", "uuid": str(uuid.uuid4()), "content": "resumed"}
        session.append(msg)
        log(f"msg {msg['uuid']}")


def main() -> None:
    url, session_id, log_path, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    with open(log_path, "a", encoding="utf-8") as log_file, SessionStore.open(url) as store:
        def log(line: str) -> None:
            log_file.write(line + "\n")
            log_file.flush()

        session = store.get(session_id)
        _finish_pending(session, log)
        step = 0
        while True:
            step += 1
            op = rng.choice(["append", "append", "append_many", "append_many", "full", "from", "up_to", "memory",
                             "prepare", "import"])
            msgs = _round(rng, f"s{seed}-{step}", big=op == "prepare")
            if op == "prepare":
                session.append_many(msgs)
                for m in msgs:
                    log(f"msg {m['uuid']}")
                Pipeline(store).prepare(session)
                log(f"prepared {msgs[2]['content'][0]['tool_use_id']}")
            elif op == "import":
                _import(store, rng, log)
            elif op == "append":
                for m in msgs:
                    session.append(m)
                    log(f"msg {m['uuid']}")
            elif op == "append_many":
                session.append_many(msgs)
                for m in msgs:
                    log(f"msg {m['uuid']}")
            else:
                _compact(session, op, rng, log)


def _import(store, rng: random.Random, log) -> None:
    """Import a small Claude Code transcript (a fresh file each time) as its own session."""
    import json
    import os
    import tempfile

    sid = str(uuid.uuid4())
    lines = []
    parent = None
    for i in range(rng.randint(2, 40)):
        u = str(uuid.uuid4())
        role = "user" if i % 2 == 0 else "assistant"
        lines.append(json.dumps({"type": role, "uuid": u, "parentUuid": parent, "sessionId": sid,
                                 "timestamp": f"2026-01-01T00:00:{i % 60:02d}Z", "isSidechain": False,
                                 "message": {"role": role, "content": f"line {i} of {sid}"}}))
        parent = u
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=os.environ.get("CRASH_TMP"))
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    result = import_file(store, path)
    log(f"import {result.session_id} {len(lines)}")


def _compact(session, op: str, rng: random.Random, log) -> None:
    entries = session.active_entries()
    prompts = [e for e in entries if e.role == "user" and isinstance(e.content, str)
               and not e.message.is_compact_summary]
    kwargs: dict = {}
    if op in ("from", "up_to"):
        if len(prompts) < 2:
            return
        pivot = rng.choice(prompts).uuid
        kwargs = {"from_uuid": pivot} if op == "from" else {"up_to_uuid": pivot}
    elif op == "memory":
        if len(entries) < 8:
            return
        last = entries[-6]
        save_memory(session, f"# Current State\nworking, seed step {rng.random()}\n",
                    covers_seq=last.seq, covers_uuid=last.uuid, tokens=0, tool_calls=0)
        kwargs = {"use_memory": True}
    try:
        outcome = compact(session, **kwargs)
    except (NothingToCompact, RewriteConflict):
        return
    log(f"boundary {outcome.boundary_uuid}")


if __name__ == "__main__":
    main()
