"""`sessionstore mcp`: a read-only MCP server so any agent can look up its own or another session's past.

Tools: list_sessions, history (a session's boundaries), view_before (the view
before boundary K, paged), recall (exact earlier messages within a token
budget), spill_cat (a spilled tool result, chunk by chunk) and search (full
text over every message ever recorded). Every result is bounded in size and
pages with an opaque cursor (`next_cursor`, None when done). Nothing recorded
is written: the server's store is opened read-only (a SQLite `query_only`
connection, PostgreSQL transactions that are all READ ONLY), so a write fails
by construction; only search's derived index catches up at query time, through
a second connection that may write the index tables and nothing else. Stdout is the JSON-RPC wire, so
nothing else is printed there.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from contextlib import contextmanager
from typing import Annotated, Any, Iterator, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.read.history import boundaries, boundary_count
from sessionstore.storage.read.recall import DEFAULT_MAX_TOKENS, MAX_CURSOR, recall, view_before_page
from sessionstore.storage.write.spill import spill_original
from sessionstore.storage.store import SessionStore

SERVER_NAME = "sessionstore"
INSTRUCTIONS = (
    "Read-only access to recorded coding-agent sessions, including everything compaction summarized away. "
    "list_sessions finds a session; history lists its compaction boundaries; recall reads the exact messages "
    "before boundary K (last ones, a query, or around a uuid); view_before pages through that whole view; "
    "spill_cat reads a spilled tool result; search finds any message ever recorded. Page on with next_cursor."
)
MAX_SESSIONS_PAGE = 100
MAX_VIEW_PAGE = 50
MAX_BOUNDARIES_PAGE = 50
MAX_RECALL_TOKENS = 8_000
SPILL_CHUNK_BYTES = 16_000
MAX_SEARCH_PAGE = 50
#: Pages of search re-run the ranked query with a larger limit, so paging stops this deep.
MAX_SEARCH_DEPTH = 500
SUMMARY_PREVIEW_CHARS = 600
#: Missing facts listed per kind in a boundary's gate report (the counts say how many there were).
GATE_ITEMS = 5
#: A boundary as the recall tool takes it in a string: K, or a range A..B.
BOUNDARY_PATTERN = r"^\s*[0-9]+(\.\.[0-9]+)?\s*$"
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class SessionInfo(BaseModel):
    id: str
    title: str | None
    cwd: str | None
    model: str | None
    messages: int
    view_tokens: int
    updated_at: float


class SessionsPage(BaseModel):
    sessions: list[SessionInfo]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null when done.")


class BoundaryInfo(BaseModel):
    index: int = Field(description="Boundary number K, from 1 (oldest).")
    kind: str
    trigger: str
    timestamp: str | None
    pre_tokens: int
    post_tokens: int
    messages_summarized: int
    summarizer: str | None
    summary_preview: str | None
    facts_gate: dict[str, Any] | None = Field(description="What the facts gate checked and added, per kind.")


class BoundariesPage(BaseModel):
    session: str
    boundaries: list[BoundaryInfo]
    next_cursor: str | None


class ViewEntryInfo(BaseModel):
    seq: int
    uuid: str
    role: str
    kind: str
    replaced_in_view: bool = Field(description="The view showed a cleared or spilled form; text is the original.")
    text: str = Field(description="The message as text, cut to a preview when long (chars says how long).")
    chars: int


class ViewPage(BaseModel):
    session: str
    boundary: int
    view_size: int
    entries: list[ViewEntryInfo]
    next_cursor: str | None


class RecallResult(BaseModel):
    session: str
    boundary: int = Field(description="Boundary K, or B of a range A..B.")
    first_boundary: int | None = Field(default=None, description="A of a range A..B; null for one boundary.")
    mode: str
    text: str = Field(description="The exact messages, then a note on what was left out and how to page on.")
    view_size: int
    earlier: int
    later: int
    next_cursor: str | None


class SpillChunk(BaseModel):
    tool_use_id: str
    offset: int
    total_bytes: int
    text: str
    next_cursor: str | None


@contextmanager
def _reading(lock: threading.Lock) -> Iterator[None]:
    """One tool's store access: serialized (one connection), expected errors sent to the model."""
    with lock:
        try:
            yield
        except SessionStoreError as exc:
            raise ToolError(" ".join(str(exc).split())) from exc


class SearchHit(BaseModel):
    session: str
    title: str | None
    cwd: str | None
    seq: int
    uuid: str
    role: str
    timestamp: str | None
    snippet: str = Field(description="The text around the first match, matches marked «like this».")
    boundary: int | None = Field(description="The boundary that replaced the message; null while in the active view.")
    open: str = Field(description="The CLI command that shows the message where it lives.")
    recall: str | None = Field(description="The recall call that reads it with its neighbours (compacted hits).")


class SearchPage(BaseModel):
    hits: list[SearchHit]
    next_cursor: str | None


