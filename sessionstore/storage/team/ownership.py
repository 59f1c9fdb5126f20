"""Who owns a session, who it is shared with, and which roles may use the store.

The database enforces all of it (PostgreSQL row-level security, revision 0009): these functions
only ask it. A session a role may not see is reported exactly like one that does not exist.
SQLite has one implicit owner, 'local', and nothing to share or grant.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import NotPermitted, ReadOnlySession, SessionNotFound, SessionStoreError

if TYPE_CHECKING:
    from ..engine.db import Database
    from ..store import SessionStore

#: A PostgreSQL role name as `db grant` and `share --with` accept it (no quoting games).
_ROLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.-]{0,62}$")


class OwnershipError(SessionStoreError, ValueError):
    """A share or grant that cannot be made (SQLite, a bad role name, not the owner)."""


@dataclass(frozen=True, slots=True)
class Share:
    """One session shared with one role."""

    session: str
    grantee: str
    read_only: bool

    def to_dict(self) -> dict[str, Any]:
        """The `shares --json` shape."""
        return asdict(self)


def current_owner(db: "Database") -> str:
    """The owner new sessions get: the connected role on PostgreSQL, 'local' on SQLite.

    The schema's models are imported here, not at the top: search and usage import this module for
    `writable_clause`, and the models (with SQLAlchemy's ORM and PostgreSQL dialect) cost a read command 50 ms.
    """
    from ..engine.models import LOCAL_OWNER

    if db.is_sqlite:
        return LOCAL_OWNER
    return str(db.one("SELECT current_user")[0])


def writable_clause(db: "Database", alias: str) -> str:
    """SQL true for the sessions (as `alias`) this role may write: its own and those shared writable with it.

    Only a filter that spares a write the database would refuse; the database still decides.
    """
    if db.is_sqlite:
        return "1 = 1"
    return (
        f"({alias}.owner = current_user OR EXISTS (SELECT 1 FROM session_shares h WHERE h.session_id = "
        f"{alias}.id AND h.owner = {alias}.owner AND h.grantee = current_user AND NOT h.read_only))"
    )


def check_role(role: str) -> str:
    """`role` if it is a plain PostgreSQL role name, else OwnershipError."""
    if not role:
        raise OwnershipError("name the role: --with ROLE")
    if not _ROLE.match(role):
        raise OwnershipError(f"{role!r} is not a role name (letters, digits, _ $ . -, at most 63)")
    return role


def _postgres_only(db: "Database", what: str) -> None:
    if db.is_sqlite:
        raise OwnershipError(f"{what} needs PostgreSQL: a SQLite store has one implicit owner")


def share(store: "SessionStore", session_id: str, role: str, *, read_only: bool = False) -> Share:
    """Share one of this role's sessions with `role` (again: changes read_only); SessionNotFound if not its own."""
    db = store.db
    _postgres_only(db, "share")
    check_role(role)
    sid = store.get(session_id).id

    def write(d: "Database") -> None:
        if d.one("SELECT 1 FROM sessions WHERE id = :id AND owner = current_user", {"id": sid}) is None:
            raise SessionNotFound(f"no session {session_id!r} of yours")
        d.execute(
            "INSERT INTO session_shares (session_id, grantee, read_only, created_at) "
            "VALUES (:id, :role, :ro, :now) ON CONFLICT (session_id, grantee) DO UPDATE SET "
            "read_only = excluded.read_only",
            {"id": sid, "role": role, "ro": read_only, "now": time.time()},
        ).close()

    db.run_write(write, point="share")
    return Share(sid, role, read_only)


def unshare(store: "SessionStore", session_id: str, role: str) -> bool:
    """Stop sharing a session with `role`; False when it was not shared with it."""
    db = store.db
    _postgres_only(db, "unshare")
    check_role(role)
    sid = store.get(session_id).id

    def write(d: "Database") -> int:
        cur = d.execute(
            "DELETE FROM session_shares WHERE session_id = :id AND grantee = :role AND owner = current_user",
            {"id": sid, "role": role},
        )
        count = cur.rowcount
        cur.close()
        return int(count)

    return db.run_write(write, point="unshare") > 0


def shares(store: "SessionStore", session_id: str | None = None) -> list[Share]:
    """The shares this role made or received (of one session, when given)."""
    if store.db.is_sqlite:
        return []
    where, params = "", {}
    if session_id is not None:
        where, params = " WHERE session_id = :id", {"id": store.get(session_id).id}
    rows = store.db.all(
        f"SELECT session_id, grantee, read_only FROM session_shares{where} ORDER BY session_id, grantee", params
    )
    return [Share(r[0], r[1], bool(r[2])) for r in rows]


#: What `db grant` gives a role: using the store, never changing its schema. Rows in and out (row-level
#: security scopes them), but no UPDATE of the record (messages, compactions, blobs, source lines,
#: forks) and of a replacement only its text; of import_locks (revision 0023) rows in and locked (UPDATE
#: of `owner` alone, which SELECT ... FOR UPDATE needs and the policy keeps as it is), never deleted; USAGE
#: on the sequences (nextval), never UPDATE (setval) or SELECT (last_value); EXECUTE on the store's
#: functions (revision 0019 revoked it from PUBLIC).
_GRANTS = (
    "GRANT USAGE ON SCHEMA {schema} TO {role}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
    "REVOKE INSERT, UPDATE, DELETE ON {schema}.alembic_version FROM {role}",
    "REVOKE UPDATE ON {schema}.messages, {schema}.compactions, {schema}.blobs, {schema}.source_lines, "
    "{schema}.session_forks, {schema}.replacements FROM {role}",
    "GRANT UPDATE (kind, replacement) ON {schema}.replacements TO {role}",
    "REVOKE UPDATE, DELETE ON {schema}.import_locks FROM {role}",
    "GRANT UPDATE (owner) ON {schema}.import_locks TO {role}",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
    "GRANT EXECUTE ON FUNCTION {functions} TO {role}",
)
_REVOKES = (
    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM {role}",
    "REVOKE EXECUTE ON FUNCTION {functions} FROM {role}",
    "REVOKE USAGE ON SCHEMA {schema} FROM {role}",
)
#: The store's functions in its schema, as `schema.name(argument types)`.
_FUNCTIONS = (
    "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace "
    "AND p.proname LIKE 'sessionstore%' ORDER BY 1"
)
#: Whether this role may grant the store: it owns the tables (is the owner role or a member of it) or is a superuser.
_MAY_GRANT = (
    "SELECT pg_has_role(current_user, c.relowner, 'USAGE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = "
    "current_user) FROM pg_class c WHERE c.oid = 'sessions'::regclass"
)


def grant(store: "SessionStore", role: str) -> str:
    """Let `role` use this store: rows in, rows out (DML only; row-level security scopes them). Returns the schema."""
    return _run_grants(store, role, _GRANTS, "grant")


def revoke(store: "SessionStore", role: str) -> str:
    """Take `role`'s access to this store away (its sessions stay, owned by it). Returns the schema."""
    return _run_grants(store, role, _REVOKES, "revoke")


def _run_grants(store: "SessionStore", role: str, statements: tuple[str, ...], point: str) -> str:
    """Run the grant or revoke statements, then check they took effect (PostgreSQL only warns when they did not)."""
    db = store.db
    _postgres_only(db, "db grant / db revoke")
    check_role(role)
    if db.one("SELECT 1 FROM pg_roles WHERE rolname = :r", {"r": role}) is None:
        raise OwnershipError(f'there is no role {role!r}: create it first (CREATE ROLE "{role}" LOGIN)')
    schema = str(db.one("SELECT current_schema()")[0])
    if not db.one(_MAY_GRANT)[0]:
        raise _refused(db, point)
    functions = ", ".join(str(r[0]) for r in db.all(_FUNCTIONS))
    quoted = {"schema": _quote(schema), "role": _quote(role), "functions": functions}

    def write(d: "Database") -> None:
        for statement in statements:
            if "{functions}" in statement and not functions:
                continue
            d.execute(statement.format(**quoted)).close()
        if _has_access(d, role, schema) != (point == "grant"):
            raise _refused(d, point)

    try:
        db.run_write(write, point=point)
    except ReadOnlySession:
        raise _refused(db, point) from None
    return schema


def _has_access(db: "Database", role: str, schema: str) -> bool:
    """Whether `role` may now read and add sessions in `schema`."""
    row = db.one(
        "SELECT has_schema_privilege(:r, :s, 'USAGE') AND has_table_privilege(:r, :t, 'SELECT') "
        "AND has_table_privilege(:r, :t, 'INSERT')",
        {"r": role, "s": schema, "t": f"{_quote(schema)}.sessions"},
    )
    return bool(row[0])


def _refused(db: "Database", point: str) -> NotPermitted:
    """The one-line refusal of a grant or revoke by a role that does not own the store's tables."""
    owner = db.one("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'sessions'::regclass")[0]
    return NotPermitted(
        f"only the role that owns the store's tables ({owner}, the one that ran `db upgrade`) may {point} "
        f"access: run `sessionstore db {point}` connected as {owner}"
    )


def _quote(name: str) -> str:
    """A PostgreSQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'
