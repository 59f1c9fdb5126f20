"""`doctor`: check a store against its invariants, and repair the counters derived from its rows.

`check` reads only. It looks at the database as a whole (SQLite's own
integrity and foreign-key checks, or PostgreSQL's catalogue; the schema
present and at the shipped revision) and at every session: a dense
transcript, an active view that is a valid Messages-API request (invariant 3)
and whose counters match its rows, compactions that point at real messages,
spilled blobs that still hash to their key; and the search index against
the transcript (each message up to a session's mark indexed once, with the
text and role it holds).

`repair` recomputes what is derived and can be recomputed without losing
anything (the view's token total, its explicit-row count, the tail state that
validates appends, the last seq) and says exactly what it changed. It never
deletes or rewrites transcript rows; everything else it can only report,
except the search index, derived data that it rebuilds when it disagrees.
Run it while no agent writes to the session: a handle that cached the old
tail state may write it back on its next append.
"""

from __future__ import annotations

import zlib
from functools import partial
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from sqlalchemy import inspect

from ..core.blocktypes import compaction_block, compaction_summary
from ..codecs.blobs import BlobCorrupt, BlobNotFound, get_blob
from ..codecs.fastjson import is_stored_json, loads_stored
from ..core.faults import fault_in
from ..engine.migrate import head_revision
from ..derived.search import UNREADABLE, index_problems, rebuild, reindex_session
from ..records.state import STATE_SQL
from ..engine.models import Base
from ..records.rows import iter_message_rows
from ..core.types import StoredMessage, ViewEntry
from ..records.validate import TailState
from ..records.view import as_blocks, to_api_messages

if TYPE_CHECKING:
    from ..engine.db import Database
    from ..store import SessionStore

#: How many seq gaps, uuids or rows one problem lists before it says "...".
SHOWN = 5


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing found wrong: a short code, what it is, where, and whether `repair` fixes it."""

    code: str
    message: str
    session_id: str | None = None
    repairable: bool = False

    def __str__(self) -> str:
        where = f"session {self.session_id}: " if self.session_id else ""
        fix = " (--repair fixes this)" if self.repairable else ""
        return f"{where}{self.message}{fix}"


@dataclass(slots=True)
class Report:
    """What `check` or `repair` found and did."""

    problems: list[Problem] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    sessions_checked: int = 0
    database_checked: bool = False

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The `doctor --json` document."""
        return {
            "ok": self.ok,
            "database_checked": self.database_checked,
            "sessions_checked": self.sessions_checked,
            "problems": [asdict(p) for p in self.problems],
            "repairs": list(self.repairs),
        }


@dataclass(slots=True)
class _View:
    """The active view as read from its rows, with the sums its counters must match."""

    entries: list[ViewEntry] = field(default_factory=list)
    open_rows: int = 0
    tokens: int = 0
    unreadable: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)


def check(store: "SessionStore", session_id: str | None = None) -> Report:
    """Check the whole store, or only session `session_id` (id or unique prefix)."""
    report = Report()
    if session_id is None:
        report.problems += check_database(store)
        report.database_checked = True
        ids = _session_ids(store.db)
    else:
        ids = [store.get(session_id).id]
    verified_blobs: set[str] = set()
    for sid in ids:
        report.problems += check_session(store.db, sid, verified_blobs)
        report.sessions_checked += 1
    report.problems += search_problems(store, None if session_id is None else ids[0])
    return report


def search_problems(store: "SessionStore", session_id: str | None = None) -> list[Problem]:
    """The search index against the transcript: every message up to each mark indexed once, as it reads now."""
    found = index_problems(store.index_db, session_id, store.config.search_max_chars)
    return [Problem(code, message, sid, repairable=True) for code, message, sid in found]


def _repair_search(store: "SessionStore", session_id: str | None) -> list[str]:
    """Rebuild the search index (or one session's part of it) when it disagrees with the transcript; the whole
    index when its texts cannot be read back (deleting one session's would need them)."""
    problems = search_problems(store, session_id)
    if not problems:
        return []
    if session_id is None or any(p.code in UNREADABLE for p in problems):
        return [f"rebuilt the search index ({rebuild(store)} messages indexed)"]
    return [f"session {session_id}: reindexed for search ({reindex_session(store, session_id)} messages indexed)"]