def encode_cursor(tool: str, value: Any) -> str:
    """An opaque cursor that only the same tool accepts back."""
    raw = json.dumps({"t": tool, "v": value}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(tool: str, cursor: str | None, *, floor: int = 0) -> int | None:
    """The position inside a cursor from `tool` (an int from `floor` up); ToolError for anything else."""
    if cursor is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ToolError(f"not a cursor of {tool}: pass the next_cursor it returned") from None
    if not isinstance(data, dict) or data.get("t") != tool:
        raise ToolError(f"not a cursor of {tool}: pass the next_cursor it returned")
    value = data.get("v")
    if isinstance(value, bool) or not isinstance(value, int) or not floor <= value < MAX_CURSOR:
        raise ToolError(f"not a cursor of {tool}: pass the next_cursor it returned")
    return value


def _bounded_gate(report: Any) -> Any:
    """A facts-gate report with at most GATE_ITEMS missing facts listed per kind (the counts stay whole)."""
    if not isinstance(report, dict) or not isinstance(report.get("missing_items"), dict):
        return report
    items = {
        kind: list(facts[:GATE_ITEMS]) if isinstance(facts, list) else facts
        for kind, facts in report["missing_items"].items()
    }
    return {**report, "missing_items": items}


def build_server(store: SessionStore) -> MCPServer:
    """The MCP server over one open store; tools share it under a lock (one DB connection)."""
    # WARNING: a tool error is the model's answer (a tool result), not a multi-line INFO log on stderr.
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    lock = threading.Lock()

    def reading() -> Any:
        return _reading(lock)

    @server.tool(annotations=READ_ONLY)
    def list_sessions(
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_SESSIONS_PAGE)] = 20,
    ) -> SessionsPage:
        """Recorded sessions, most recently updated first."""
        offset = int(decode_cursor("list_sessions", cursor) or 0)
        with reading():
            rows = store.list(limit=limit + 1, offset=offset)
        more = len(rows) > limit
        sessions = [
            SessionInfo(
                id=r["id"],
                title=r["title"],
                cwd=r["cwd"],
                model=r["model"],
                messages=r["messages"],
                view_tokens=r["view_tokens"],
                updated_at=r["updated_at"],
            )
            for r in rows[:limit]
        ]
        return SessionsPage(
            sessions=sessions, next_cursor=encode_cursor("list_sessions", offset + limit) if more else None
        )

    @server.tool(annotations=READ_ONLY)
    def history(
        session: Annotated[str, Field(description="Session id or a unique prefix.")],
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_BOUNDARIES_PAGE)] = 20,
    ) -> BoundariesPage:
        """The compaction boundaries of a session, oldest first, with a preview of each summary."""
        start = int(decode_cursor("history", cursor) or 0)
        with reading():
            s = store.get(session)
            page = boundaries(s, offset=start, limit=limit, summaries=False)
            total = boundary_count(s)
        items = [
            BoundaryInfo(
                index=b.index,
                kind=b.kind,
                trigger=b.trigger,
                timestamp=b.timestamp,
                pre_tokens=b.pre_tokens,
                post_tokens=b.post_tokens,
                messages_summarized=b.messages_summarized,
                summarizer=b.summarizer,
                summary_preview=_clip(b.summary_preview, SUMMARY_PREVIEW_CHARS),
                facts_gate=_bounded_gate(b.metadata.get("facts_gate")),
            )
            for b in page
        ]
        more = start + limit < total
        return BoundariesPage(
            session=s.id, boundaries=items, next_cursor=encode_cursor("history", start + limit) if more else None
        )

    @server.tool(annotations=READ_ONLY)
    def view_before(
        session: Annotated[str, Field(description="Session id or a unique prefix.")],
        boundary: Annotated[int, Field(ge=1, description="Boundary number K (see history).")],
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_VIEW_PAGE)] = 20,
    ) -> ViewPage:
        """What the model saw just before boundary K, oldest first, one page of messages at a time."""
        after = decode_cursor("view_before", cursor, floor=1 - MAX_CURSOR)
        with reading():
            s = store.get(session)
            entries, next_key, size = view_before_page(s, boundary, after=after, limit=limit)
        return ViewPage(
            session=s.id,
            boundary=boundary,
            view_size=size,
            entries=[
                ViewEntryInfo(
                    seq=e.seq,
                    uuid=e.uuid,
                    role=e.role,
                    kind=e.kind,
                    replaced_in_view=e.replaced_in_view,
                    text=e.text,
                    chars=e.chars,
                )
                for e in entries
            ],
            next_cursor=encode_cursor("view_before", next_key) if next_key is not None else None,
        )

    @server.tool(name="recall", annotations=READ_ONLY)
    def recall_tool(
        session: Annotated[str, Field(description="Session id or a unique prefix.")],
        boundary: Annotated[
            Annotated[int, Field(ge=1)] | Annotated[str, Field(pattern=BOUNDARY_PATTERN)] | None,
            Field(
                description="Boundary number K (default the latest), or a range 'A..B' as a summary's condensed "
                "references name it (`recall -b 3..40 --query PATH`): the messages recorded from boundary A-1 "
                "to boundary B."
            ),
        ] = None,
        query: Annotated[str | None, Field(description="Only messages containing this text.")] = None,
        around_uuid: Annotated[str | None, Field(description="This message and its neighbours.")] = None,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous call.")] = None,
        max_tokens: Annotated[int, Field(ge=100, le=MAX_RECALL_TOKENS)] = DEFAULT_MAX_TOKENS,
    ) -> RecallResult:
        """The exact messages from before a compaction, as text within a token budget.

        `boundary` takes K or a range 'A..B' (a summary's `recall -b A..B --query FACT` reference).
        """
        key = decode_cursor("recall", cursor, floor=1 - MAX_CURSOR)
        with reading():
            s = store.get(session)
            found = recall(s, boundary, query=query, around_uuid=around_uuid, max_tokens=max_tokens, cursor=key)
        return RecallResult(
            session=found.session,
            boundary=found.boundary,
            first_boundary=found.first_boundary,
            mode=found.mode,
            text=found.text,
            view_size=found.view_size,
            earlier=found.earlier,
            later=found.later,
            next_cursor=encode_cursor("recall", found.next_cursor) if found.next_cursor is not None else None,
        )

    @server.tool(annotations=READ_ONLY)
    def spill_cat(
        session: Annotated[str, Field(description="Session id or a unique prefix.")],
        tool_use_id: Annotated[str, Field(description="The tool_use id whose result was spilled.")],
        cursor: Annotated[str | None, Field(description="next_cursor of the previous chunk.")] = None,
    ) -> SpillChunk:
        """The original of a spilled tool result, one chunk of text at a time."""
        offset = int(decode_cursor("spill_cat", cursor) or 0)
        with reading():
            data = spill_original(store.get(session), tool_use_id)
        end = min(len(data), offset + SPILL_CHUNK_BYTES)
        while end < len(data) and (data[end] & 0xC0) == 0x80:
            end -= 1
        return SpillChunk(
            tool_use_id=tool_use_id,
            offset=offset,
            total_bytes=len(data),
            text=data[offset:end].decode("utf-8", "replace"),
            next_cursor=encode_cursor("spill_cat", end) if end < len(data) else None,
        )

    _add_search(server, store, reading)
    return server


