"""A child process that appends N single messages to one session: `python -m tests.support.appender URL SID TAG N`.

It opens the store, prints "ready", and waits for a line on stdin before the first
append, so a test can start several writers at the same moment (a start barrier).
"""

from __future__ import annotations

import sys

from sessionstore import SessionStore


def main() -> None:
    url, session_id, tag, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with SessionStore.open(url) as store:
        session = store.get(session_id)
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(count):
            session.append({"role": "user", "content": f"{tag}:{i}"})
    print("done", flush=True)


if __name__ == "__main__":
    main()