def repair(store: "SessionStore", session_id: str | None = None) -> Report:
    """Recompute every session's derived counters, then check again; the report lists each change."""
    ids = _session_ids(store.db) if session_id is None else [store.get(session_id).id]
    repairs: list[str] = []
    for sid in ids:
        repairs += store.db.run_write(partial(_repair_session, sid=sid), session_id=sid, point="doctor.repair")
    repairs += _repair_search(store, None if session_id is None else ids[0])
    report = check(store, session_id)
    report.repairs = repairs
    return report


# ------------------------------------------------------------------ database


def check_database(store: "SessionStore") -> list[Problem]:
    """Engine integrity, schema presence and revision."""
    problems = _schema_problems(store)
    if store.db.is_sqlite:
        problems += _sqlite_problems(store.db)
    else:
        problems += _postgres_problems(store.db)
    return problems


def _schema_problems(store: "SessionStore") -> list[Problem]:
    """Every table and named index of the models present; alembic_version at head."""
    inspector = inspect(store.db.engine)
    present = set(inspector.get_table_names())
    problems = []
    for name, table in Base.metadata.tables.items():
        if name not in present:
            problems.append(Problem("schema", f"table {name} is missing"))
            continue
        indexes = {ix["name"] for ix in inspector.get_indexes(name)}
        for index in table.indexes:
            if index.name not in indexes:
                problems.append(Problem("schema", f"index {index.name} on {name} is missing"))
    if "alembic_version" not in present:
        return problems + [Problem("revision", "no alembic_version table: the schema is not managed")]
    rows = store.db.all("SELECT version_num FROM alembic_version")
    head = head_revision()
    if [r[0] for r in rows] != [head]:
        found = ", ".join(str(r[0]) for r in rows) or "none"
        problems.append(Problem("revision", f"schema revision is {found}, expected {head}"))
    return problems


def _sqlite_problems(db: "Database") -> list[Problem]:
    """PRAGMA integrity_check and foreign_key_check."""
    problems = []
    messages = [str(r[0]) for r in db.all("PRAGMA integrity_check")]
    if messages != ["ok"]:
        problems.append(Problem("integrity", "integrity_check: " + "; ".join(_shown(messages))))
    orphans = db.all("PRAGMA foreign_key_check")
    if orphans:
        listed = [f"{r[0]} rowid {r[1]} -> {r[2]}" for r in orphans]
        problems.append(
            Problem("foreign_key", f"{len(orphans)} row(s) point at missing parents: " + "; ".join(_shown(listed)))
        )
    return problems


def _postgres_problems(db: "Database") -> list[Problem]:
    """Invalid indexes, unvalidated constraints, and rows whose foreign key has no parent."""
    problems = []
    invalid = db.all(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND NOT (i.indisvalid AND i.indisready)"
    )
    for (name,) in invalid:
        problems.append(Problem("integrity", f"index {name} is invalid (rebuild it with REINDEX)"))
    unvalidated = db.all(
        "SELECT c.conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
        "WHERE n.nspname = current_schema() AND NOT c.convalidated"
    )
    for (name,) in unvalidated:
        problems.append(Problem("integrity", f"constraint {name} is not validated"))
    return problems + _foreign_key_orphans(db)


def _foreign_key_orphans(db: "Database") -> list[Problem]:
    """The foreign_key_check of PostgreSQL: child rows whose parent row is gone."""
    problems = []
    for table in Base.metadata.tables.values():
        for fk in table.foreign_key_constraints:
            pairs = [(e.parent.name, e.column.name) for e in fk.elements]
            parent = fk.referred_table.name
            # A key with a NULL column refers to nothing (MATCH SIMPLE), as the database itself reads it.
            present = " AND ".join(f"c.{child} IS NOT NULL" for child, _ in pairs)
            same = " AND ".join(f"p.{col} = c.{child}" for child, col in pairs)
            count = db.one(
                f"SELECT COUNT(*) FROM {table.name} c WHERE {present} AND NOT EXISTS "
                f"(SELECT 1 FROM {parent} p WHERE {same})"
            )[0]
            if count:
                children = ", ".join(child for child, _ in pairs)
                parents = ", ".join(col for _, col in pairs)
                problems.append(
                    Problem(
                        "foreign_key", f"{count} row(s) of {table.name}.{children} point at missing {parent}.{parents}"
                    )
                )
    return problems


