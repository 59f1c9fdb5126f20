"""The child of the crash harness: loops over random writes until it is killed.

`python -m tests.crash.worker SESSION LOG` imports everything once, then for each
line `SEED URL` on stdin forks one writer (which prints `ready PID` once it has
opened the store) and prints `ended STATUS` when that writer is gone, so a kill
costs no interpreter start-up. Before each operation one
line goes to LOG (flushed): `before OP VERSION LAST_SEQ DIGEST UUIDS`, the view
it starts from and the uuids of the batch it writes; after the operation
commits, one line per message (`msg UUID SHA`) or result: what the parent may
then require.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import uuid

from sessionstore.compaction.engine import compact
from sessionstore.compaction.full import NothingToCompact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore import RewriteConflict, SessionStore
from sessionstore.interchange.importing import import_file
from sessionstore.storage.write.memory import save_memory


def _round(rng: random.Random, tag: str, big: bool = False) -> list[dict]:
    """A complete API round: request, tool call, result (over the spill cap when `big`), answer."""
    tid = f"t-{uuid.uuid4().hex[:12]}"
    size = rng.randint(60_000, 120_000) if big else rng.randint(10, 3000)
    return [
        {"role": "user", "content": f"{tag}: please check module {rng.randint(0, 99)}", "uuid": str(uuid.uuid4())},
        {
            "role": "assistant",
            "uuid": str(uuid.uuid4()),
            "api_message_id": f"m-{tid}",
            "content": [
                {
                    "type": "tool_use",
                    "id": tid,
                    "name": rng.choice(["Read", "Bash"]),
                    "input": {"file_path": f"src/m{rng.randint(0, 9)}.py"},
                }
            ],
        },
        {
            "role": "user",
            "uuid": str(uuid.uuid4()),
            "content": [{"type": "tool_result", "tool_use_id": tid, "content": f"{tid} " + "x" * size}],
        },
        {"role": "assistant", "uuid": str(uuid.uuid4()), "content": f"checked ({tag})"},
    ]


def view_digest(entries) -> str:
    """A digest of a view's entries: which message each shows, and what content."""
    data = json.dumps([(e.seq, e.content) for e in entries], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def content_digest(content) -> str:
    """A digest of one stored message's content (the parent recomputes it from the row)."""
    data = json.dumps(content, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _before(session, log, op: str, batch: list[dict]) -> None:
    """Record the view the operation starts from and the batch it will write."""
    entries = session.active_entries()
    state = session.refresh_state()
    uuids = ",".join(m["uuid"] for m in batch) or "-"
    log(f"before {op} {state.view_version} {state.last_seq} {view_digest(entries)} {uuids}")


def _append(session, log, op: str, msgs: list[dict]) -> list:
    """One append_many (one transaction), logged before and after."""
    _before(session, log, op, msgs)
    stored = session.append_many(msgs)
    for m in stored:
        log(f"msg {m.uuid} {content_digest(m.content)}")
    return stored


def _finish_pending(session, log) -> None:
    """After a kill mid-round, answer what is still pending so the conversation goes on."""
    tail = session.refresh_state().tail
    if tail.pending:
        msg = {
            "role": "user",
            "uuid": str(uuid.uuid4()),
            "content": [{"type": "tool_result", "tool_use_id": i, "content": "recovered"} for i in tail.pending],
        }
        _append(session, log, "append", [msg])
    if session.refresh_state().tail.last_role == "user":
        msg = {"role": "assistant", "uuid": str(uuid.uuid4()), "content": "resumed"}
        _append(session, log, "append", [msg])


def main() -> None:
    session_id, log_path = sys.argv[1], sys.argv[2]
    for line in sys.stdin:
        seed, url = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                write_until_killed(url, session_id, log_path, int(seed))
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        print(f"ended {status}", flush=True)


def write_until_killed(url: str, session_id: str, log_path: str, seed: int) -> None:
    """One writer: open the store, say so, then loop over random operations until killed."""
    rng = random.Random(seed)
    with open(log_path, "a", encoding="utf-8") as log_file, SessionStore.open(url) as store:

        def log(line: str) -> None:
            log_file.write(line + "\n")
            log_file.flush()

        session = store.get(session_id)
        log(f"start {seed}")
        print(f"ready {os.getpid()}", flush=True)
        _finish_pending(session, log)
        step = 0
        while True:
            step += 1
            op = rng.choice(
                [
                    "append",
                    "append",
                    "append_many",
                    "append_many",
                    "full",
                    "from",
                    "up_to",
                    "memory",
                    "prepare",
                    "import",
                ]
            )
            msgs = _round(rng, f"s{seed}-{step}", big=op == "prepare")
            if op == "prepare":
                stored = _append(session, log, "append_many", msgs)
                _before(session, log, "prepare", [])
                Pipeline(store).prepare(session)
                log(f"prepared {msgs[2]['content'][0]['tool_use_id']} {stored[2].seq}")
            elif op == "import":
                _before(session, log, "import", [])
                _import(store, rng, log)
            elif op == "append":
                for m in msgs:
                    _append(session, log, "append", [m])
            elif op == "append_many":
                _append(session, log, "append_many", msgs)
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
        lines.append(
            json.dumps(
                {
                    "type": role,
                    "uuid": u,
                    "parentUuid": parent,
                    "sessionId": sid,
                    "timestamp": f"2026-01-01T00:00:{i % 60:02d}Z",
                    "isSidechain": False,
                    "message": {"role": role, "content": f"line {i} of {sid}"},
                }
            )
        )
        parent = u
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=os.environ.get("CRASH_TMP"))
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    result = import_file(store, path)
    log(f"import {result.session_id} {len(lines)}")


def _compact(session, op: str, rng: random.Random, log) -> None:
    entries = session.active_entries()
    prompts = [
        e for e in entries if e.role == "user" and isinstance(e.content, str) and not e.message.is_compact_summary
    ]
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
        save_memory(
            session,
            f"# Current State\nworking, seed step {rng.random()}\n",
            covers_seq=last.seq,
            covers_uuid=last.uuid,
            tokens=0,
            tool_calls=0,
        )
        kwargs = {"use_memory": True}
    _before(session, log, op, [])
    try:
        outcome = compact(session, **kwargs)
    except (NothingToCompact, RewriteConflict):
        return
    log(f"boundary {outcome.boundary_uuid}")


if __name__ == "__main__":
    main()
