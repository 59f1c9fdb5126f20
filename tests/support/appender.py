"""A child process that appends N single messages to one session.

    python -m tests.support.appender URL SID TAG N [STEP WRITERS]

It opens the store, prints "ready", and waits for a line on stdin before the first
append, so a test can start several writers at the same moment (a start barrier).
With STEP, after every STEP appends it waits until all WRITERS have appended as many
(the session holds STEP x round x WRITERS messages): the writers then run side by side
from start to end, whatever the scheduler does, instead of one finishing its few
milliseconds of work before the other is scheduled.
"""

from __future__ import annotations

import sys
import time

from sessionstore import SessionStore

CHECKPOINT_TIMEOUT_S = 60.0


def main() -> None:
    url, session_id, tag, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    step, writers = (int(sys.argv[5]), int(sys.argv[6])) if len(sys.argv) > 6 else (0, 1)
    with SessionStore.open(url) as store:
        session = store.get(session_id)
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(count):
            session.append({"role": "user", "content": f"{tag}:{i}"})
            if step and (i + 1) % step == 0 and i + 1 < count:
                _wait_for_peers(store, session_id, (i + 1) * writers)
    print("done", flush=True)


def _wait_for_peers(store: SessionStore, session_id: str, total: int) -> None:
    """Wait until the session holds `total` messages: every writer has reached this checkpoint."""
    deadline = time.monotonic() + CHECKPOINT_TIMEOUT_S
    while True:
        row = store.db.one("SELECT COUNT(*) FROM messages WHERE session_id = :id", {"id": session_id})
        if int(row[0]) >= total:
            return
        if time.monotonic() > deadline:
            sys.exit(f"checkpoint: the other writers never reached {total} messages")
        time.sleep(0.001)


if __name__ == "__main__":
    main()