# ------------------------------------------------------------------ sessions


def _session_ids(db: "Database") -> list[str]:
    return [r[0] for r in db.all("SELECT id FROM sessions ORDER BY id")]


def check_session(db: "Database", session_id: str, verified_blobs: set[str] | None = None) -> list[Problem]:
    """Every per-session check, read in one consistent snapshot."""
    with db.read():
        if not db.is_sqlite:
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ").close()
        problems = _session_problems(db, session_id, verified_blobs if verified_blobs is not None else set())
    return [Problem(p.code, p.message, session_id, p.repairable) for p in problems]


def _session_problems(db: "Database", sid: str, verified_blobs: set[str]) -> list[Problem]:
    row = _state_row(db, sid)
    if row is None:
        return [Problem("session", "the session row is gone")]
    last_seq, base_seq, view_tokens, explicit_count = (int(v) for v in row[:4])
    problems = _seq_problems(db, sid, last_seq, base_seq)
    view = _read_view(db, sid, base_seq)
    problems += _view_row_problems(db, sid, view)
    if view.tokens != view_tokens:
        problems.append(
            Problem(
                "view_tokens",
                f"view_tokens is {view_tokens} but the view's entries sum to {view.tokens}",
                repairable=True,
            )
        )
    if view.open_rows != explicit_count:
        problems.append(
            Problem(
                "explicit_count",
                f"explicit_count is {explicit_count} but the view has {view.open_rows} open row(s)",
                repairable=True,
            )
        )
    if not view.unreadable and not view.missing:
        problems += _validity_problems(db, sid, view.entries, row[4])
    problems += _compaction_problems(db, sid)
    problems += _blob_problems(db, sid, verified_blobs)
    problems += _damaged_rows(db, sid)
    return problems


def _damaged_rows(db: "Database", sid: str) -> list[Problem]:
    """Transcript rows whose stored JSON (content, usage, metadata) does not decode: damaged outside sessionstore."""
    damaged = [
        str(row[0])
        for row in iter_message_rows(db, sid, columns="seq, usage_json, metadata_json, content_json")
        if not all(is_stored_json(value) for value in row[1:])
    ]
    if not damaged:
        return []
    return [
        Problem(
            "damaged_row",
            f"message seq {', '.join(_shown(damaged))}: stored JSON damaged outside sessionstore; --repair cannot "
            "restore it (the original text is gone): `export -f jsonl` keeps each as its raw text, and "
            "deleting the session drops it",
        )
    ]


def _seq_problems(db: "Database", sid: str, last_seq: int, base_seq: int) -> list[Problem]:
    """seq runs 1..last_seq without holes; base_seq within it."""
    count, highest = db.one("SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM messages WHERE session_id = :id", {"id": sid})
    count, highest = int(count), int(highest)
    problems = []
    if count != highest:
        gaps = db.all(
            "SELECT prev, seq FROM (SELECT seq, LAG(seq, 1, 0) OVER (ORDER BY seq) AS prev "
            "FROM messages WHERE session_id = :id) t WHERE seq <> prev + 1 ORDER BY seq",
            {"id": sid},
        )
        holes = [f"{int(a) + 1}..{int(b) - 1}" if int(b) - int(a) > 2 else str(int(a) + 1) for a, b in gaps]
        problems.append(
            Problem(
                "seq_gap", f"transcript seq has {highest - count} hole(s) below {highest}: " + ", ".join(_shown(holes))
            )
        )
    if highest != last_seq:
        problems.append(
            Problem("last_seq", f"last_seq is {last_seq} but the highest seq is {highest}", repairable=True)
        )
    if not 0 <= base_seq <= max(last_seq, highest):
        problems.append(Problem("base_seq", f"base_seq {base_seq} is outside the transcript (0..{highest})"))
    return problems


