"""Id resolution: what a person types -> one session id, or one message of a session.

Messages (`resolve_message`, the one resolver `show`, `fork --at`, `compact --from/--up-to`,
`pin`, `unpin` and `recall --around` share): a seq, a uuid, or a unique start of a uuid.

Sessions:

Accepted, in this order: a session id; the id the source tool knows for an
imported session (the Claude Code session id `claude --resume` takes, the
Codex session id); a unique prefix of either, of any length. A source id that
is also a prefix of another session's id or source id is ambiguous
(`AmbiguousSession`, naming both): an imported file picks its own source id. A sub-agent's
source id (`<session>/agent-<id>`) is matched by a prefix only when the
prefix reaches into it (holds the `/`), so a Claude Code id prefix names the
main session, not its sub-agents. Prefixes are matched literally: `%`, `_`
and `\\` are escaped, and the comparison is case-sensitive on both engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.errors import AmbiguousSession, MessageNotFound, SessionNotFound

if TYPE_CHECKING:
    from .db import Database
    from ..write.session import Session

#: Longer than any id a session or a source can have (imports.source_key holds up to 500 characters).
MAX_REFERENCE_LENGTH = 500

#: How many candidates a prefix lookup fetches: two are enough to call it ambiguous.
_PROBE = 3


def escape_like(text: str) -> str:
    """`text` as a literal LIKE pattern fragment (escape character: backslash)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def resolve_session_id(db: "Database", reference: str) -> str:
    """The id of the one session `reference` names; SessionNotFound when none or several do."""
    _check(reference)
    exact = db.one("SELECT id FROM sessions WHERE id = :r", {"r": reference})
    if exact is not None:
        return str(exact[0])
    by_source = {str(r[0]) for r in db.all("SELECT session_id FROM imports WHERE source_key = :r", {"r": reference})}
    if len(by_source) > 1:
        raise AmbiguousSession(
            f"source id {reference!r} names {len(by_source)} imported sessions; use a session id",
            reference,
            tuple(sorted(by_source)),
        )
    found = _prefix_matches(db, reference)
    if len(by_source) == 1:
        return _source_unless_shadowing(reference, by_source.pop(), found)
    if len(found) > 1:
        raise AmbiguousSession(
            f"session id prefix {reference!r} is ambiguous (it starts {len(found)} or more "
            "session or source ids); type more of it",
            reference,
            tuple(sorted(found)),
        )
    if not found:
        raise SessionNotFound(f"no session {reference!r} (by id, source id, or a prefix of either)")
    return found.pop()


def _source_unless_shadowing(reference: str, source_session: str, prefixed: set[str]) -> str:
    """The session whose source id `reference` is, unless it also starts another session's id.

    An imported file chooses its own source id: one equal to the prefix `sessions` shows for
    another session would otherwise silently take that session's place.
    """
    others = sorted(prefixed - {source_session})
    if not others:
        return source_session
    raise AmbiguousSession(
        f"session reference {reference!r} is ambiguous: it is the source id of session "
        f"{source_session} and starts the id of session {others[0]}; use a full session id",
        reference,
        (source_session, *others),
    )


def _check(reference: str) -> None:
    """Refuse what can name no session before it reaches the database."""
    if not isinstance(reference, str) or not reference:
        raise SessionNotFound("no session id given")
    if len(reference) > MAX_REFERENCE_LENGTH:
        raise SessionNotFound(
            f"no session: the id given is {len(reference):,} characters long; "
            f"no session or source id is longer than {MAX_REFERENCE_LENGTH}"
        )
    if "\x00" in reference:
        raise SessionNotFound("no session: the id given contains a NUL character")


def _prefix_matches(db: "Database", prefix: str) -> set[str]:
    """Distinct session ids whose id or (non-sub-agent) source id starts with `prefix`, at most a few."""
    pattern = escape_like(prefix) + "%"
    params = {"p": pattern, "n": len(prefix), "raw": prefix, "slash": escape_like(prefix) + "%/%", "k": _PROBE}
    found = {
        str(r[0])
        for r in db.all(
            "SELECT id FROM sessions WHERE id LIKE :p ESCAPE '\\' AND substr(id, 1, :n) = :raw LIMIT :k", params
        )
    }
    sub_agents = "" if "/" in prefix else " AND source_key NOT LIKE :slash ESCAPE '\\'"
    found |= {
        str(r[0])
        for r in db.all(
            "SELECT DISTINCT session_id FROM imports WHERE source_key LIKE :p ESCAPE '\\' "
            f"AND substr(source_key, 1, :n) = :raw{sub_agents} LIMIT :k",
            params,
        )
    }
    return found


class AmbiguousMessage(MessageNotFound):
    """A uuid prefix that starts several messages of the session: it names no one message."""


#: The largest seq a message can have (a signed 64-bit integer).
MAX_SEQ = 2**63 - 1


def resolve_message(session: "Session", given: str | int) -> tuple[int, str]:
    """(seq, uuid) of the one message of `session` that `given` names: a seq, a uuid, or a unique start of a uuid.

    Digits name a seq first; digits that are no seq of the session are tried as the start of a
    uuid. MessageNotFound when nothing matches, AmbiguousMessage when a prefix starts several.
    """
    text = str(given).strip()
    if not text:
        raise MessageNotFound(
            f"no message named: give a seq, a uuid or a unique start of one (see `sessionstore view {session.id}`)"
        )
    if isinstance(given, int) or (text.isascii() and text.isdigit()):
        row = session.db.one(
            "SELECT seq, uuid FROM messages WHERE session_id = :id AND seq = :seq",
            {"id": session.id, "seq": min(int(text), MAX_SEQ)},
        )
        if row is not None:
            return int(row[0]), str(row[1])
    if not isinstance(given, int):
        exact = session.db.one(
            "SELECT seq, uuid FROM messages WHERE session_id = :id AND uuid = :u", {"id": session.id, "u": text}
        )
        if exact is not None:
            return int(exact[0]), str(exact[1])
        rows = session.db.all(
            "SELECT seq, uuid FROM messages WHERE session_id = :id AND uuid LIKE :p ESCAPE '\\' "
            "AND substr(uuid, 1, :n) = :raw ORDER BY seq LIMIT 4",
            {"id": session.id, "p": escape_like(text) + "%", "n": len(text), "raw": text},
        )
        if len(rows) == 1:
            return int(rows[0][0]), str(rows[0][1])
        if rows:
            found = [str(r[1]) for r in rows]
            raise AmbiguousMessage(
                f"{text!r} is ambiguous: it starts {'at least 4' if len(found) > 3 else len(found)} messages of "
                f"session {session.id} ({', '.join(found[:3])}); give more characters"
            )
    raise MessageNotFound(f"no message {text!r} in session {session.id} (give a seq, a uuid, or a unique start of one)")
