"""Full-text search over every recorded message, compacted spans included.

The index is derived data kept off the append path: each session has a
high-water mark (`search_marks.indexed_seq`), and a search first indexes
every message above the mark, in write transactions of its own, then
queries. So a search sees every message committed before it started, and a
hit is always joined back to a stored message, so none is invented.

What is indexed per message: user and assistant text, tool inputs (every
string value: commands, paths), tool results from the transcript (which
keeps a spilled result's original content), summaries. Thinking blocks,
signatures, images and documents are not.

Query language: words (all must match, anywhere in the message, as
substrings, case-insensitive), "exact phrases" in double quotes, and
nothing else: no operators, so identifiers, paths, error strings and text
without spaces (Japanese, Chinese) are matched as they are written.
SQLite uses an FTS5 trigram index (a term of three or more characters is an
index lookup; shorter ones are checked on the candidates, or scanned when a
query has only short terms) that keeps no text of its own (revision 0014: its
content is the view `search_text` over the zstd-packed copies in
`search_texts`, each distinct text stored and indexed once since revision 0017, see
searchpack.py); PostgreSQL uses pg_trgm for the same substring
matching and a `simple` tsvector for ranking. Hits are ranked best first
(bm25 / ts_rank), ties newest first; on SQLite a query matching more than
RANK_WINDOW messages (after the filters) is ranked among its RANK_WINDOW most
recently indexed matches, so a very common word costs a bounded amount; on PostgreSQL the rows
holding every word of the query are ranked first, among their PG_RANK_WINDOW newest, and only the
best are read to check the terms as written (the substring-only matches, ranked below, are read
when those do not fill the page).
"""

from __future__ import annotations

from functools import partial

import datetime as dt
import json
import re
import sqlite3
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import zstandard

from ..core.errors import SessionStoreError
from ..codecs.fastjson import loads_stored
from ..codecs.textpack import TextCorrupt
from ..core.faults import fault_in
from ..team.ownership import writable_clause
from ..codecs.searchpack import SearchPacker, text_hash
from ..codecs.textpack import DICTIONARY_TABLES, unpack_failed

if TYPE_CHECKING:
    from ..engine.db import Database
    from ..store import SessionStore

ROLES = ("user", "assistant", "tool", "summary", "system")
PLACES = ("all", "active", "compacted")
#: Trigram index: a term this long or longer is an index lookup.
MIN_INDEXED_CHARS = 3
MARK_OPEN, MARK_CLOSE = "«", "»"
#: Characters of a kept text `doctor` looks up in the FTS5 index to check the index holds that text.
PROBE_CHARS = 48
#: Dictionary ids one `doctor` problem lists.
SHOWN_IDS = 5
SNIPPET_CONTEXT = 70
#: A query matching more messages than this is ranked among its newest this many (bounded cost).
RANK_WINDOW = 2000
#: The same on PostgreSQL, smaller: ranking reads each match's tsvector (decompressed whole), about
#: 60 µs a row on a shared 2-core machine, where FTS5's bm25 reads only its index (bench/search.py).
PG_RANK_WINDOW = 500
#: Characters of one message the index holds by default (Config.search_max_chars): every message an
#: agent writes is indexed whole; only a longer one (a 16 MB tool dump) is cut.
INDEXED_CHARS = 16_000_000
#: Most hits one search returns (a LIMIT either database takes).
LIMIT_MAX = 1_000_000
#: Most distinct terms a query may hold: each is a clause of its own, and databases cap expression depth.
MAX_TERMS = 256
_FETCH_ROWS = 500
_TERMS = re.compile(r'"([^"]*)(?:"|$)|([^\s"]+)')
_SINCE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_SPACE = re.compile(r"\s+")
#: SQLite: the triggers that delete a text no search row names any more, and its terms from the FTS5
#: index (revision 0017).
_DELETE_TRIGGERS = ("search_rows_ad", "search_texts_ad")


class SearchQueryError(SessionStoreError, ValueError):
    """The query or a filter cannot be searched (empty, no letters or digits, a bad date)."""


class SearchIndexError(SessionStoreError):
    """The search index could not be brought up to date, or read (a runtime failure: nothing was half written,
    each index batch is its own transaction)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One matching message: where it is, what it said around the match, how to open it."""

    session: str
    title: str | None
    cwd: str | None
    seq: int
    uuid: str
    role: str
    timestamp: str | None
    snippet: str
    boundary: int | None
    open: str

    def to_dict(self) -> dict[str, Any]:
        """The `search --json` shape of a hit."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Filters:
    """What narrows a search besides the query."""

    session: str | None = None
    role: str | None = None
    since: str | None = None
    cwd: str | None = None
    in_: str = "all"
    limit: int = 20
    #: Only sessions captured on this host (`sessions.host`).
    host: str | None = None


# ------------------------------------------------------------------ extraction


def message_text(content: Any) -> str:
    """The searchable text of a message's content (thinking, signatures and media left out)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if isinstance(block, dict):
            _block_text(block, parts)
    return "\n".join(p for p in parts if p)


