"""Typed exceptions: every failure a caller can act on has its own class."""

from __future__ import annotations


class SessionStoreError(Exception):
    """Base class for every error sessionstore raises on purpose."""


class SessionNotFound(SessionStoreError, LookupError):
    """No session with that id (or unique id prefix)."""


class AmbiguousSession(SessionNotFound):
    """A session reference names more than one session (a source id of one, a prefix of another's id)."""

    def __init__(self, message: str, reference: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.reference = reference
        self.candidates = candidates


class MessageNotFound(SessionStoreError, LookupError):
    """No message with that uuid in the session."""


class InvalidMessage(SessionStoreError, ValueError):
    """A message was rejected at the door; nothing was written."""


class InvalidRole(InvalidMessage):
    """The role is not user, assistant or system."""


class InvalidContent(InvalidMessage):
    """Content is neither a string nor a list of blocks, or a block is malformed."""


class UnknownBlockType(InvalidContent):
    """A content block has no `type` or one the Messages API does not know."""


class OrphanToolResult(InvalidMessage):
    """A tool_result answers no tool_use of the preceding assistant turn."""


class PendingToolUse(InvalidMessage):
    """A new assistant turn while the previous turn's tool_use ids await results."""


class DuplicateUuid(InvalidMessage):
    """A message with this uuid is already in the session."""


class RewriteConflict(SessionStoreError):
    """Another rewrite changed the view after this one took its snapshot."""


class StoreBusy(SessionStoreError):
    """The database stayed locked past the bounded retries."""


class ReadOnlyStore(SessionStoreError):
    """A write was asked of a store opened read-only (the MCP server's, for one)."""


class MigrationError(SessionStoreError):
    """The schema could not be brought to the current revision."""


class SchemaOutdated(MigrationError):
    """A read-only open found the database at an older schema revision; only a writer or `db upgrade` upgrades."""


class DatabaseUnavailable(SessionStoreError):
    """The database could not be opened: server down or unreachable, login refused, not a database file."""


class AccessDenied(DatabaseUnavailable):
    """The database answered, but this role may not use the store there (never granted, or revoked)."""


class NotPermitted(SessionStoreError, PermissionError):
    """This role may not do that to the store (grant or revoke access without owning its tables)."""


class ConfigError(SessionStoreError, ValueError):
    """A configuration value (a `SESSIONSTORE_<FIELD>` variable) that cannot be used."""


class ReadOnlySession(SessionStoreError, PermissionError):
    """The session is visible to this role but not writable by it (shared read-only, or the database refused)."""
