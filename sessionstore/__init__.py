"""sessionstore: a durable session store and context-compaction pipeline for LLM agents.

from sessionstore import SessionStore
store = SessionStore.open()                 # SQLite under the XDG data dir
session = store.create_session(title="fix the tests", model="claude-sonnet-4-6")
session.append({"role": "user", "content": "The tests fail, can you look?"})
client.messages.create(model=..., max_tokens=..., messages=session.active_view())

The public names load on first use (PEP 562): `import sessionstore`, or a light module of it such as
`sessionstore.sanitize`, imports neither SQLAlchemy nor the storage core, so the CLI's `--help` starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .storage.core.errors import (
        AmbiguousSession,
        ConfigError,
        DatabaseUnavailable,
        DuplicateUuid,
        InvalidContent,
        InvalidMessage,
        InvalidRole,
        MessageNotFound,
        MigrationError,
        OrphanToolResult,
        PendingToolUse,
        ReadOnlySession,
        ReadOnlyStore,
        RewriteConflict,
        SessionNotFound,
        SessionStoreError,
        StoreBusy,
        UnknownBlockType,
    )
    from .storage.core.types import StoredMessage, ViewEntry
    from .storage.derived.search import Hit, SearchIndexError, SearchQueryError
    from .storage.engine.config import Config
    from .storage.store import SessionStore
    from .storage.write.fork import ForkPoint, InvalidForkPoint, Lineage
    from .storage.write.session import Session

_ERRORS = ".storage.core.errors"

#: Each public name -> the module (relative to this package) that defines it.
_HOMES: dict[str, str] = {
    "AmbiguousSession": _ERRORS,
    "Config": ".storage.engine.config",
    "ConfigError": _ERRORS,
    "DatabaseUnavailable": _ERRORS,
    "DuplicateUuid": _ERRORS,
    "ForkPoint": ".storage.write.fork",
    "Hit": ".storage.derived.search",
    "InvalidContent": _ERRORS,
    "InvalidForkPoint": ".storage.write.fork",
    "InvalidMessage": _ERRORS,
    "InvalidRole": _ERRORS,
    "Lineage": ".storage.write.fork",
    "MessageNotFound": _ERRORS,
    "MigrationError": _ERRORS,
    "OrphanToolResult": _ERRORS,
    "PendingToolUse": _ERRORS,
    "ReadOnlyStore": _ERRORS,
    "ReadOnlySession": _ERRORS,
    "RewriteConflict": _ERRORS,
    "SearchIndexError": ".storage.derived.search",
    "SearchQueryError": ".storage.derived.search",
    "Session": ".storage.write.session",
    "SessionNotFound": _ERRORS,
    "SessionStore": ".storage.store",
    "SessionStoreError": _ERRORS,
    "StoreBusy": _ERRORS,
    "StoredMessage": ".storage.core.types",
    "UnknownBlockType": _ERRORS,
    "ViewEntry": ".storage.core.types",
}

__all__ = [
    "AmbiguousSession",
    "Config",
    "ConfigError",
    "DatabaseUnavailable",
    "DuplicateUuid",
    "ForkPoint",
    "Hit",
    "InvalidContent",
    "InvalidForkPoint",
    "InvalidMessage",
    "InvalidRole",
    "Lineage",
    "MessageNotFound",
    "MigrationError",
    "OrphanToolResult",
    "PendingToolUse",
    "ReadOnlyStore",
    "ReadOnlySession",
    "RewriteConflict",
    "SearchIndexError",
    "SearchQueryError",
    "Session",
    "SessionNotFound",
    "SessionStore",
    "SessionStoreError",
    "StoreBusy",
    "StoredMessage",
    "UnknownBlockType",
    "ViewEntry",
]
__version__ = "0.1.0"

if not TYPE_CHECKING:  # hidden from mypy, which would type every unknown name `Any` through it

    def __getattr__(name: str) -> Any:
        """A public name, imported from its module on first use and kept (PEP 562)."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, __name__), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The module's names with the public ones not yet loaded (PEP 562)."""
    return sorted({*globals(), *__all__})
