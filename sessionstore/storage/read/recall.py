"""Recall: the exact messages of the view before a boundary, as text within a token budget.

An agent whose context was compacted can read back what the summary replaced:
the last messages before boundary K, those matching a query, or those around
one message. Rows are read page by page from the temporal view rows in one
read-only snapshot, so the cost and the memory follow the budget, not the
session. The transcript content is shown, so a tool result that the view had
cleared or spilled is recalled in full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from ..core.errors import MessageNotFound, SessionStoreError
from ..codecs.fastjson import loads_stored
from .history import BoundaryNotFound, boundary_count
from ..records.rows import dumps
from ..codecs.tokens import estimate_text

if TYPE_CHECKING:
    from ..engine.db import Database
    from ..write.session import Session

DEFAULT_MAX_TOKENS = 4_000
MIN_MAX_TOKENS = 100
MAX_MAX_TOKENS = 100_000
#: View rows read per query while filling a page: the first query reads FIRST_ROWS, each next one
#: twice as many up to PAGE_ROWS, so a small page of large messages holds few of them in memory.
PAGE_ROWS = 64
FIRST_ROWS = 4
#: A recall's closing note repeats the query clipped to this many characters.
NOTE_QUERY_CHARS = 80
#: What the blank line between two recalled messages may add to the estimate of the whole text.
SEPARATOR_TOKENS = 2
#: The messages get at least this many tokens, whatever the note takes.
MIN_PAGE_TOKENS = 20
#: Cursors are view keys: integers strictly between -MAX_CURSOR and MAX_CURSOR.
MAX_CURSOR = 2**62
#: In query mode, a matching message longer than this is shown as an excerpt around the match.
EXCERPT_CHARS = 1_500
#: The longest query, in characters; and the longest LIKE pattern it may become once JSON-escaped
#: (SQLite refuses longer patterns as "too complex"), so both engines refuse the same queries.
MAX_QUERY_CHARS = 20_000
MAX_PATTERN_BYTES = 50_000

_ROW_SQL = (
    "SELECT v.key, v.content_json IS NOT NULL, m.seq, m.uuid, m.role, m.type, m.subtype, m.content_json, "
    "m.is_compact_summary "
    "FROM view_entries v JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq "
    "WHERE v.session_id = :id AND v.valid_from <= :v AND (v.valid_to IS NULL OR v.valid_to > :v)"
)
_COUNT_SQL = (
    "SELECT COUNT(*) FROM view_entries v "
    "WHERE v.session_id = :id AND v.valid_from <= :v AND (v.valid_to IS NULL OR v.valid_to > :v)"
)


class RecallError(SessionStoreError, ValueError):
    """A recall request that cannot be answered as asked (bad budget, cursor or mode)."""


@dataclass(frozen=True, slots=True)
class RecalledMessage:
    """One message shown by a recall."""

    seq: int
    uuid: str
    role: str
    tokens: int
    replaced_in_view: bool
    cut: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "uuid": self.uuid,
            "role": self.role,
            "tokens": self.tokens,
            "replaced_in_view": self.replaced_in_view,
            "cut": self.cut,
        }


@dataclass(frozen=True, slots=True)
class Recall:
    """A bounded page of the view before a boundary, rendered as text with a note on paging."""

    session: str
    boundary: int
    mode: str
    text: str
    messages: list[RecalledMessage] = field(default_factory=list)
    view_size: int = 0
    earlier: int = 0
    later: int = 0
    next_cursor: int | None = None
    tokens: int = 0
    #: For a range recall (`A..B`), A; `boundary` is B.
    first_boundary: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON shape for the CLI, the MCP server and the agent's logs."""
        return {
            "session": self.session,
            "boundary": self.boundary,
            "mode": self.mode,
            "text": self.text,
            **({"first_boundary": self.first_boundary} if self.first_boundary is not None else {}),
            "messages": [m.to_dict() for m in self.messages],
            "view_size": self.view_size,
            "earlier": self.earlier,
            "later": self.later,
            "next_cursor": self.next_cursor,
            "tokens": self.tokens,
        }