def _block_text(block: dict[str, Any], parts: list[str]) -> None:
    kind = block.get("type")
    if kind == "text":
        parts.append(str(block.get("text") or ""))
    elif kind == "document":
        parts.append(document_text(block))
    elif kind in ("tool_use", "server_tool_use"):
        parts.append(str(block.get("name") or ""))
        parts.extend(_strings(block.get("input")))
    elif kind == "tool_result" or (isinstance(kind, str) and kind.endswith("_tool_result")):
        inner = block.get("content")
        if isinstance(inner, str):
            parts.append(inner)
        elif isinstance(inner, list):
            for item in inner:
                if isinstance(item, dict):
                    _block_text(item, parts)


def document_text(block: dict[str, Any]) -> str:
    """A document block's readable text: its title, context and a plain-text source (a PDF's bytes are not text)."""
    parts = [str(block.get(key) or "") for key in ("title", "context")]
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "text":
        parts.append(str(source.get("data") or ""))
    elif isinstance(source, dict) and source.get("type") == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            parts.append(inner)
        elif isinstance(inner, list):
            parts.extend(str(b.get("text") or "") for b in inner if isinstance(b, dict) and b.get("type") == "text")
    return "\n".join(p for p in parts if p)


def _strings(value: Any) -> Iterator[str]:
    """Every string and number in a JSON value (tool inputs: commands, paths, patterns)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def search_role(role: str, is_compact_summary: bool, content: Any) -> str:
    """The role a hit reports: summary, tool (a user message carrying tool results), or the message's role."""
    if is_compact_summary:
        return "summary"
    if role == "user" and isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return "tool"
    return role


def indexed_body(content_json: str, max_chars: int) -> str:
    """The text stored in the index for one message: extracted, NUL-free, capped."""
    text = message_text(_readable(content_json))
    return text[:max_chars].replace("\x00", " ")


def _readable(content_json: str | bytes) -> Any:
    """A message's content, or "" for a row damaged outside sessionstore (indexed empty; `doctor` reports it)."""
    try:
        return loads_stored(content_json)
    except (TextCorrupt, RecursionError):
        return ""


# ---------------------------------------------------------------------- query


def parse_query(query: str) -> list[str]:
    """Terms of a query: "quoted phrases" and bare words, deduplicated; raises SearchQueryError."""
    terms: list[str] = []
    seen: set[str] = set()
    for phrase, word in _TERMS.findall(query or ""):
        term = _SPACE.sub(" ", (phrase or word).replace("\x00", " ")).strip()
        if term and term.casefold() not in seen:
            seen.add(term.casefold())
            terms.append(term)
    if not terms:
        raise SearchQueryError('the search query is empty: give a word, a "phrase" or a path')
    if not any(ch.isalnum() for term in terms for ch in term):
        raise SearchQueryError(f"the search query {query!r} has no letter or digit to search for")
    if len(terms) > MAX_TERMS:
        raise SearchQueryError(
            f"the search query holds {len(terms):,} words or phrases; at most {MAX_TERMS} "
            "are searched together: keep the ones that tell the message apart"
        )
    return terms


def parse_since(value: str | None, now: dt.datetime | None = None) -> str | None:
    """A lower bound on message timestamps from `2026-11-01`, an ISO time, or `30m`/`12h`/`7d`/`2w` ago."""
    if value is None or not value.strip():
        return None
    match = _SINCE.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        try:
            delta = {
                "m": dt.timedelta(minutes=amount),
                "h": dt.timedelta(hours=amount),
                "d": dt.timedelta(days=amount),
                "w": dt.timedelta(weeks=amount),
            }[unit]
            start = (now or dt.datetime.now(dt.timezone.utc)) - delta
        except OverflowError:
            raise SearchQueryError(
                f"--since {value!r} reaches back before the year 1; leave --since out to search every message"
            ) from None
        return start.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SearchQueryError(f"--since {value!r} is neither a date (2026-11-01) nor an age (7d, 12h)") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.timezone.utc)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S")


def check_filters(filters: Filters) -> None:
    """Raise SearchQueryError for a filter value no search can use."""
    if filters.role is not None and filters.role not in ROLES:
        raise SearchQueryError(f"role must be one of {', '.join(ROLES)}, not {filters.role!r}")
    if filters.in_ not in PLACES:
        raise SearchQueryError(f"in must be one of {', '.join(PLACES)}, not {filters.in_!r}")
    if not 1 <= filters.limit <= LIMIT_MAX:
        raise SearchQueryError(f"limit must be between 1 and {LIMIT_MAX:,}, got {filters.limit:,}")


