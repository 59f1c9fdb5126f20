"""Ctrl-C for a child process under test, with its threads' stacks when it does not stop.

A `watch` that ignored SIGINT was seen once in a full run on a loaded machine and never again;
a timeout alone says nothing of where it was. Children started with `FAULTHANDLER_ENV` dump every
thread's Python stack on SIGABRT, which this sends when the interrupt is not obeyed in time.
"""

from __future__ import annotations

import signal
import subprocess

import pytest

#: Add to a child's environment so that SIGABRT prints its threads' stacks (the standard faulthandler).
FAULTHANDLER_ENV = {"PYTHONFAULTHANDLER": "1"}


def interrupt(proc: "subprocess.Popen[str]", timeout: float) -> tuple[str, str]:
    """Send SIGINT and wait; (stdout, stderr). Fails, with the child's stacks, when it does not stop."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        pytest.fail(f"the process did not stop {timeout:g} s after SIGINT; its stacks on SIGABRT:\n{err[-6000:]}")