@dataclass(frozen=True, slots=True)
class _Row:
    """One view row with its transcript message."""

    key: int
    replaced: bool
    seq: int
    uuid: str
    role: str
    kind: str
    content_json: str


@dataclass(slots=True)
class _Page:
    """The rendered pieces chosen so far, with their budget."""

    budget: int
    spent: int = 0
    shown: list[tuple[_Row, str, int, bool]] = field(default_factory=list)

    def offer(self, row: _Row, text: str, *, force: bool = False) -> bool:
        """Take `text` if it fits; when `force` and nothing fits, take it cut to the budget."""
        cost = estimate_text(text)
        if self.spent + cost + SEPARATOR_TOKENS <= self.budget:
            self.shown.append((row, text, cost, False))
            self.spent += cost + SEPARATOR_TOKENS
            return True
        if force and not self.shown:
            cut = _cut_to(text, self.budget - self.spent)
            cost = estimate_text(cut)
            self.shown.append((row, cut, cost, True))
            self.spent += cost
            return True
        return False


def recall(
    session: "Session",
    boundary: "int | str | tuple[int, int] | None" = None,
    *,
    query: str | None = None,
    around_uuid: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    cursor: int | None = None,
) -> Recall:
    """The exact messages before boundary `boundary` (default: the latest), within `max_tokens`.

    Without `query` or `around_uuid`: the last messages of that view. With
    `query`: the newest messages containing it (case-insensitive). With
    `around_uuid` (a uuid, a unique start of one, or a seq): that message and its neighbours. `cursor` (from
    `next_cursor`) pages on to earlier messages. Never writes.

    A range `"A..B"` (or `(A, B)`) reads the transcript messages recorded after boundary A-1
    and before boundary B (summaries, boundaries and attachments left out): what a summary's
    condensed reference `recall -b A..B --query FACT` names.
    """
    boundary = parse_boundary(boundary)
    if isinstance(boundary, tuple):
        return _recall_range(
            session, boundary, query=query, around_uuid=around_uuid, max_tokens=max_tokens, cursor=cursor
        )
    if query is not None and around_uuid is not None:
        raise RecallError("give a query or an around_uuid, not both")
    if query is not None and not query.strip():
        raise RecallError("the query is empty")
    if query is not None and (len(query) > MAX_QUERY_CHARS or len(_like_pattern(query).encode()) > MAX_PATTERN_BYTES):
        raise RecallError(
            f"the query is too long ({len(query):,} characters): at most {MAX_QUERY_CHARS:,} are "
            "matched, fewer when it holds quotes, backslashes or control characters; give the part that tells "
            "the message apart"
        )
    if not MIN_MAX_TOKENS <= max_tokens <= MAX_MAX_TOKENS:
        raise RecallError(f"max_tokens must be between {MIN_MAX_TOKENS} and {MAX_MAX_TOKENS}, not {max_tokens}")
    if cursor is not None and around_uuid is not None:
        raise RecallError("a cursor pages the last messages or query matches; drop around_uuid to page on")
    check_cursor(cursor)
    if around_uuid is not None and around_uuid.strip():
        from .message_info import find_message

        around_uuid = find_message(session, around_uuid).uuid  # a unique start (as view prints it) is enough
    index, version = _boundary_version(session, boundary)
    mode = "query" if query is not None else "around" if around_uuid is not None else "last"
    with session.db.read() as db:
        scope = _Scope(db, session.id, version)
        if cursor is not None and not scope.count("AND v.key = :k", cursor):
            raise RecallError(
                f"{cursor} is not a cursor of the view before boundary {index}: "
                "pass the next_cursor of the previous call"
            )
        page = _Page(max(MIN_PAGE_TOKENS, max_tokens - _note_reserve(index, mode, query)))
        if around_uuid is not None:
            _fill_around(scope, page, around_uuid)
        else:
            _fill_backwards(scope, page, query, cursor)
        shown = sorted(page.shown, key=lambda item: item[0].key)
        size = scope.count()
        earlier = (
            scope.count("AND v.key < :k", shown[0][0].key)
            if shown
            else (scope.count("AND v.key < :k", cursor) if cursor is not None else size)
        )
        later = scope.count("AND v.key > :k", shown[-1][0].key) if shown else 0
    next_cursor = shown[0][0].key if shown and earlier else None
    if not shown and mode == "query":
        next_cursor = None
    text = _render(index, mode, query, shown, size, earlier, later, next_cursor)
    messages = [RecalledMessage(r.seq, r.uuid, r.role, cost, r.replaced, cut) for r, _, cost, cut in shown]
    return Recall(session.id, index, mode, text, messages, size, earlier, later, next_cursor, estimate_text(text))


