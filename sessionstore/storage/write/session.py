"""A session handle: append messages, read the active view, stream the transcript.

The view is cached per handle and kept current in O(new messages): each read
first checks the session row (one indexed lookup); only a rewrite by someone
else forces a reload. The cache takes one of two forms, built on demand:
the view's rows as (role, content JSON) pairs, all that `active_view()` needs
and the cheapest to load on resume; or full `ViewEntry` objects, for the
compaction code that inspects envelopes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ..core.errors import DuplicateUuid, InvalidMessage, ReadOnlySession, StoreBusy
from ..core.faults import fault_in
from ..core.gcpause import gc_paused
from ..records.rows import (
    MESSAGE_INSERT_COLUMNS,
    MESSAGE_COLUMNS,
    dumps,
    iter_message_rows,
    message_row,
    stored_from_new,
    stored_from_row,
)
from ..codecs.tokens import estimate_content
from ..core.types import StoredMessage, ViewEntry
from ..records.validate import NewMessage, TailState, check_encodable, normalize
from ..records.view import api_messages_from_json, to_api_messages
from ..records.state import ViewSnapshot, ViewState, entries_for_rows, load_state

if TYPE_CHECKING:
    from ..engine.db import Database
    from .pins import Pin
    from ..store import SessionStore

TRANSCRIPT_BATCH = 500


class Session:
    """One conversation: its transcript, its active view and the writes that change them."""

    def __init__(self, store: "SessionStore", row: dict[str, Any]):
        self.store = store
        self.id: str = row["id"]
        self.title: str | None = row.get("title")
        self.cwd: str | None = row.get("cwd")
        self.model: str | None = row.get("model")
        self.context_window: int = int(row["context_window"])
        self.created_at: float = float(row["created_at"])
        self.parent_id: str | None = row.get("parent_id")
        self.metadata: dict[str, Any] = dict(row.get("metadata") or {})
        #: Whose session it is (PostgreSQL role; 'local' on SQLite) and the host it was captured on.
        self.owner: str | None = row.get("owner")
        self.host: str | None = row.get("host")
        self._state: ViewState | None = None
        self._entries: list[ViewEntry] | None = None
        self._cached_at: tuple[int, int] | None = None
        self._texts: list[tuple[str, str]] | None = None
        self._texts_at: tuple[int, int] | None = None

    def __repr__(self) -> str:
        return f"<Session {self.id} {self.title!r}>"

    @property
    def db(self) -> "Database":
        return self.store.db

    # ----------------------------------------------------------------- writes

    def append(self, message: Any, *, pinned: bool = False, allow_unknown_blocks: bool = False) -> StoredMessage:
        """Record one message (one transaction); returns it with its seq and uuid.

        `pinned=True` (or `"metadata": {"pinned": true}` in the message) also pins it in the same
        transaction: it is carried verbatim through every compaction. A pin over the session's pin
        budget raises `PinBudgetExceeded` and nothing is written. Block types the store does not know
        are kept verbatim on an API response (an SDK message, or a dict with its `id` and `model`);
        on a hand-written message only with `allow_unknown_blocks=True`.
        """
        if pinned or _asks_pin(message):
            return self._append_pinned([message], [0], allow_unknown_blocks)[0]
        return self.append_many([message], allow_unknown_blocks=allow_unknown_blocks)[0]

    def become(self, other: "Session") -> None:
        """Make this object stand for `other` (an imported session's local continuation takes its writes)."""
        self.__dict__.update(other.__dict__)

    def before_local_write(self) -> None:
        """An imported (source-side) session's writes go to its local continuation: see `continuation`."""
        if self.metadata.get("imported_from"):
            from .continuation import before_local_write

            before_local_write(self)

    def pin(self, uuid: str) -> "Pin":
        """Pin a recorded message: carried verbatim through every compaction, within the pin budget."""
        from .pins import pin

        return pin(self, uuid)

    def unpin(self, uuid: str) -> bool:
        """Unpin a message; False when it was not pinned."""
        from .pins import unpin

        return unpin(self, uuid)

    def pins(self) -> list["Pin"]:
        """The pinned messages, oldest first."""
        from .pins import list_pins

        return list_pins(self)

    def _append_pinned(
        self, messages: list[Any], pinned: list[int], allow_unknown_blocks: bool = False
    ) -> list[StoredMessage]:
        """Append messages and pin those at the `pinned` places, in one transaction under the session lock.

        Every pin is checked against the budget with the ones before it in the batch counted: one over
        it raises `PinBudgetExceeded` and nothing of the batch is written.
        """
        from .pins import insert_pin, pin_cost, pin_text, pins_budget

        self.before_local_write()
        batch = _normalize_all(messages, allow_unknown_blocks)
        if len(batch) > 1:
            _check_batch_uuids(batch)
        if any(m.compaction for m in batch):
            from .apicompaction import is_api_boundary

            if any(is_api_boundary(m) for m in batch):
                raise InvalidMessage("a batch holding the API's compaction cannot also pin messages; pin them after")
        prepared = [(m, _encoded_json(m), estimate_content(m.content)) for m in batch]
        costs = []
        for i in pinned:
            text = pin_text(batch[i].content)
            if not text:
                where = f"message {i + 1}: " if len(batch) > 1 else ""
                raise InvalidMessage(f"{where}a pinned message needs text to carry")
            costs.append((i, pin_cost(text)))
        budget = pins_budget(self)

        def body(db: "Database") -> tuple[ViewState, list[TailState]]:
            state, tails = self._append_locked(db, prepared)
            for i, cost in costs:
                insert_pin(db, self.id, state.last_seq + i + 1, batch[i].uuid, cost, budget)
            return state, tails

        self._state = None
        point = "append" if len(prepared) == 1 else "append_many"
        state, tails = self.db.run_write(body, session_id=self.id, point=point)
        return self._appended(state, tails, prepared)

    def append_many(self, messages: Iterable[Any], *, allow_unknown_blocks: bool = False) -> list[StoredMessage]:
        """Record several messages in one transaction: all of them or none.

        Optimistic first: the rows are validated against the cached state and written by one
        guarded INSERT, which writes nothing if a rewrite changed the view meanwhile or another
        append took the seq. Then, once, the pessimistic way: lock the session, re-read, validate, write.
        A message whose metadata says `"pinned": true` is pinned as `append(..., pinned=True)` does, in the
        same transaction; a pin over the budget raises `PinBudgetExceeded` and none of the batch is written.
        """
        messages = list(messages) if not isinstance(messages, list) else messages
        pinned = [i for i, m in enumerate(messages) if _asks_pin(m)]
        if pinned:
            return self._append_pinned(messages, pinned, allow_unknown_blocks)
        self.before_local_write()
        batch = _normalize_all(messages, allow_unknown_blocks)
        if not batch:
            return []
        if len(batch) > 1:
            _check_batch_uuids(batch)
        prepared = [(m, _encoded_json(m), estimate_content(m.content)) for m in batch]
        if any(m.compaction for m in batch):
            from .apicompaction import is_api_boundary

            if any(is_api_boundary(m) for m in batch):
                return self._append_with_api_boundaries(prepared)
        state, rows, tails = self._validated(self.db, prepared, self._state)
        point = "append" if len(prepared) == 1 else "append_many"
        try:
            written = self.db.run_write(
                lambda db: _insert_checked(db, self.id, state.view_version, rows),
                point=point,
                single_statement=len(rows) == 1,
            )
        except (_LostRace, ReadOnlySession):
            # A session shared with this role is written as its owner's, under the session lock.
            written = False
        if not written:
            self._state = None
            state, tails = self.db.run_write(
                lambda db: self._append_locked(db, prepared), session_id=self.id, point=point
            )
        return self._appended(state, tails, prepared)

    def _append_with_api_boundaries(self, prepared: list[tuple[NewMessage, str, int]]) -> list[StoredMessage]:
        """A batch holding the API's compaction(s): in one transaction, the messages before each one appended,
        each compaction message committed as a boundary (`apicompaction`), the messages after it appended."""
        from .apicompaction import APPEND_POINT, apply_api_compaction, is_api_boundary

        def body(db: "Database") -> list[int]:
            load_state(db, self.id, for_update=True)
            seqs: list[int] = []
            run: list[tuple[NewMessage, str, int]] = []
            for item in [*prepared, None]:
                if item is not None and not is_api_boundary(item[0]):
                    run.append(item)
                    continue
                if run:
                    state, _ = self._append_locked(db, run)
                    seqs.extend(range(state.last_seq + 1, state.last_seq + 1 + len(run)))
                    run = []
                if item is not None:
                    result = apply_api_compaction(db, self.id, *item)
                    seqs.append(result.added_seqs[item[0].uuid])
            return seqs

        self._state = None
        try:
            seqs = self.db.run_write(body, session_id=self.id, point=APPEND_POINT)
        finally:
            self.invalidate()
        return [stored_from_new(seq, m, t) for seq, (m, _, t) in zip(seqs, prepared, strict=True)]

    def _appended(
        self, state: ViewState, tails: list[TailState], prepared: list[tuple[NewMessage, str, int]]
    ) -> list[StoredMessage]:
        """The stored messages of a write built on `state`, with the cached view extended by them."""
        added = sum(tokens for _, _, tokens in prepared)
        new_state = ViewState(
            state.last_seq + len(prepared),
            state.base_seq,
            state.view_version,
            state.view_tokens + added,
            state.explicit_count,
            tails[-1],
        )
        stored = [stored_from_new(state.last_seq + i + 1, m, t) for i, (m, _, t) in enumerate(prepared)]
        self._after_append(new_state, stored, [cj for _, cj, _ in prepared])
        return stored

    def _append_locked(
        self, db: "Database", prepared: list[tuple[NewMessage, str, int]]
    ) -> tuple[ViewState, list[TailState]]:
        """After a lost race: validate against the state read under the session lock, then write."""
        state, rows, tails = self._validated(db, prepared, None)
        if not _insert_checked(db, self.id, state.view_version, rows):
            raise StoreBusy(f"session {self.id} changed under its own lock; nothing was written")
        return state, tails

    def _validated(
        self, db: "Database", prepared: list[tuple[NewMessage, str, int]], cached: ViewState | None
    ) -> tuple[ViewState, list[tuple[Any, ...]], list[TailState]]:
        """The state the rows build on, the rows (with the running figures) and the tail after each.

        A rejection by a cached state is checked once more against a fresh read before it is raised.
        """
        state = cached or load_state(db, self.id)
        try:
            tails = _advance(state.tail, prepared)
        except InvalidMessage:
            if cached is None:
                raise
            state = load_state(db, self.id)
            tails = _advance(state.tail, prepared)
        now = time.time()
        rows = []
        total = state.view_tokens
        for i, (m, cj, tokens) in enumerate(prepared):
            total += tokens
            rows.append(message_row(self.id, state.last_seq + i + 1, m, cj, tokens) + (total, tails[i].dumps(), now))
        return state, list(db.text_packer.pack_rows(rows)), tails

    def _after_append(self, state: ViewState, stored: list[StoredMessage], texts: list[str]) -> None:
        """Extend the cached view with what we just wrote, when it was current."""
        self._state = state
        before = (state.view_version, stored[0].seq - 1)
        if self._entries is not None and self._cached_at == before:
            pos = len(self._entries)
            for i, m in enumerate(stored):
                self._entries.append(ViewEntry(pos + i, m, m.content, m.tokens))
            self._cached_at = (state.view_version, state.last_seq)
        if self._texts is not None and self._texts_at == before:
            self._texts.extend((m.role, text) for m, text in zip(stored, texts, strict=True))
            self._texts_at = (state.view_version, state.last_seq)

    def fork(
        self, at: str | int | None = None, *, before_boundary: int | None = None, title: str | None = None
    ) -> "Session":
        """A new session whose view is this one's: right after message `at` (seq, uuid or unique uuid
        prefix), exactly before boundary `before_boundary`, or (neither) the active view.

        The fork records its lineage (`sessionstore.storage.write.fork.lineage`); a cut that would orphan a
        tool_use or split a streamed response raises `InvalidForkPoint` naming the nearest valid points.
        """
        from .fork import fork

        return Session(self.store, fork(self, at=at, before_boundary=before_boundary, title=title))

    # ------------------------------------------------------------------ reads

    def refresh_state(self) -> ViewState:
        """Re-read the session row (one indexed lookup)."""
        self._state = load_state(self.db, self.id)
        return self._state

    @property
    def view_tokens(self) -> int:
        """The running token estimate of the active view."""
        return self.refresh_state().view_tokens

    @property
    def view_version(self) -> int:
        """How many rewrites the view has had."""
        return self.refresh_state().view_version

    @property
    def last_seq(self) -> int:
        """The seq of the newest transcript message (0 when empty)."""
        return self.refresh_state().last_seq

    def active_entries(self) -> list[ViewEntry]:
        """The active view with envelopes and positions (system entries included)."""
        return list(self._current_entries())

    def snapshot(self) -> "ViewSnapshot":
        """The active view together with the state it was read at, for a later rewrite."""
        entries = list(self._current_entries())
        state = self._state
        assert state is not None
        return ViewSnapshot(entries, state.view_version, state.last_seq, state.view_tokens)

    def active_view(self) -> list[dict[str, Any]]:
        """The `messages` for `client.messages.create`: user/assistant only, merged.

        Built from the entries when this handle holds them already, else from
        the lighter (role, content JSON) rows, which is what a resume loads.
        """
        with gc_paused():
            if self._entries is not None:
                return to_api_messages(self._current_entries())
            return api_messages_from_json(self._current_texts())

    def _current_entries(self) -> list[ViewEntry]:
        """The cached view brought up to date: nothing, a tail range, or a full reload."""
        with self.db.read() as db:
            state = load_state(db, self.id)
            cached = self._cached_at
            if self._entries is None or cached is None or cached[0] != state.view_version:
                self._entries = self._load_view(db, state)
            elif cached[1] < state.last_seq:
                self._extend_view(db, cached[1], state.last_seq)
            self._state = state
            self._cached_at = (state.view_version, state.last_seq)
        self._texts = self._texts_at = None
        return self._entries

    def _current_texts(self) -> list[tuple[str, str]]:
        """The view as (role, content JSON) rows brought up to date, like _current_entries."""
        with self.db.read() as db:
            state = load_state(db, self.id)
            cached = self._texts_at
            if self._texts is None or cached is None or cached[0] != state.view_version:
                self._texts = _view_texts(db, self.id, state.base_seq, state.last_seq, explicit=True)
            elif cached[1] < state.last_seq:
                self._texts.extend(_view_texts(db, self.id, cached[1], state.last_seq, explicit=False))
            self._state = state
            self._texts_at = (state.view_version, state.last_seq)
        return self._texts

    def _load_view(self, db: "Database", state: ViewState) -> list[ViewEntry]:
        """Explicit open rows, then every message appended since the last rewrite."""
        rows = db.all(
            "SELECT seq, content_json, tokens FROM view_entries "
            "WHERE session_id = :id AND valid_to IS NULL ORDER BY key",
            {"id": self.id},
        )
        with gc_paused():
            entries = entries_for_rows(db, self.id, rows)
            self._entries = entries
            self._extend_view(db, state.base_seq, state.last_seq)
        return entries

    def _extend_view(self, db: "Database", after_seq: int, upto_seq: int) -> None:
        """Append implicit entries for messages with after_seq < seq <= upto_seq (the state read)."""
        assert self._entries is not None
        rows = db.all(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND seq > :after AND seq <= :upto "
            "ORDER BY seq",
            {"id": self.id, "after": after_seq, "upto": upto_seq},
        )
        pos = len(self._entries)
        for i, row in enumerate(rows):
            m = stored_from_row(row)
            self._entries.append(ViewEntry(pos + i, m, m.content, m.tokens))

    def invalidate(self) -> None:
        """Drop the cached view (after a rewrite through this handle)."""
        self._entries = None
        self._cached_at = None
        self._texts = None
        self._texts_at = None
        self._state = None

    def transcript(self, *, after_seq: int = 0) -> Iterator[StoredMessage]:
        """Every message ever recorded, in order, streamed in batches (constant memory)."""
        for row in iter_message_rows(self.db, self.id, after_seq, TRANSCRIPT_BATCH):
            yield stored_from_row(row)

    def message(self, uuid: str) -> StoredMessage:
        """One transcript message by uuid."""
        row = self.db.one(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = :id AND uuid = :uuid",
            {"id": self.id, "uuid": uuid},
        )
        if row is None:
            from ..core.errors import MessageNotFound

            raise MessageNotFound(f"no message {uuid!r} in session {self.id}")
        return stored_from_row(row)


def _asks_pin(message: Any) -> bool:
    """True for a message dict whose metadata says `"pinned": true`."""
    metadata = message.get("metadata") if isinstance(message, dict) else None
    return isinstance(metadata, dict) and metadata.get("pinned") is True


def _normalize_all(messages: Iterable[Any], allow_unknown_blocks: bool = False) -> list[NewMessage]:
    """normalize() each message; in a batch the error names the message by its place, counted from 1."""
    batch = list(messages) if not isinstance(messages, list) else messages
    if len(batch) == 1:
        return [normalize(batch[0], allow_unknown_blocks=allow_unknown_blocks)]
    out = []
    for i, m in enumerate(batch):
        try:
            out.append(normalize(m, allow_unknown_blocks=allow_unknown_blocks))
        except InvalidMessage as exc:
            raise type(exc)(f"message {i + 1}: {exc}") from None
    return out


def _encoded_json(msg: NewMessage) -> str:
    """The content as stored JSON; text that cannot be UTF-8 (lone surrogates) is refused here."""
    text = dumps(msg.content)
    check_encodable(text, "content")
    if msg.metadata:
        check_encodable(dumps(msg.metadata), "metadata")
    return text


def _advance(tail: TailState, prepared: list[tuple[NewMessage, str, int]]) -> list[TailState]:
    """The tail after each message, accepted in order; raises on the first invalid one."""
    new = tail.copy()
    out = []
    for i, (m, _, _) in enumerate(prepared):
        try:
            new.accept(m)
        except InvalidMessage as exc:
            if len(prepared) > 1:
                raise type(exc)(f"message {i + 1} ({m.uuid}): {exc}") from None
            raise
        out.append(new.copy() if i < len(prepared) - 1 else new)
    return out


APPEND_COLUMNS = (*MESSAGE_INSERT_COLUMNS, "view_tokens", "tail_state", "written_at")


def _guarded_insert_sql(db: "Database") -> str:
    """INSERT one appended row only while the view version is the one it was validated against.

    On PostgreSQL the session row is share-locked, so a rewrite holding it waits for the append
    (and an append waits for a rewrite, then finds the version changed and writes nothing).
    """
    mark = "?" if db.is_sqlite else "%s"
    lock = "" if db.is_sqlite else " FOR SHARE"
    return (
        f"INSERT INTO messages ({', '.join(APPEND_COLUMNS)}) "
        f"SELECT {', '.join([mark] * len(APPEND_COLUMNS))} FROM sessions "
        f"WHERE id = {mark} AND view_version = {mark}{lock}"
    )


def _version_sql(db: "Database") -> str:
    """The session's view version, share-locked on PostgreSQL until the batch commits."""
    if db.is_sqlite:
        return "SELECT view_version FROM sessions WHERE id = ?"
    return "SELECT view_version FROM sessions WHERE id = %s FOR SHARE"


def _plain_insert_sql(db: "Database") -> str:
    """INSERT one appended row (a batch, after its version check)."""
    mark = "?" if db.is_sqlite else "%s"
    return f"INSERT INTO messages ({', '.join(APPEND_COLUMNS)}) VALUES ({', '.join([mark] * len(APPEND_COLUMNS))})"


def _insert_checked(db: "Database", session_id: str, version: int, rows: list[tuple[Any, ...]]) -> bool:
    """`_insert_guarded`, then the append's fault point after its rows (when a point is armed)."""
    written = _insert_guarded(db, session_id, version, rows)
    if written and db.fault_scope:
        fault_in(db, "after_messages")
    return written


def _insert_guarded(db: "Database", session_id: str, version: int, rows: list[tuple[Any, ...]]) -> bool:
    """Write the rows if the view is still at `version`; False when it changed or a seq was taken.

    One row is one guarded statement (its own transaction). A batch runs inside a write
    transaction, so the version is checked once (the session row share-locked on PostgreSQL, the
    write lock held on SQLite) and the rows go in as one executemany: one round trip per batch
    on PostgreSQL (pipelined), not one per message.
    """
    cur = db.conn.cursor()
    try:
        if len(rows) == 1:
            cur.execute(db.cached_sql("append", _guarded_insert_sql), rows[0] + (session_id, version))
            return bool(cur.rowcount == 1)
        cur.execute(db.cached_sql("append_version", _version_sql), (session_id,))
        found = cur.fetchone()
        if found is None or int(found[0]) != version:
            raise _LostRace()
        cur.executemany(db.cached_sql("append_rows", _plain_insert_sql), rows)
    except _LostRace:
        raise
    except Exception as exc:
        if not _is_integrity_error(exc):
            raise
        if "uuid" in str(exc):
            raise DuplicateUuid(_duplicate_message(session_id, [r[2] for r in rows])) from exc
        if len(rows) > 1:
            raise _LostRace() from exc
        return False
    finally:
        cur.close()
    return True


class _LostRace(Exception):
    """Inside a batch transaction: roll back and try again from a fresh state."""


def _check_batch_uuids(batch: list[NewMessage]) -> None:
    seen: set[str] = set()
    for m in batch:
        if m.uuid in seen:
            raise DuplicateUuid(f"uuid {m.uuid!r} appears twice in the batch")
        seen.add(m.uuid)


def _is_integrity_error(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name in {"IntegrityError", "UniqueViolation"} or "unique" in str(exc).lower()


def _duplicate_message(session_id: str, uuids: list[str]) -> str:
    """The DuplicateUuid text for a single message or a batch."""
    if len(uuids) == 1:
        return f"a message with uuid {uuids[0]!r} is already in session {session_id}"
    return f"one of the {len(uuids)} uuids is already in session {session_id}"


def _view_texts(
    db: "Database", session_id: str, after_seq: int, upto_seq: int, *, explicit: bool
) -> list[tuple[str, str]]:
    """(role, content JSON) of the view's rows: the explicit open rows (when asked), then seqs in (after, upto]."""
    rows: list[tuple[str, str]] = []
    if explicit:
        rows = db.all(
            "SELECT m.role, COALESCE(v.content_json, m.content_json) FROM view_entries v "
            "JOIN messages m ON m.session_id = v.session_id AND m.seq = v.seq "
            "WHERE v.session_id = :id AND v.valid_to IS NULL ORDER BY v.key",
            {"id": session_id},
        )
    rows.extend(
        db.all(
            "SELECT role, content_json FROM messages WHERE session_id = :id AND seq > :after AND seq <= :upto "
            "ORDER BY seq",
            {"id": session_id, "after": after_seq, "upto": upto_seq},
        )
    )
    return rows
