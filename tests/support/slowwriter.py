"""A transcript writer for the watch tests: copies a file's bytes in random chunks, splitting lines, with pauses.

    python -m tests.support.slowwriter SOURCE TARGET SEED [MAX_PAUSE_SECONDS]

Chunks are 1 byte to 3 lines long and end anywhere (mid-line, mid-UTF-8
sequence even); each write is flushed, then the writer sleeps a random time,
as an agent writing its transcript does. TARGET is created when the first
chunk is written.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    source, target, seed = Path(argv[0]), Path(argv[1]), int(argv[2])
    max_pause = float(argv[3]) if len(argv) > 3 else 0.15
    rng = random.Random(seed)
    data = source.read_bytes()
    lines = data.splitlines(keepends=True)
    typical = max(1, len(data) // max(1, len(lines)))
    at = 0
    with open(target, "ab", buffering=0) as out:
        while at < len(data):
            size = rng.randint(1, 3 * typical) if rng.random() < 0.8 else rng.randint(1, 40)
            out.write(data[at : at + size])
            at += size
            time.sleep(rng.uniform(0, max_pause))


if __name__ == "__main__":
    main(sys.argv[1:])