def parse_boundary(value: "int | str | tuple[int, int] | None") -> "int | tuple[int, int] | None":
    """A boundary number, or a range `A..B` as (A, B); RecallError for anything else."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
        first, last = value
    elif isinstance(value, str) and value.strip().isdigit():
        return int(value)
    elif isinstance(value, str) and value.count("..") == 1:
        head, _, tail = value.strip().partition("..")
        if not (head.isdigit() and tail.isdigit()):
            raise RecallError(f"{value!r} is not a boundary range: write it as A..B (for example 3..40)")
        first, last = int(head), int(tail)
    else:
        raise RecallError(f"{value!r} is not a boundary: give K or a range A..B")
    if not 1 <= first <= last:
        raise RecallError(f"boundary range {first}..{last} must run from 1 upwards, the first not after the last")
    return first, last


def era_of(session: "Session", seq: int) -> int:
    """The boundary whose stretch of the transcript holds `seq`: 1 + the boundaries recorded before it."""
    row = session.db.one(
        "SELECT COUNT(*) FROM compactions WHERE session_id = :id AND boundary_seq < :seq",
        {"id": session.id, "seq": seq},
    )
    return int(row[0]) + 1


#: Rows of a range recall: transcript messages, newest first, no summaries, boundaries or attachments.
_RANGE_SQL = (
    "SELECT m.seq, m.uuid, m.role, m.type, m.subtype, m.content_json FROM messages m "
    "WHERE m.session_id = :id AND m.seq > :lo AND m.seq < :hi AND m.is_compact_summary = :no "
    "AND m.role <> 'system' AND m.type <> 'attachment'"
)


def _recall_range(
    session: "Session",
    span: tuple[int, int],
    *,
    query: str | None,
    around_uuid: str | None,
    max_tokens: int,
    cursor: int | None,
) -> Recall:
    """The newest transcript messages recorded in boundaries first..last's stretch (matching `query`)."""
    first, last = span
    if around_uuid is not None:
        raise RecallError("a boundary range reads messages by query or newest first; around_uuid takes one boundary")
    if query is not None and not query.strip():
        raise RecallError("the query is empty")
    if not MIN_MAX_TOKENS <= max_tokens <= MAX_MAX_TOKENS:
        raise RecallError(f"max_tokens must be between {MIN_MAX_TOKENS} and {MAX_MAX_TOKENS}, not {max_tokens}")
    check_cursor(cursor)
    count = boundary_count(session)
    if last > count:
        plural = "y" if count == 1 else "ies"
        raise BoundaryNotFound(f"session {session.id} has {count} boundar{plural}; there is no boundary {last}")
    mode = "query" if query is not None else "last"
    label = f"{first}..{last}"
    with session.db.read() as db:
        lo = _boundary_seq(db, session.id, first - 1)
        hi = _boundary_seq(db, session.id, last)
        page = _Page(max(MIN_PAGE_TOKENS, max_tokens - _note_reserve(label, mode, query)))
        needle = query.casefold() if query is not None else None
        bound = hi if cursor is None else min(hi, cursor)
        n = FIRST_ROWS
        done = False
        while not done:
            params: dict[str, Any] = {"id": session.id, "lo": lo, "hi": bound, "no": False, "n": n}
            extra = ""
            if query is not None:
                params["like"] = _like_pattern(query)
                extra = f" AND {like_clause(db, params['like'])}"
            batch = db.all(f"{_RANGE_SQL}{extra} ORDER BY m.seq DESC LIMIT :n", params)
            for r in batch:
                row = _Row(int(r[0]), False, int(r[0]), r[1], r[2], r[4] or r[3], r[5])
                text = render_message(row)
                if needle is not None:
                    found = text.casefold().find(needle)
                    if found < 0:
                        continue
                    text = _excerpt(text, found, len(needle))
                if not page.offer(row, text, force=True):
                    done = True
                    break
            if len(batch) < n:
                break
            bound = int(batch[-1][0])
            n = min(n * 2, PAGE_ROWS)
        shown = sorted(page.shown, key=lambda item: item[0].key)
        # Counted by the seq index alone (no text match): a query's note says older messages *may* match.
        params = {"id": session.id, "lo": lo, "hi": hi, "no": False}
        size = int(db.one(f"SELECT COUNT(*) FROM ({_RANGE_SQL}) c", params)[0])
        oldest = shown[0][0].seq if shown else (min(hi, cursor) if cursor is not None else hi)
        earlier = int(db.one(f"SELECT COUNT(*) FROM ({_RANGE_SQL} AND m.seq < :k) c", {**params, "k": oldest})[0])
    next_cursor = shown[0][0].seq if shown and earlier else None
    text = _render(label, mode, query, shown, size, earlier, 0, next_cursor)
    messages = [RecalledMessage(r.seq, r.uuid, r.role, cost, r.replaced, cut) for r, _, cost, cut in shown]
    return Recall(
        session.id,
        last,
        f"range-{mode}",
        text,
        messages,
        size,
        earlier,
        0,
        next_cursor,
        estimate_text(text),
        first_boundary=first,
    )