def _read_view(db: "Database", sid: str, base_seq: int) -> _View:
    """Open explicit rows (with their message, if it exists) then the implicit tail."""
    view = _View()
    rows = db.all(
        "SELECT v.seq, v.content_json, v.tokens, m.seq, m.uuid, m.role, m.type, m.subtype, m.api_message_id, "
        "m.content_json FROM view_entries v LEFT JOIN messages m ON m.session_id = v.session_id "
        "AND m.seq = v.seq WHERE v.session_id = :id AND v.valid_to IS NULL ORDER BY v.key",
        {"id": sid},
    )
    for seq, replaced, tokens, found, *message in rows:
        view.open_rows += 1
        view.tokens += int(tokens)
        if found is None:
            view.missing.append(int(seq))
            continue
        _add_entry(view, int(seq), int(tokens), message, replaced)
    tail = db.all(
        "SELECT seq, tokens, uuid, role, type, subtype, api_message_id, content_json FROM messages "
        "WHERE session_id = :id AND seq > :base ORDER BY seq",
        {"id": sid, "base": base_seq},
    )
    for seq, tokens, *message in tail:
        view.tokens += int(tokens)
        _add_entry(view, int(seq), int(tokens), message, None)
    return view


def _add_entry(view: _View, seq: int, tokens: int, message: list[Any], replaced: str | None) -> None:
    """Append one view entry; content that is not valid JSON is noted instead."""
    uuid, role, mtype, subtype, api_id, content_json = message
    try:
        content = loads_stored(replaced if replaced is not None else content_json)
    except (ValueError, RecursionError):
        view.unreadable.append(seq)
        return
    stored = StoredMessage(
        seq=seq,
        uuid=uuid,
        role=role,
        type=mtype,
        content=content,
        subtype=subtype,
        api_message_id=api_id,
        tokens=tokens,
    )
    view.entries.append(ViewEntry(len(view.entries), stored, content, tokens, replaced is not None))


def _view_row_problems(db: "Database", sid: str, view: _View) -> list[Problem]:
    """Open rows point at real messages, once each, with distinct keys."""
    problems = []
    if view.missing:
        problems.append(
            Problem(
                "view_missing_message",
                "open view row(s) point at seq(s) with no message: " + ", ".join(_shown(map(str, view.missing))),
            )
        )
    if view.unreadable:
        problems.append(
            Problem(
                "bad_json", "content of seq(s) is not readable JSON: " + ", ".join(_shown(map(str, view.unreadable)))
            )
        )
    keys = db.all(
        "SELECT key, COUNT(*) FROM view_entries WHERE session_id = :id AND valid_to IS NULL "
        "GROUP BY key HAVING COUNT(*) > 1",
        {"id": sid},
    )
    if keys:
        problems.append(
            Problem(
                "view_duplicate_key",
                "several open view rows share key(s) " + ", ".join(_shown(str(k) for k, _ in keys)),
            )
        )
    counted = Counter([e.seq for e in view.entries] + view.missing)
    twice = sorted(seq for seq, n in counted.items() if n > 1)
    if twice:
        problems.append(
            Problem(
                "view_duplicate_seq", "message seq(s) appear twice in the view: " + ", ".join(_shown(map(str, twice)))
            )
        )
    return problems


# ------------------------------------------------------------ invariant 3


def _validity_problems(db: "Database", sid: str, entries: list[ViewEntry], tail_json: str) -> list[Problem]:
    """The view as sent is a valid request, streamed responses are whole, the tail state matches."""
    problems = [Problem("view_invalid", text) for text in api_problems(to_api_messages(entries))]
    problems += [Problem("view_split_response", text) for text in _split_responses(db, sid, entries)]
    stored, actual = _stored_tail(tail_json), _tail_of(entries)
    if stored is None:
        problems.append(Problem("tail_state", "tail_state is not readable JSON", repairable=True))
    elif not _same_tail(stored, actual):
        problems.append(
            Problem(
                "tail_state",
                f"tail_state says last role {stored.last_role!r} with pending {sorted(stored.pending)}, "
                f"the view says {actual.last_role!r} with pending {sorted(actual.pending)}",
                repairable=True,
            )
        )
    return problems


