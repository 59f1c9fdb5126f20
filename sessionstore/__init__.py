"""sessionstore: a durable session store and context-compaction pipeline for LLM agents.

from sessionstore import SessionStore
store = SessionStore.open()                 # SQLite under the XDG data dir
session = store.create_session(title="fix the tests", model="claude-sonnet-4-6")
session.append({"role": "user", "content": "The tests fail, can you look?"})
client.messages.create(model=..., max_tokens=..., messages=session.active_view())
"""

from .storage.engine.config import Config
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
    ReadOnlyStore,
    ReadOnlySession,
    RewriteConflict,
    SessionNotFound,
    SessionStoreError,
    StoreBusy,
    UnknownBlockType,
)
from .storage.write.fork import ForkPoint, InvalidForkPoint, Lineage
from .storage.derived.search import Hit, SearchIndexError, SearchQueryError
from .storage.write.session import Session
from .storage.store import SessionStore
from .storage.core.types import StoredMessage, ViewEntry

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