def _add_search(server: MCPServer, store: SessionStore, reading: Any) -> None:
    """The search tool over the store's full-text search (sessionstore.storage.derived.search)."""

    @server.tool(annotations=READ_ONLY)
    def search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                description="Words (all must match, as substrings, any case) "
                'and "exact phrases"; every message ever recorded, compacted ones included.',
            ),
        ],
        session: Annotated[str | None, Field(description="Only this session (id or unique prefix).")] = None,
        role: Annotated[
            Literal["user", "assistant", "tool", "summary", "system"] | None,
            Field(description="Only this kind of message."),
        ] = None,
        since: Annotated[str | None, Field(description="Only newer messages: an ISO date or 30m, 12h, 7d, 2w.")] = None,
        cwd: Annotated[str | None, Field(description="Only sessions with this working directory.")] = None,
        place: Annotated[
            Literal["all", "active", "compacted"],
            Field(description="all, only the active views, or only what compaction replaced."),
        ] = "all",
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_PAGE)] = 10,
    ) -> SearchPage:
        """Full-text search; each hit says where the message lives now and how to read it back."""
        offset = int(decode_cursor("search", cursor) or 0)
        if offset + limit > MAX_SEARCH_DEPTH:
            raise ToolError(f"search pages stop at {MAX_SEARCH_DEPTH} hits: narrow the query or the filters")
        filters = {"session": session, "role": role, "since": since, "cwd": cwd}
        with reading():
            if session is not None:
                filters["session"] = store.get(session).id
            found = store.search(
                query, in_=place, limit=offset + limit + 1, **{k: v for k, v in filters.items() if v is not None}
            )
        hits = [_search_hit(h) for h in found[offset : offset + limit]]
        more = len(found) > offset + limit
        return SearchPage(hits=hits, next_cursor=encode_cursor("search", offset + limit) if more else None)


def _search_hit(hit: Any) -> SearchHit:
    """A store hit as the tool returns it, with the recall call that reads it in context."""
    how = (
        f"recall(session={hit.session!r}, boundary={hit.boundary}, around_uuid={hit.uuid!r})"
        if hit.boundary is not None
        else None
    )
    return SearchHit(
        session=hit.session,
        title=hit.title,
        cwd=hit.cwd,
        seq=hit.seq,
        uuid=hit.uuid,
        role=hit.role,
        timestamp=hit.timestamp,
        snippet=hit.snippet,
        boundary=hit.boundary,
        open=hit.open,
        recall=how,
    )


def _clip(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + "…"


def serve(url: str | None) -> None:
    """Run the server on stdio until the client disconnects."""
    store = SessionStore.open(url, read_only=True)
    try:
        build_server(store).run()
    finally:
        store.close()
