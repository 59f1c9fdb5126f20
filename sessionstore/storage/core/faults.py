"""Named fault points: a test makes the process SIGKILL itself at one exact place in a write.

`fault("append.before_commit")` does nothing unless the environment variable
SESSIONSTORE_FAULT names that point when this module is first imported (read
once, so a disabled point costs one global comparison; the append path, the
hottest write, skips even the call: `Database.fault_scope` is empty unless a
point is armed). A test may arm a point in a forked child by setting TARGET
before the child's first write. A write that runs
through `Database.run_write(..., point="rewrite.full")` gets the commit
points `<point>.begin`, `<point>.before_commit` and `<point>.after_commit`;
the statement groups inside it call `fault_in(db, "after_messages")`, which
names `<point>.after_messages`. `POINTS` lists every point a test must reach.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

ENV = "SESSIONSTORE_FAULT"

#: The point this process dies at (None: fault injection is off; writes then skip every check).
TARGET: str | None = os.environ.get(ENV) or None

#: Every rewrite kind with its own points (compaction kinds, then the pipeline layers).
REWRITE_KINDS = (
    "full",
    "partial-from",
    "partial-up_to",
    "session-memory",
    "microcompact",
    "snip",
    "collapse",
    "spill",
    "api-boundary",
    "api-background",
)
#: The statement groups of every rewrite transaction, in order.
REWRITE_GROUPS = (
    "begin",
    "after_locked_state",
    "after_messages",
    "after_view_rows",
    "after_session_row",
    "before_commit",
    "after_commit",
)
#: What a pipeline layer's rewrite writes before the view: spill blobs, then replacement decisions.
LAYER_GROUPS = ("after_blobs", "after_decisions")
LAYER_KINDS = ("microcompact", "snip", "collapse", "spill")
COMPACTION_GROUPS = ("after_compaction_row",)
#: The points every `run_write(..., point=...)` has, whatever its statements.
COMMIT_GROUPS = ("begin", "before_commit", "after_commit")
COMPACTION_KINDS = ("full", "partial-from", "partial-up_to", "session-memory", "api-boundary", "api-background")


def _rewrite_points() -> tuple[str, ...]:
    """`rewrite.<kind>.<group>` for every kind, its groups in the order a transaction reaches them."""
    points = []
    for kind in REWRITE_KINDS:
        groups = list(REWRITE_GROUPS)
        if kind in COMPACTION_KINDS:
            groups[groups.index("before_commit") : groups.index("before_commit")] = COMPACTION_GROUPS
        if kind in LAYER_KINDS:
            groups[1:1] = LAYER_GROUPS
        points += [f"rewrite.{kind}.{g}" for g in groups]
    return tuple(points)


#: Every named point, grouped by write path; a test runs a child to each one on each engine.
POINTS: tuple[str, ...] = (
    "append.begin",
    "append.after_messages",
    "append.before_commit",
    "append.after_commit",
    "append_many.begin",
    "append_many.after_messages",
    "append_many.before_commit",
    "append_many.after_commit",
    *_rewrite_points(),
    "import.begin",
    "import.after_session_row",
    "import.after_dictionary",
    "import.after_blocks",
    "import.after_tail_block",
    "import.mid_file",
    "import.after_lines",
    "import.after_layout",
    "import.after_finish",
    "import.before_commit",
    "import.after_commit",
    *(f"agent_sdk.append.{group}" for group in ("begin", "after_entries", "before_commit", "after_commit")),
    *(
        f"agent_sdk.import.{group}"
        for group in (
            "begin",
            "after_session_row",
            "after_dictionary",
            "after_blocks",
            "after_tail_block",
            "mid_file",
            "after_lines",
            "after_layout",
            "after_finish",
            "after_import",
            "before_commit",
            "after_commit",
        )
    ),
    "doctor.repair.begin",
    "doctor.repair.after_session_row",
    "doctor.repair.before_commit",
    "doctor.repair.after_commit",
    "pin.begin",
    "pin.before_commit",
    "pin.after_commit",
    "unpin.begin",
    "unpin.before_commit",
    "unpin.after_commit",
    *(f"{write}.{group}" for write in ("share", "unshare", "grant", "revoke") for group in COMMIT_GROUPS),
    "fork.begin",
    "fork.after_messages",
    "fork.after_view_rows",
    "fork.before_commit",
    "fork.after_commit",
    "search.index.begin",
    "search.index.after_dictionary",
    "search.index.after_docs",
    "search.index.before_commit",
    "search.index.after_commit",
    *(f"vacuum.{write}.{group}" for write in ("train", "repack") for group in COMMIT_GROUPS),
    "migration.begin",
    "migration.before_commit",
    "migration.after_commit",
)


def fault(point: str) -> None:
    """SIGKILL this process if SESSIONSTORE_FAULT names `point` (a no-op otherwise)."""
    if TARGET is not None and point == TARGET:
        _die(point)


def fault_in(db: Any, group: str) -> None:
    """The point `<the write in flight>.<group>` of the transaction `db` is running."""
    if TARGET is not None and db.fault_scope:
        fault(f"{db.fault_scope}.{group}")


def _die(point: str) -> None:
    """Say where (for the test's log), then die the way a power cut or OOM kill would."""
    sys.stderr.write(f"sessionstore fault point {point}: SIGKILL\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