def _boundary_seq(db: "Database", session_id: str, ordinal: int) -> int:
    """The seq of boundary `ordinal` (0 before the first one)."""
    if ordinal < 1:
        return 0
    row = db.one(
        "SELECT boundary_seq FROM compactions WHERE session_id = :id AND ordinal = :k", {"id": session_id, "k": ordinal}
    )
    return int(row[0])


def check_cursor(cursor: Any) -> None:
    """RecallError unless `cursor` is None or a view key as next_cursor gives them."""
    if cursor is not None and (
        isinstance(cursor, bool) or not isinstance(cursor, int) or not -MAX_CURSOR < cursor < MAX_CURSOR
    ):
        raise RecallError(f"{cursor!r} is not a cursor: pass the next_cursor of the previous call")


def _boundary_version(session: "Session", boundary: int | None) -> tuple[int, int]:
    """(index, replaced view version) of the boundary asked for (the latest when None); two indexed reads."""
    params = {"id": session.id}
    count = boundary_count(session)
    if not count:
        raise BoundaryNotFound(f"session {session.id} has no compaction boundary to recall from")
    index = count if boundary is None else boundary
    if not 1 <= index <= count:
        plural = "y" if count == 1 else "ies"
        raise BoundaryNotFound(f"session {session.id} has {count} boundar{plural}; there is no boundary {index}")
    row = session.db.one(
        "SELECT replaced_version FROM compactions WHERE session_id = :id AND ordinal = :k", {**params, "k": index}
    )
    return index, int(row[0])


class _Scope:
    """The rows of one past view, read page by page inside a snapshot."""

    def __init__(self, db: "Database", session_id: str, version: int):
        self.db = db
        self.params: dict[str, Any] = {"id": session_id, "v": version}

    def count(self, extra: str = "", key: int | None = None) -> int:
        row = self.db.one(f"{_COUNT_SQL} {extra}", {**self.params, "k": key})
        return int(row[0])

    def rows(
        self, *, before: int | None = None, after: int | None = None, like: str | None = None, first: int = FIRST_ROWS
    ) -> Iterator[_Row]:
        """Rows with key < before (newest first) or key > after (oldest first), in growing batches."""
        descending = after is None
        bound = before if descending else after
        n = max(1, min(first, PAGE_ROWS))
        while True:
            clauses, params = [], dict(self.params, n=n)
            if bound is not None:
                clauses.append("AND v.key < :k" if descending else "AND v.key > :k")
                params["k"] = bound
            if like is not None:
                clauses.append(f"AND {like_clause(self.db, like)}")
                params["like"] = like
            order = "DESC" if descending else "ASC"
            batch = self.db.all(f"{_ROW_SQL} {' '.join(clauses)} ORDER BY v.key {order} LIMIT :n", params)
            for r in batch:
                kind = "compact summary" if r[8] else r[6] or r[5]
                yield _Row(int(r[0]), bool(r[1]), int(r[2]), r[3], r[4], kind, r[7])
            if len(batch) < n:
                return
            bound = int(batch[-1][0])
            n = min(n * 2, PAGE_ROWS)

    def key_of(self, uuid: str) -> int:
        row = self.db.one(
            "SELECT v.key FROM view_entries v JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq "
            "WHERE v.session_id = :id AND v.valid_from <= :v AND (v.valid_to IS NULL OR v.valid_to > :v) "
            "AND m.uuid = :uuid",
            {**self.params, "uuid": uuid},
        )
        if row is None:
            raise MessageNotFound(f"message {uuid!r} is not in the view before this boundary")
        return int(row[0])