def _stored_tail(tail_json: str | None) -> TailState | None:
    try:
        return TailState.loads(tail_json)
    except (ValueError, TypeError, AttributeError):
        return None


def _same_tail(stored: TailState, actual: TailState) -> bool:
    """Equal as far as append validation goes: the last role sent and the tool_use ids still pending."""
    return (stored.last_role, set(stored.pending)) == (actual.last_role, set(actual.pending))


def api_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Why the Messages API would reject `messages` under invariant 3 (empty list: nothing to send)."""
    if not messages:
        return []
    first = messages[0]
    opens_with_api_summary = first["role"] == "assistant" and compaction_summary(compaction_block(first["content"]))
    problems = (
        [] if first["role"] == "user" or opens_with_api_summary else [f"the first message sent is {first['role']}"]
    )
    last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    seen: set[str] = set()
    for i, message in enumerate(messages):
        blocks = as_blocks(message["content"])
        if not blocks and not (i == len(messages) - 1 and message["role"] == "assistant"):
            problems.append(f"message {i} ({message['role']}) has empty content")
        if i and message["role"] == messages[i - 1]["role"]:
            problems.append(f"messages {i - 1} and {i} are both {message['role']}")
        if message["role"] == "assistant":
            problems += _assistant_problems(i, blocks, messages, seen, pending_ok=i == last_assistant)
        else:
            problems += _user_problems(i, blocks, messages)
    return problems


def _ids(blocks: Iterable[dict[str, Any]], kind: str, key: str) -> list[Any]:
    return [b.get(key) for b in blocks if b.get("type") == kind]


def _assistant_problems(
    i: int, blocks: list[dict[str, Any]], messages: list[dict[str, Any]], seen: set[str], *, pending_ok: bool
) -> list[str]:
    """tool_use ids unique, and answered by the next message unless this is the last assistant turn."""
    uses = _ids(blocks, "tool_use", "id")
    problems = [f"message {i}: tool_use id {u!r} used twice" for u in uses if u in seen]
    seen.update(uses)
    if pending_ok or not uses:
        return problems
    following = as_blocks(messages[i + 1]["content"]) if i + 1 < len(messages) else []
    answered = set(_ids(following, "tool_result", "tool_use_id"))
    missing = [u for u in uses if u not in answered]
    if missing:
        problems.append(f"message {i}: tool_use {missing} not answered by the next message")
    return problems


def _user_problems(i: int, blocks: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[str]:
    """Each tool_result answers, once, a tool_use of the assistant message just before; results first."""
    results = _ids(blocks, "tool_result", "tool_use_id")
    if not results:
        return []
    previous = messages[i - 1] if i else None
    offered = set()
    if previous is not None and previous["role"] == "assistant":
        offered = set(_ids(as_blocks(previous["content"]), "tool_use", "id"))
    problems = [
        f"message {i}: tool_result for {r!r} answers no tool_use of the message before"
        for r in results
        if r not in offered
    ]
    problems += [f"message {i}: several tool_results for {r!r}" for r in sorted(set(results)) if results.count(r) > 1]
    first_other = next((j for j, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks))
    if any(b.get("type") == "tool_result" for b in blocks[first_other:]):
        problems.append(f"message {i}: a tool_result comes after another block")
    return problems


def _split_responses(db: "Database", sid: str, entries: list[ViewEntry]) -> list[str]:
    """Pieces of one streamed response sit in one API message and are all in the view."""
    groups: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    group, role = -1, None
    for entry in entries:
        if not entry.message.is_sent:
            continue
        if entry.role != role:
            group, role = group + 1, entry.role
        if entry.api_message_id:
            groups.setdefault(entry.api_message_id, set()).add(group)
            counts[entry.api_message_id] = counts.get(entry.api_message_id, 0) + 1
    problems = [
        f"response {api_id!r} is split across {len(g)} API messages" for api_id, g in groups.items() if len(g) > 1
    ]
    if not counts:
        return problems
    recorded = db.all(
        "SELECT api_message_id, COUNT(*) FROM messages WHERE session_id = :id AND api_message_id IS NOT NULL "
        "AND role <> 'system' GROUP BY api_message_id",
        {"id": sid},
    )
    view_seqs = {e.seq for e in entries}
    for api_id, total in recorded:
        kept = counts.get(api_id, 0)
        if 0 < kept < int(total) and _left_out_with_substance(db, sid, api_id, view_seqs):
            problems.append(f"response {api_id!r}: {kept} of its {int(total)} recorded pieces are in the view")
    return problems


def _left_out_with_substance(db: "Database", sid: str, api_id: str, view_seqs: set[int]) -> bool:
    """True when a piece of `api_id` missing from the view is more than blank text (which the API refuses)."""
    rows = db.all(
        "SELECT seq, content_json FROM messages WHERE session_id = :id AND api_message_id = :api AND role <> 'system'",
        {"id": sid, "api": api_id},
    )
    return any(int(seq) not in view_seqs and not _is_blank(content_json) for seq, content_json in rows)


def _is_blank(content_json: str) -> bool:
    """Content with nothing but whitespace text (or unreadable, which is reported elsewhere)."""
    try:
        blocks = as_blocks(loads_stored(content_json))
    except (ValueError, RecursionError):
        return True
    return all(b.get("type") == "text" and not str(b.get("text") or "").strip() for b in blocks)


def _tail_of(entries: list[ViewEntry]) -> TailState:
    """The tail state the view implies (what append validation should hold)."""
    return TailState.from_messages((e.role, e.api_message_id, e.content) for e in entries if e.message.is_sent)


# ------------------------------------------------------- compactions, blobs


def _compaction_problems(db: "Database", sid: str) -> list[Problem]:
    """Each compactions row: a compact_boundary system message, a summary, a preserved segment that exists."""
    rows = db.all(
        "SELECT c.id, c.boundary_seq, b.role, b.subtype, c.summary_seq, s.seq, c.head_uuid, c.anchor_uuid, "
        "c.tail_uuid FROM compactions c "
        "LEFT JOIN messages b ON b.session_id = c.session_id AND b.seq = c.boundary_seq "
        "LEFT JOIN messages s ON s.session_id = c.session_id AND s.seq = c.summary_seq "
        "WHERE c.session_id = :id ORDER BY c.id",
        {"id": sid},
    )
    problems = []
    for cid, boundary_seq, role, subtype, summary_seq, summary_found, *segment in rows:
        where = f"compaction {cid}"
        if role is None:
            problems.append(Problem("compaction", f"{where}: boundary seq {boundary_seq} has no message"))
        elif role != "system" or subtype != "compact_boundary":
            problems.append(
                Problem(
                    "compaction",
                    f"{where}: boundary seq {boundary_seq} is a {role} message "
                    f"with subtype {subtype!r}, not a compact_boundary",
                )
            )
        if summary_seq is not None and summary_found is None:
            problems.append(Problem("compaction", f"{where}: summary seq {summary_seq} has no message"))
        absent = _absent_uuids(db, sid, [u for u in segment if u])
        for name, uuid in zip(("head", "anchor", "tail"), segment, strict=True):
            if uuid in absent:
                problems.append(Problem("compaction", f"{where}: {name}_uuid {uuid!r} is not in the transcript"))
    return problems + _empty_views_before(db, sid)


def _empty_views_before(db: "Database", sid: str) -> list[Problem]:
    """Boundaries whose view before is empty although user or assistant messages were recorded before them."""
    rows = db.all(
        "SELECT c.boundary_seq, c.replaced_version, "
        "(SELECT count(*) FROM view_entries v WHERE v.session_id = c.session_id AND v.valid_from <= c.replaced_version "
        "AND (v.valid_to IS NULL OR v.valid_to > c.replaced_version)), "
        "(SELECT count(*) FROM messages m WHERE m.session_id = c.session_id AND m.seq < c.boundary_seq "
        "AND m.role IN ('user', 'assistant')) "
        "FROM compactions c WHERE c.session_id = :id ORDER BY c.boundary_seq",
        {"id": sid},
    )
    return [
        Problem(
            "empty_view_before_boundary",
            f"boundary {index} (seq {seq}): the view before it is empty though {sent} sent message(s) precede it",
        )
        for index, (seq, _version, entries, sent) in enumerate(rows, 1)
        if int(entries) == 0 and int(sent) > 0
    ]


def _absent_uuids(db: "Database", sid: str, uuids: list[str]) -> set[str]:
    if not uuids:
        return set()
    params: dict[str, Any] = {"id": sid, **{f"u{i}": u for i, u in enumerate(uuids)}}
    marks = ", ".join(f":u{i}" for i in range(len(uuids)))
    found = db.all(f"SELECT uuid FROM messages WHERE session_id = :id AND uuid IN ({marks})", params)
    return set(uuids) - {r[0] for r in found}


def _blob_problems(db: "Database", sid: str, verified: set[str]) -> list[Problem]:
    """Each replacement's blob exists and its decompressed bytes hash to its key."""
    rows = db.all(
        "SELECT tool_use_id, blob_sha256 FROM replacements WHERE session_id = :id AND blob_sha256 IS NOT NULL "
        "ORDER BY tool_use_id",
        {"id": sid},
    )
    problems = []
    for tool_use_id, sha in rows:
        if sha in verified:
            continue
        try:
            get_blob(db, sha)
        except BlobNotFound:
            problems.append(
                Problem("blob_missing", f"replacement of {tool_use_id!r} points at blob {sha}, which is not stored")
            )
            continue
        except (BlobCorrupt, zlib.error, ValueError):
            problems.append(
                Problem("blob_corrupt", f"blob {sha} (replacement of {tool_use_id!r}) does not hash to its key")
            )
            continue
        verified.add(sha)
    return problems


