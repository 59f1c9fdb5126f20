"""Ctrl-C for a child process under test: delivered as a terminal would, with its stacks when it does not stop.

Full runs saw `watch` children ignore SIGINT for 30-60 s at the end of a pytest-xdist worker's run,
never alone: they sat in watchfiles' wait, the interrupt never raised. A child inherits its
parent's ignored and blocked signals, and after hundreds of tests (Textual apps, asyncio loops,
native libraries) the worker's own disposition is not a terminal's. Children started with
`TERMINAL_SIGINT` get SIGINT as a person's shell gives it (default action, unblocked), so
Python installs its KeyboardInterrupt handler. When the interrupt is still not obeyed, SIGABRT
makes a child started with `FAULTHANDLER_ENV` print every thread's stack, and the failure shows
them with the child's signal masks.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

#: Add to a child's environment so that SIGABRT prints its threads' stacks (the standard faulthandler).
FAULTHANDLER_ENV = {"PYTHONFAULTHANDLER": "1"}


def _terminal_sigint() -> None:
    """In the child, before exec: SIGINT handled by default and not blocked, as in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


#: Popen keyword arguments for a child that is to be stopped with Ctrl-C.
TERMINAL_SIGINT: dict[str, Any] = {"preexec_fn": _terminal_sigint}


def _masks(process: str) -> str:
    """The signal masks /proc shows for a process (a pid, or "self")."""
    try:
        status = Path(f"/proc/{process}/status").read_text()
    except OSError:
        return "(no /proc status)"
    return " ".join(line for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn", "SigPnd")))


def interrupt(proc: "subprocess.Popen[str]", timeout: float) -> tuple[str, str]:
    """Send SIGINT and wait; (stdout, stderr). Fails, with the child's stacks, when it does not stop."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        masks = f"child: {_masks(str(proc.pid))}; test process: {_masks('self')}"
        proc.send_signal(signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        pytest.fail(
            f"the process did not stop {timeout:g} s after SIGINT ({masks}); its stacks on SIGABRT:\n{err[-6000:]}"
        )