def _fill_backwards(scope: _Scope, page: _Page, query: str | None, cursor: int | None) -> None:
    """The newest rows (matching `query` when given) before `cursor` that fit the budget."""
    needle = query.casefold() if query is not None else None
    like = _like_pattern(query) if query is not None else None
    for row in scope.rows(before=cursor, like=like):
        text = render_message(row)
        if needle is not None:
            found = text.casefold().find(needle)
            if found < 0:
                continue
            text = _excerpt(text, found, len(needle))
        if not page.offer(row, text, force=True):
            return


def _fill_around(scope: _Scope, page: _Page, uuid: str) -> None:
    """The message `uuid`, then its neighbours alternately before and after, while they fit."""
    key = scope.key_of(uuid)
    target = next(scope.rows(after=key - 1))
    page.offer(target, render_message(target), force=True)
    sides = [scope.rows(before=key), scope.rows(after=key)]
    while sides:
        for side in list(sides):
            row = next(side, None)
            if row is None or not page.offer(row, render_message(row)):
                sides.remove(side)


def like_clause(db: "Database", pattern: str) -> str:
    """The case-insensitive match of `m.content_json` against `:like` (a `_like_pattern`).

    SQLite's LIKE folds ASCII letters only. PostgreSQL's ILIKE under the database's locale lowers
    every character of every row it scans (a range recall reads megabytes); for an ASCII pattern
    the "C" collation folds ASCII letters only, as SQLite does, at about a third of the cost.
    """
    if db.is_sqlite:
        return "unpacked(m.content_json) LIKE :like ESCAPE '!'"
    if pattern.isascii():
        return "m.content_json COLLATE \"C\" ILIKE :like ESCAPE '!'"
    return "m.content_json ILIKE :like ESCAPE '!'"


def _like_pattern(query: str) -> str:
    """A LIKE pattern matching the query as it appears inside stored content JSON."""
    escaped = dumps(query)[1:-1]
    for char in ("!", "%", "_"):
        escaped = escaped.replace(char, "!" + char)
    return f"%{escaped}%"


def render_message(row: _Row) -> str:
    """One message as recall shows it: a header line, then its blocks as text."""
    kind = "" if row.kind == row.role else f" ({row.kind})"
    header = f"--- #{row.seq} {row.role}{kind} uuid={row.uuid}"
    if row.replaced:
        header += " (cleared or spilled in that view; original shown)"
    return f"{header} ---\n{content_as_text(loads_stored(row.content_json))}"


