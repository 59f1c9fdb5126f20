"""What an export tells its user about credentials: how many were redacted, or that some were left in.

Its own module because both ways out of the store say it: `export` (compactcmd) and
`export --install` (forkcmd).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import echo

if TYPE_CHECKING:
    from sessionstore.secrets import Redactor


def say_secrets(redactor: Redactor, session_id: str) -> None:
    """One stderr line: how many secrets were redacted, or that some were left in a shareable export."""
    if redactor.redact:
        echo(f"redacted {redactor.found} secret(s)", err=True)
    elif redactor.found:
        echo(
            f"hint: this export holds {redactor.found} secret(s) (keys, tokens, passwords); before sharing "
            f"it, export again with --redact (`sessionstore secrets {session_id}` lists them)",
            err=True,
        )