def _like(term: str) -> str:
    """A LIKE pattern matching `term` anywhere (backslash escapes)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


# ------------------------------------------------------------------ the index


def pending_count(db: "Database") -> int:
    """How many messages wait to be indexed: each session's last seq (one index probe: appends do not write the
    session row, so its `last_seq` checkpoint lags) above its mark."""
    row = db.one(
        "SELECT COALESCE(SUM(t.top - t.mark), 0) FROM (SELECT COALESCE((SELECT MAX(x.seq) FROM messages x "
        "WHERE x.session_id = s.id), 0) AS top, COALESCE(m.indexed_seq, 0) AS mark FROM sessions s "
        "LEFT JOIN search_marks m ON m.session_id = s.id) t WHERE t.top > t.mark"
    )
    return int(row[0])


def update_index(store: "SessionStore", progress: Callable[[int], None] | None = None) -> int:
    """Index what was recorded since the last search, through the store's index connection (a read-only store
    has one that may write the index and nothing else); returns how many messages were indexed.

    Raises SearchIndexError, one line saying why, for any failure: the batches committed before it stay.
    """
    try:
        return catch_up(
            store.index_db,
            max_chars=store.config.search_max_chars,
            batch_chars=store.config.search_batch_chars,
            progress=progress,
        )
    except Exception as exc:  # any failure of a derived build is the same runtime error to the person searching
        raise SearchIndexError(
            f"the search index could not be brought up to date: {_cause(exc)}; `sessionstore doctor` checks the store"
        ) from exc


def _cause(exc: BaseException) -> str:
    """An exception as part of one line: its message on one line (its class when it has none)."""
    text = " ".join(str(exc).split())
    return text[:300] if text else type(exc).__name__


def catch_up(
    db: "Database",
    *,
    max_chars: int = INDEXED_CHARS,
    batch_chars: int = 1_000_000,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Index every message above each session's mark; returns how many were indexed.

    `progress(n)` is called after each committed batch with the messages it indexed.
    """
    # Only sessions this role may write get indexed by it (index rows are written as the session
    # owner's); a session shared read-only is searched as far as its writers indexed it.
    mine = "1" if db.is_sqlite else "CASE WHEN s.owner = current_user THEN 1 ELSE 0 END"
    lagging = db.all(
        f"SELECT s.id, {mine} FROM sessions s LEFT JOIN search_marks m ON m.session_id = s.id "
        "WHERE (SELECT MAX(x.seq) FROM messages x WHERE x.session_id = s.id) > COALESCE(m.indexed_seq, 0) "
        f"AND {writable_clause(db, 's')}"
    )
    done = 0
    for sid, own in lagging:
        while True:
            added, more = db.run_write(
                partial(_index_batch, sid=sid, max_chars=max_chars, batch_chars=batch_chars),
                session_id=None if own else sid,
                point="search.index",
            )
            done += added
            if progress is not None:
                progress(added)
            if not more:
                break
    if done and db.is_sqlite:
        db.run_write(
            lambda d: d.execute(
                "INSERT INTO search_fts(search_fts, rank) VALUES ('merge', :n)", {"n": max(64, done // 4)}
            ).close()
        )
        db.give_back_free_pages()  # the segments the merges replaced
    return done


def _index_batch(db: "Database", sid: str, max_chars: int, batch_chars: int) -> tuple[int, bool]:
    """Index the next messages of one session in this transaction; (count, whether more remain)."""
    if db.is_sqlite:
        row = db.one("SELECT indexed_seq FROM search_marks WHERE session_id = :id", {"id": sid})
    else:
        row = db.lock_mark("search_marks", "indexed_seq", sid)
    mark = int(row[0]) if row else 0
    if db.one("SELECT 1 FROM sessions WHERE id = :id", {"id": sid}) is None:
        return 0, False
    count, chars, top, exhausted = 0, 0, mark, False
    packer = SearchPacker(db) if db.is_sqlite else None
    while chars < batch_chars and not exhausted:
        rows = db.all(
            "SELECT seq, role, is_compact_summary, timestamp, content_json FROM messages "
            "WHERE session_id = :id AND seq > :after ORDER BY seq LIMIT :n",
            {"id": sid, "after": top, "n": _FETCH_ROWS},
        )
        if rows:
            chars += _insert_docs(db, sid, rows, max_chars, packer)
            count += len(rows)
            top = int(rows[-1][0])
        exhausted = len(rows) < _FETCH_ROWS
    fault_in(db, "after_docs")
    _set_mark(db, sid, row is not None, top)
    return count, not exhausted


def _insert_docs(db: "Database", sid: str, rows: list[Any], max_chars: int, packer: SearchPacker | None) -> int:
    """Write the index rows of these transcript rows; returns the characters indexed.

    SQLite: a text no message held yet goes into the FTS5 index and, packed, into `search_texts` (the
    index's content); each row names its text.
    """
    docs = []
    chars = 0
    for seq, role, is_summary, timestamp, content_json in rows:
        content = _readable(content_json)
        body = message_text(content)[:max_chars].replace("\x00", " ")
        chars += len(body)
        docs.append((sid, int(seq), search_role(role, bool(is_summary), content), timestamp, body))
    if packer is not None:
        if packer.train([doc[4] for doc in docs]):
            fault_in(db, "after_dictionary")
        cur = db.conn.cursor()
        for doc in docs:
            cur.execute(
                "INSERT INTO search_rows (session_id, seq, kind, timestamp, text_id) VALUES (?, ?, ?, ?, ?)",
                (*doc[:4], _text_id(cur, packer, doc[4])),
            )
        cur.close()
    else:
        cur = db.conn.cursor()
        cur.executemany(
            "INSERT INTO search_docs (session_id, seq, kind, timestamp, body) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (session_id, seq) DO NOTHING",
            docs,
        )
        cur.close()
    return chars


def _text_id(cur: Any, packer: SearchPacker, body: str) -> int:
    """SQLite: the id of the stored copy of `body`, stored and indexed first when no message held it yet."""
    key = text_hash(body)
    found = packer.known.get(key)
    if found is None:
        row = cur.execute("SELECT id FROM search_texts WHERE hash = ?", (key,)).fetchone()
        if row is None:
            cur.execute("INSERT INTO search_texts (hash, packed) VALUES (?, ?)", (key, packer.pack(body)))
            found = int(cur.lastrowid)
            cur.execute("INSERT INTO search_fts (rowid, body) VALUES (?, ?)", (found, body))
        else:
            found = int(row[0])
        packer.known[key] = found
    return found


def _set_mark(db: "Database", sid: str, exists: bool, seq: int) -> None:
    if exists:
        db.execute("UPDATE search_marks SET indexed_seq = :s WHERE session_id = :id", {"s": seq, "id": sid}).close()
    else:
        db.execute("INSERT INTO search_marks (session_id, indexed_seq) VALUES (:id, :s)", {"s": seq, "id": sid}).close()


def clear_index(db: "Database") -> None:
    """Empty the index and every mark (in the caller's transaction): the next search rebuilds it."""
    if db.is_sqlite:
        # The delete trigger is set aside: removing each row's terms one by one is wasted work before
        # 'delete-all', and fails on an index that holds other terms than its texts (what a rebuild repairs).
        triggers = [
            db.one("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = :n", {"n": name})[0]
            for name in _DELETE_TRIGGERS
        ]
        for name in _DELETE_TRIGGERS:
            db.execute(f"DROP TRIGGER {name}").close()
        db.execute("DELETE FROM search_rows").close()
        db.execute("DELETE FROM search_texts").close()
        db.execute("INSERT INTO search_fts(search_fts) VALUES ('delete-all')").close()
        for sql in triggers:
            db.execute(sql).close()
    else:
        db.execute("DELETE FROM search_docs").close()
    db.execute("DELETE FROM search_marks").close()


#: The first revision whose stores indexed each message whole (up to INDEXED_CHARS); before it, at most
#: 1,000,000 characters of a message were indexed, silently.
WHOLE_TEXTS_FROM = "0008"


def forget_cut_index(db: "Database", upgraded_from: str | None) -> bool:
    """After an upgrade from a store whose index cut long messages: empty the index (derived data), so the next
    search indexes every message whole instead of missing a long one's tail; True when it did."""
    if upgraded_from is None or upgraded_from >= WHOLE_TEXTS_FROM:
        return False
    db.run_write(clear_index)
    return True


def rebuild(store: "SessionStore") -> int:
    """Drop the index and build it again from the transcript; returns the messages indexed."""
    store.db.run_write(clear_index)
    indexed = catch_up(store.db, max_chars=store.config.search_max_chars, batch_chars=store.config.search_batch_chars)
    if store.db.is_sqlite:
        store.db.run_write(lambda d: d.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')").close())
    return indexed


def index_problems(
    db: "Database", session_id: str | None = None, max_chars: int = INDEXED_CHARS
) -> list[tuple[str, str, str | None]]:
    """(code, message, session) for each way the index disagrees with the transcript (all sessions or one).

    SQLite, whole store: when FTS5's integrity check finds the index disagreeing with the texts it
    keeps, each row is also looked up in the index, so the messages concerned are named.
    """
    problems: list[tuple[str, str, str | None]] = []
    # Texts that cannot be unpacked fail every check that reads them (and the index's delete trigger): they are
    # reported alone, and only a rebuild (which sets the trigger aside) repairs them.
    undecodable = _undecodable_texts(db) if db.is_sqlite else []
    fts = _fts_problems(db) if db.is_sqlite and session_id is None and not undecodable else []
    only = " WHERE s.id = :id" if session_id is not None else ""
    for sid, last_seq, mark in db.all(
        "SELECT s.id, COALESCE((SELECT MAX(x.seq) FROM messages x WHERE x.session_id = s.id), 0), COALESCE(m.indexed_seq, 0) FROM sessions s "
        f"LEFT JOIN search_marks m ON m.session_id = s.id{only}",
        {"id": session_id},
    ):
        if int(mark) > int(last_seq):
            problems.append(("search-mark-ahead", f"search index mark {mark} is past the last seq {last_seq}", sid))
        if not undecodable:
            problems += _readable_session_problems(db, sid, int(mark), max_chars, probe=bool(fts))
    if db.is_sqlite and session_id is None:
        problems += _unnamed_texts(db)
    return problems + undecodable + fts


#: Problem codes only a rebuild of the whole index repairs (its texts cannot be read, so not deleted one by one).
UNREADABLE = frozenset({"search-undecodable", "search-unreadable"})


def _undecodable_texts(db: "Database") -> list[tuple[str, str, str | None]]:
    """SQLite: stored search texts whose frame names a dictionary the store does not hold (or has no frame
    header), found from each frame's first bytes without unpacking anything."""
    held = {int(i) for table in DICTIONARY_TABLES for (i,) in db.all(f"SELECT id FROM {table}")}
    missing: dict[int, int] = {}
    damaged = 0
    for (head,) in db.all("SELECT substr(packed, 2, 18) FROM search_texts WHERE typeof(packed) = 'blob'"):
        try:
            dict_id = zstandard.get_frame_parameters(bytes(head)).dict_id
        except zstandard.ZstdError:
            damaged += 1
            continue
        if dict_id and dict_id not in held:
            missing[dict_id] = missing.get(dict_id, 0) + 1
    out: list[tuple[str, str, str | None]] = []
    if missing:
        count, ids = sum(missing.values()), ", ".join(str(i) for i in sorted(missing)[:SHOWN_IDS])
        out.append(
            ("search-undecodable", f"{count:,} stored search texts need a dictionary the store lacks ({ids})", None)
        )
    if damaged:
        out.append(("search-undecodable", f"{damaged:,} stored search texts are not zstd frames", None))
    return out


def _readable_session_problems(
    db: "Database", sid: str, mark: int, max_chars: int, probe: bool
) -> list[tuple[str, str, str | None]]:
    """`_session_index_problems`, with a text that does not unpack (a damaged frame) reported, not raised."""
    try:
        return _session_index_problems(db, sid, mark, max_chars, probe=probe)
    except sqlite3.OperationalError as exc:
        if not unpack_failed(exc):
            raise
        return [("search-unreadable", "a stored search text of this session does not decode", sid)]


def _unnamed_texts(db: "Database") -> list[tuple[str, str, str | None]]:
    """SQLite: stored texts no search row names (the delete trigger drops them; one left is space never freed)."""
    row = db.one(
        "SELECT COUNT(*) FROM search_texts t WHERE NOT EXISTS (SELECT 1 FROM search_rows r WHERE r.text_id = t.id)"
    )
    if not row[0]:
        return []
    return [("search-unnamed-text", f"{row[0]:,} stored search texts are named by no message", None)]


def reindex_session(store: "SessionStore", session_id: str) -> int:
    """Forget one session's index rows and mark, then index it again; returns the messages indexed."""

    def forget(db: "Database") -> None:
        table = "search_rows" if db.is_sqlite else "search_docs"
        db.execute(f"DELETE FROM {table} WHERE session_id = :id", {"id": session_id}).close()
        db.execute("DELETE FROM search_marks WHERE session_id = :id", {"id": session_id}).close()

    if store.db.is_sqlite and _fts_problems(store.db):
        # An index holding other terms than its texts cannot delete a row (FTS5 needs the terms it
        # holds): first rebuild the FTS5 index from the texts it keeps.
        store.db.run_write(lambda d: d.execute("INSERT INTO search_fts(search_fts) VALUES ('rebuild')").close())
    store.db.run_write(forget)
    return catch_up(store.db, max_chars=store.config.search_max_chars, batch_chars=store.config.search_batch_chars)


def _session_index_problems(
    db: "Database", sid: str, mark: int, max_chars: int, probe: bool = False
) -> list[tuple[str, str, str | None]]:
    """Each message up to the mark indexed once, with the text and role it holds now (`probe`: and its
    text found in the FTS5 index, about 0.1-1.5 ms a row, so only when the index is known to be off)."""
    missing, wrong, beyond = [], [], []
    for seq, role, is_summary, content_json, kind, body, rowid in _paired_rows(db, sid):
        if seq > mark:
            if kind is not None:
                beyond.append(seq)
            continue
        if kind is None:
            missing.append(seq)
            continue
        content = _readable(content_json)
        if kind != search_role(role, bool(is_summary), content) or body != indexed_body(content_json, max_chars):
            wrong.append(seq)
        elif probe and not _indexed_as_kept(db, rowid, body):
            wrong.append(seq)
    out: list[tuple[str, str, str | None]] = []
    for code, seqs, what in (
        ("search-missing", missing, "not in the search index"),
        ("search-stale", wrong, "indexed with other text or role than the transcript holds"),
        ("search-beyond-mark", beyond, "indexed past the search mark"),
    ):
        if seqs:
            shown = ", ".join(str(s) for s in seqs[:5]) + (f" ... {len(seqs) - 5} more" if len(seqs) > 5 else "")
            out.append((code, f"message seq {shown} {what}", sid))
    return out


def _indexed_as_kept(db: "Database", rowid: int, body: str) -> bool:
    """SQLite: the FTS5 index holds this row's kept text (checked by its opening characters as a phrase).

    The index is written beside the text, not from it: an index row changed by hand, or past its
    text, shows here, where comparing the text with the transcript cannot see it.
    """
    start = body[:PROBE_CHARS]
    if len(start) < MIN_INDEXED_CHARS:
        return True
    probe = '"' + start.replace('"', '""') + '"'
    found = db.one("SELECT 1 FROM search_fts WHERE search_fts MATCH :p AND rowid = :r", {"p": probe, "r": rowid})
    return found is not None


def _paired_rows(db: "Database", sid: str) -> Iterator[tuple[int, str, Any, str, str | None, str | None, Any]]:
    """Every transcript row of the session with its index row (kind, body, index key), in seq batches."""
    body_sql = (
        "SELECT m.seq, m.role, m.is_compact_summary, m.content_json, r.kind, unpacked(t.packed), r.text_id "
        "FROM messages m LEFT JOIN search_rows r ON r.session_id = m.session_id AND r.seq = m.seq "
        "LEFT JOIN search_texts t ON t.id = r.text_id "
        if db.is_sqlite
        else "SELECT m.seq, m.role, m.is_compact_summary, m.content_json, d.kind, d.body, NULL FROM messages m "
        "LEFT JOIN search_docs d ON d.session_id = m.session_id AND d.seq = m.seq "
    )
    after = 0
    while True:
        rows = db.all(
            body_sql + "WHERE m.session_id = :id AND m.seq > :after ORDER BY m.seq LIMIT 500",
            {"id": sid, "after": after},
        )
        for row in rows:
            yield int(row[0]), row[1], row[2], row[3], row[4], row[5], row[6]
        if len(rows) < 500:
            return
        after = int(rows[-1][0])


def _fts_problems(db: "Database") -> list[tuple[str, str, str | None]]:
    """SQLite: FTS5's own integrity check, which reads the index against the texts it keeps (its content),
    so terms of a row that has no search row (or other text) show here."""
    out: list[tuple[str, str, str | None]] = []
    try:
        db.execute("INSERT INTO search_fts(search_fts, rank) VALUES ('integrity-check', 1)").close()
    except Exception as exc:  # the FTS5 integrity check reports corruption as an error
        out.append(("search-corrupt", f"the FTS5 index failed its integrity check: {exc}", None))
    return out


# ----------------------------------------------------------------- searching


def search(store: "SessionStore", query: str, filters: Filters) -> list[Hit]:
    """Catch the index up, then the best `filters.limit` hits, best first (ties newest first)."""
    terms = parse_query(query)
    check_filters(filters)
    since = parse_since(filters.since)
    session_id = store.get(filters.session).id if filters.session else None
    update_index(store)
    try:
        with store.db.read() as db:
            rows, bodies = _matches(db, terms, filters, session_id, since)
            boundaries = _boundaries_of(db, [(r[1], r[2]) for r in rows if not r[9]])
    except sqlite3.OperationalError as exc:
        if not unpack_failed(exc):
            raise
        raise SearchIndexError(
            "the search index cannot be read: a stored search text does not decode; "
            "`sessionstore doctor --repair` rebuilds the index"
        ) from exc
    return [_hit(r, bodies.get(r[0], ""), terms, boundaries) for r in rows]


def _matches(
    db: "Database", terms: list[str], filters: Filters, session_id: str | None, since: str | None
) -> tuple[list[Any], dict[Any, str]]:
    """The page of matching rows, (doc key, session, seq, role, timestamp, uuid, title, cwd, rank, active),
    and their indexed text by doc key (for snippets)."""
    params: dict[str, Any] = {"limit": int(filters.limit)}
    where: list[str] = []
    if db.is_sqlite:
        columns, source, order = _sqlite_match(terms, params, where)
        alias = "r"
    else:
        columns, source, order = _postgres_match(terms, params, where)
        alias = "d"
    needs_session = _filter_clauses(alias, filters, session_id, since, params, where)
    joined = f"{source} JOIN sessions s ON s.id = {alias}.session_id" if needs_session else source
    if db.is_sqlite and "match" in params:
        _window(db, joined, where, params)
    if not db.is_sqlite:
        _postgres_window(params, filters, session_id, since, needs_session)
    ranked_sql = f"SELECT {columns} FROM {joined} WHERE {' AND '.join(where) or '1 = 1'} ORDER BY {order} LIMIT :limit"
    if not db.is_sqlite:
        return _postgres_page(db, ranked_sql, params)
    ranked = db.all(ranked_sql, params)
    out = []
    for key, sid, seq, kind, timestamp, rank in ranked:
        row = db.one(
            f"SELECT m.uuid, s.title, s.cwd, {_active('m')} FROM messages m JOIN sessions s "
            "ON s.id = m.session_id WHERE m.session_id = :sid AND m.seq = :seq",
            {"sid": sid, "seq": seq},
        )
        if row is not None:
            out.append((key, sid, int(seq), kind, timestamp, row[0], row[1], row[2], rank, bool(row[3])))
    return out, _bodies(db, [r[0] for r in out])


def _postgres_page(db: "Database", ranked_sql: str, params: dict[str, Any]) -> tuple[list[Any], dict[Any, str]]:
    """The ranked page with each hit's message, session and indexed text, in one round trip (a server's
    round trips, not its work, are what a page of 20 hits would otherwise cost)."""
    rows = db.all(
        f"SELECT r.key, r.session_id, r.seq, r.kind, r.timestamp, m.uuid, s.title, s.cwd, r.score, {_active('m')}, "
        f"b.body FROM ({ranked_sql}) r(key, session_id, seq, kind, timestamp, score) "
        "JOIN messages m ON m.session_id = r.session_id AND m.seq = r.seq JOIN sessions s ON s.id = m.session_id "
        "JOIN search_docs b ON b.session_id = r.session_id AND b.seq = r.seq "
        "ORDER BY r.score DESC, r.timestamp DESC NULLS LAST, r.seq DESC",
        params,
    )
    out = [(r[0], r[1], int(r[2]), r[3], r[4], r[5], r[6], r[7], r[8], bool(r[9])) for r in rows]
    return out, {r[0]: r[10] or "" for r in rows}


def _active(alias: str) -> str:
    """SQL: the message `alias` is in its session's active view (implicit tail or an open view row)."""
    return (
        f"({alias}.seq > s.base_seq OR EXISTS (SELECT 1 FROM view_entries v WHERE v.session_id = "
        f"{alias}.session_id AND v.seq = {alias}.seq AND v.valid_to IS NULL))"
    )


def _filter_clauses(
    alias: str, filters: Filters, session_id: str | None, since: str | None, params: dict[str, Any], where: list[str]
) -> bool:
    """Add the filters' WHERE clauses; True when they need the sessions table joined (as `s`)."""
    if session_id is not None:
        where.append(f"{alias}.session_id = :session")
        params["session"] = session_id
    if filters.role is not None:
        where.append(f"{alias}.kind = :role")
        params["role"] = filters.role
    if since is not None:
        where.append(f"{alias}.timestamp >= :since")
        params["since"] = since
    if filters.cwd:
        prefix = filters.cwd.rstrip("/") or "/"
        where.append("(s.cwd = :cwd OR s.cwd LIKE :cwd_like ESCAPE '\\')")
        params["cwd"] = prefix
        params["cwd_like"] = _like(prefix.rstrip("/") + "/")[1:]
    if filters.host is not None:
        where.append("s.host = :host")
        params["host"] = filters.host
    if filters.in_ == "active":
        where.append(_active(alias))
    elif filters.in_ == "compacted":
        where.append(f"NOT {_active(alias)}")
    return bool(filters.cwd) or filters.host is not None or filters.in_ != "all"


def _window(db: "Database", joined: str, where: list[str], params: dict[str, Any]) -> None:
    """Rank a very common query among its RANK_WINDOW most recently indexed matches only.

    A match is a distinct text (an FTS5 rowid, revision 0017): the window holds the newest
    RANK_WINDOW texts matching, with every message holding one of them.

    bm25 has to visit every match; past the window, the matches are cut at the
    window's oldest rowid, so the cost stays bounded. FTS5 walks a MATCH in
    rowid order lazily, so finding that rowid visits the window, never the rest;
    a query with fewer matches finds none and is ranked whole.
    """
    if len(where) == 1:
        row = db.one(
            "SELECT rowid FROM search_fts WHERE search_fts MATCH :match ORDER BY rowid DESC LIMIT 1 OFFSET :window",
            {**params, "window": RANK_WINDOW},
        )
    else:
        row = db.one(
            f"SELECT search_fts.rowid FROM {joined} WHERE {' AND '.join(where)} "
            "ORDER BY search_fts.rowid DESC LIMIT 1 OFFSET :window",
            {**params, "window": RANK_WINDOW},
        )
    if row is not None:
        where.append("search_fts.rowid > :floor")
        params["floor"] = int(row[0])


def _sqlite_match(terms: list[str], params: dict[str, Any], where: list[str]) -> tuple[str, str, str]:
    """(columns, source, order): FTS5 trigram MATCH for the long terms, instr() on the candidates for short ones."""
    long_terms = [t for t in terms if len(t) >= MIN_INDEXED_CHARS]
    short_terms = [t for t in terms if len(t) < MIN_INDEXED_CHARS]
    for i, term in enumerate(short_terms):
        where.append(f"instr(lower(unpacked(t.packed)), :short{i}) > 0")
        params[f"short{i}"] = term.lower()
    if long_terms:
        params["match"] = " ".join('"' + t.replace('"', '""') + '"' for t in long_terms)
        where.insert(0, "search_fts MATCH :match")
        return (
            "r.id, r.session_id, r.seq, r.kind, r.timestamp, search_fts.rank",
            "search_fts JOIN search_rows r ON r.text_id = search_fts.rowid"
            + (" JOIN search_texts t ON t.id = search_fts.rowid" if short_terms else ""),
            "search_fts.rank, r.timestamp DESC, r.seq DESC",
        )
    return (
        "r.id, r.session_id, r.seq, r.kind, r.timestamp, 0",
        "search_rows r JOIN search_texts t ON t.id = r.text_id",
        "r.timestamp DESC, r.seq DESC",
    )


def _postgres_match(terms: list[str], params: dict[str, Any], where: list[str]) -> tuple[str, str, str]:
    """(columns, source, order): each term a case-insensitive substring (pg_trgm's index), ranked by the
    tsvector against the words."""
    # The matching runs in sessionstore_search_window() (revision 0011): under row-level security
    # PostgreSQL would not use the trigram index for a substring test; the function applies the same rule.
    params["terms"] = terms
    params["words"] = " ".join(terms)
    return (
        "d.session_id || ':' || d.seq, d.session_id, d.seq, d.kind, d.timestamp, "
        "ts_rank(d.tsv, plainto_tsquery('simple', :words)) AS score",
        "sessionstore_search_window(:terms, :newest, :enough, :in_session, :in_kind, :in_since) k "
        "JOIN search_docs d ON d.session_id = k.session_id AND d.seq = k.seq",
        "score DESC, d.timestamp DESC NULLS LAST, d.seq DESC",
    )


def _postgres_window(
    params: dict[str, Any], filters: Filters, session_id: str | None, since: str | None, needs_session: bool
) -> None:
    """Rank a very common query among its PG_RANK_WINDOW most recently indexed matches (as SQLite does).

    The function (revision 0011) first takes the rows holding every word of the query (the tsvector
    index finds them without reading a text; only they rank above zero), the newest window of them,
    ranks them and reads their texts in rank order until `enough` hold the terms as written; only
    when fewer do, it reads the other substring candidates (newest window). So a common word costs
    one window's ranking, not a read of every match. The filters on the index table go into it; a
    filter on the session row or the active view (cwd, host, in) cannot, so such a search ranks
    every match rather than a window the filter might empty.
    """
    params["newest"] = None if needs_session else PG_RANK_WINDOW
    params["enough"] = None if needs_session else params["limit"]
    params["in_session"] = session_id
    params["in_kind"] = filters.role
    params["in_since"] = since


def _bodies(db: "Database", keys: list[Any]) -> dict[Any, str]:
    """The indexed text of the hits on the page (for snippets)."""
    out: dict[Any, str] = {}
    for key in keys:
        if db.is_sqlite:
            row = db.one(
                "SELECT unpacked(t.packed) FROM search_rows r JOIN search_texts t ON t.id = r.text_id WHERE r.id = :k",
                {"k": key},
            )
        else:
            sid, _, seq = str(key).rpartition(":")
            row = db.one("SELECT body FROM search_docs WHERE session_id = :s AND seq = :q", {"s": sid, "q": int(seq)})
        out[key] = row[0] if row else ""
    return out


def _boundaries_of(db: "Database", hits: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
    """Which boundary (index from 1) replaced each message no longer in the active view."""
    by_session: dict[str, list[int]] = {}
    for sid, seq in hits:
        by_session.setdefault(sid, []).append(seq)
    out: dict[tuple[str, int], int | None] = {}
    for sid, seqs in by_session.items():
        rows = db.all(
            "SELECT id, boundary_seq FROM compactions WHERE session_id = :id ORDER BY boundary_seq", {"id": sid}
        )
        compactions = [(int(cid), int(b)) for cid, b in rows]
        for seq in seqs:
            out[(sid, seq)] = _replacing_boundary(db, sid, seq, compactions)
    return out


def _replacing_boundary(db: "Database", sid: str, seq: int, compactions: list[tuple[int, int]]) -> int | None:
    """The first compaction recorded after `seq` that summarized it, else the first recorded after it."""
    later = [(index, cid) for index, (cid, boundary_seq) in enumerate(compactions, 1) if boundary_seq > seq]
    for index, cid in later:
        if seq in _summarized(db, sid, cid):
            return index
    return later[0][0] if later else None


#: Parsed `summarized_seqs_json` by (session id, compaction id): compaction rows are never updated, and
#: the session's uuid keeps two databases' equal row ids apart (a bare id served another store's row).
_SUMMARIZED: "OrderedDict[tuple[str, int], frozenset[int]]" = OrderedDict()
_SUMMARIZED_KEEP = 512


def _summarized(db: "Database", sid: str, compaction_id: int) -> frozenset[int]:
    """The seqs one compaction summarized (cached: a compaction row never changes)."""
    key = (sid, compaction_id)
    found = _SUMMARIZED.get(key)
    if found is None:
        row = db.one(
            "SELECT summarized_seqs_json FROM compactions WHERE id = :id AND session_id = :sid",
            {"id": compaction_id, "sid": sid},
        )
        found = frozenset(int(s) for s in json.loads(row[0] or "[]")) if row else frozenset()
        _SUMMARIZED[key] = found
        if len(_SUMMARIZED) > _SUMMARIZED_KEEP:
            _SUMMARIZED.popitem(last=False)
    else:
        _SUMMARIZED.move_to_end(key)
    return found


def _hit(row: Any, body: str, terms: list[str], boundaries: dict[tuple[str, int], int | None]) -> Hit:
    _, sid, seq, role, timestamp, uuid, title, cwd, _, active = row
    boundary = None if active else boundaries.get((sid, int(seq)))
    command = f"sessionstore show {sid} {uuid}"
    return Hit(
        session=sid,
        title=title,
        cwd=cwd,
        seq=int(seq),
        uuid=uuid,
        role=role,
        timestamp=timestamp,
        snippet=snippet(body, terms),
        boundary=boundary,
        open=command,
    )


def snippet(body: str, terms: list[str], context: int = SNIPPET_CONTEXT) -> str:
    """The text around the first match, on one line, every term in it marked «like this»."""
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.IGNORECASE)
    first = pattern.search(body)
    start = max(0, first.start() - context) if first else 0
    end = min(len(body), (first.end() if first else 0) + context)
    window = body[start:end]
    marked = pattern.sub(lambda m: f"{MARK_OPEN}{m.group(0)}{MARK_CLOSE}", window)
    text = _SPACE.sub(" ", marked).strip()
    return ("…" if start > 0 else "") + text + ("…" if end < len(body) else "")