# -------------------------------------------------------------------- repair


def _repair_session(db: "Database", sid: str) -> list[str]:
    """Recompute the session row's derived counters from its rows; one line per change."""
    row = _state_row(db, sid)
    if row is None:
        return []
    last_seq, base_seq, view_tokens, explicit_count = (int(v) for v in row[:4])
    view = _read_view(db, sid, base_seq)
    highest = int(db.one("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = :id", {"id": sid})[0])
    changes: dict[str, tuple[Any, Any]] = {}
    if view.tokens != view_tokens:
        changes["view_tokens"] = (view_tokens, view.tokens)
    if view.open_rows != explicit_count:
        changes["explicit_count"] = (explicit_count, view.open_rows)
    if highest != last_seq:
        changes["last_seq"] = (last_seq, highest)
    if not view.unreadable and not view.missing:
        stored, actual = _stored_tail(row[4]), _tail_of(view.entries)
        if stored is None or not _same_tail(stored, actual):
            changes["tail_state"] = (row[4], actual.dumps())
    if not changes:
        return []
    # The corrected figures become the session row's checkpoint at the highest seq, which
    # the state read prefers over the figures appended rows carry.
    fixed = {"last_seq": highest, "view_tokens": view.tokens, "explicit_count": view.open_rows, "tail_state": row[4]}
    fixed.update({name: new for name, (_, new) in changes.items()})
    assignments = ", ".join(f"{name} = :{name}" for name in fixed)
    db.execute(f"UPDATE sessions SET {assignments} WHERE id = :id", {**fixed, "id": sid}).close()
    fault_in(db, "after_session_row")
    return [f"session {sid}: set {name} from {old} to {new}" for name, (old, new) in changes.items()]


def _state_row(db: "Database", sid: str) -> tuple[Any, ...] | None:
    """(last_seq, base_seq, view_tokens, explicit_count, tail_state JSON) as the session reads them.

    The session row's figures, or the last appended message's when it is newer (appends do not
    write the session row).
    """
    row = db.one(STATE_SQL, {"id": sid})
    if row is None:
        return None
    if row[6] is not None and row[7] is not None:
        return (row[6], row[1], row[7], row[4], row[8])
    return (row[0], row[1], row[3], row[4], row[5])


def _shown(items: Iterable[str]) -> list[str]:
    """At most SHOWN items, then a count of the rest."""
    listed = list(items)
    if len(listed) <= SHOWN:
        return listed
    return listed[:SHOWN] + [f"... {len(listed) - SHOWN} more"]


__all__ = ["Problem", "Report", "api_problems", "check", "check_database", "check_session", "repair"]