def content_as_text(content: Any) -> str:
    """Message content as plain text: text, tool calls with their input, tool results, placeholders."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(_block_text(block) for block in content if isinstance(block, dict))


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("tool_use", "server_tool_use"):
        tool_input = json.dumps(block.get("input"), ensure_ascii=False)
        return f"[tool_use {block.get('name')} id={block.get('id')}] {tool_input}"
    if kind == "tool_result":
        flag = " error" if block.get("is_error") else ""
        return f"[tool_result{flag} for {block.get('tool_use_id')}]\n{content_as_text(block.get('content'))}"
    if kind == "thinking":
        return f"[thinking] {block.get('thinking', '')}"
    return f"[{kind}]"


def _excerpt(text: str, at: int, length: int) -> str:
    """The header line and a window of the text around a match, when the text is long."""
    if len(text) <= EXCERPT_CHARS:
        return text
    header, _, _ = text.partition("\n")
    start = max(len(header) + 1, at - EXCERPT_CHARS // 2)
    end = min(len(text), start + EXCERPT_CHARS + length)
    lead = "[…] " if start > len(header) + 1 else ""
    tail = " […]" if end < len(text) else ""
    return f"{header}\n{lead}{text[start:end]}{tail}"


def _cut_to(text: str, tokens: int) -> str:
    """`text` shortened to about `tokens` tokens, with a marker saying how much was cut."""
    chars = max(tokens, 1) * 3
    while chars > 0 and estimate_text(text[:chars]) > tokens - 20:
        chars = int(chars * 0.8)
    return f"{text[:chars]}\n[… {len(text) - chars:,} more characters of this message not shown]"


def _render(
    index: int | str,
    mode: str,
    query: str | None,
    shown: list[tuple[_Row, str, int, bool]],
    size: int,
    earlier: int,
    later: int,
    next_cursor: int | None,
) -> str:
    """The recalled messages followed by one note: what was shown, what was left out, how to page on."""
    body = "\n\n".join(text for _, text, _, _ in shown)
    what = {
        "last": "the last messages",
        "query": f"messages matching {_clip(query)!r}",
        "around": "messages around one",
    }[mode]
    where = f"view before boundary {index}" if isinstance(index, int) else f"messages of boundaries {index}"
    if shown:
        note = (
            f"[recall: {where}, {what}: {len(shown)} shown "
            f"(#{shown[0][0].seq}–#{shown[-1][0].seq}) of {size} in that view"
        )
    else:
        note = f"[recall: {where}, {what}: none found among {earlier} messages searched"
    if shown and mode == "query" and earlier:
        note += f"; {earlier} older messages may hold more matches"
    elif shown and mode != "query" and (earlier or later):
        note += f"; {earlier} earlier and {later} later left out"
    if next_cursor is not None:
        again = f"query={_clip(query)!r}, " if mode == "query" else ""
        note += f"; for earlier ones call recall(boundary={index!r}, {again}cursor={next_cursor})"
    note += "]"
    return f"{body}\n\n{note}" if body else note


def _note_reserve(index: int | str, mode: str, query: str | None) -> int:
    """Tokens the closing note can take at most: the note rendered with the largest figures it can hold."""
    big = 10**12
    row = _Row(big, False, big, "", "", "", "")
    note = _render(index, mode, query, [(row, "", 0, False), (row, "", 0, False)], big, big, big, big)
    return estimate_text(note) + 4


def _clip(query: str | None) -> str:
    """The query as a note repeats it: at most NOTE_QUERY_CHARS characters."""
    text = query or ""
    return text if len(text) <= NOTE_QUERY_CHARS else text[: NOTE_QUERY_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class ViewPageEntry:
    """One entry of a paged past view, its text cut to a preview."""

    seq: int
    uuid: str
    role: str
    kind: str
    replaced_in_view: bool
    text: str
    chars: int


def view_before_page(
    session: "Session", boundary: int, *, after: int | None = None, limit: int = 20, text_chars: int = 2_000
) -> tuple[list[ViewPageEntry], int | None, int]:
    """One page of the view before `boundary`, oldest first: (entries, next cursor, view size)."""
    if not 1 <= limit <= 500:
        raise RecallError(f"limit must be between 1 and 500, not {limit}")
    check_cursor(after)
    index, version = _boundary_version(session, boundary)
    with session.db.read() as db:
        scope = _Scope(db, session.id, version)
        rows = []
        for row in scope.rows(after=after if after is not None else -MAX_CURSOR, first=limit + 1):
            rows.append(row)
            if len(rows) > limit:
                break
        size = scope.count()
    more = len(rows) > limit
    rows = rows[:limit]
    entries = []
    for row in rows:
        text = content_as_text(loads_stored(row.content_json))
        shown = text if len(text) <= text_chars else text[:text_chars] + f" […{len(text) - text_chars:,} more chars]"
        entries.append(ViewPageEntry(row.seq, row.uuid, row.role, row.kind, row.replaced, shown, len(text)))
    return entries, (rows[-1].key if more and rows else None), size
