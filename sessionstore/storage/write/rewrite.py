"""Rewrites of the active view: one transaction each, checked against a snapshot.

A rewrite is described as a plan: the entries of the new view in order, each
either an entry of the current view to keep (optionally with replaced content)
or a new message to record in the transcript and place there. Messages
appended after the snapshot follow the plan. Only rows that change are closed
and opened, so storage grows with changes, not with views times size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..core.errors import RewriteConflict, SessionStoreError
from ..codecs.fastjson import loads_stored
from ..core.faults import fault_in
from ..records.rows import MESSAGE_INSERT_COLUMNS, dumps, message_row
from ..records.state import ViewState, load_state
from ..codecs.tokens import estimate_content
from ..core.types import Content
from ..records.validate import NewMessage, TailState

if TYPE_CHECKING:
    from ..engine.db import Database
    from .session import Session

#: Gap between the sort keys of consecutive appended messages.
KEY_GAP = 1 << 16


@dataclass(frozen=True, slots=True)
class Keep:
    """Keep the current view's entry for message `seq`; `content` replaces what it shows."""

    seq: int
    content: Content | None = None
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Add:
    """Record `message` in the transcript and place it here in the new view."""

    message: NewMessage


@dataclass(slots=True)
class CompactionRecord:
    """What the `compactions` row of a rewrite that appends a boundary says."""

    kind: str
    trigger: str
    boundary_uuid: str
    summary_uuid: str | None
    #: None: every message of the replaced view up to the snapshot's last seq (an API compaction's request).
    summarized_seqs: list[int] | None
    head_uuid: str | None = None
    anchor_uuid: str | None = None
    tail_uuid: str | None = None
    custom_instructions: str | None = None
    summarizer: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Messages to pin in the same transaction, as (seq, uuid, tokens): standing instructions found
    #: by the opt-in detector; one that would go over `pins_budget` is skipped.
    pins: list[tuple[int, str, int]] = field(default_factory=list)
    pins_budget: int = 0


@dataclass(frozen=True, slots=True)
class RewriteResult:
    """The outcome of a committed rewrite."""

    view_version: int
    pre_tokens: int
    post_tokens: int
    added_seqs: dict[str, int]
    kept_after_snapshot: int
    compaction_id: int | None


@dataclass(slots=True)
class _Item:
    """One entry of the new view while keys are assigned."""

    seq: int
    tokens: int
    content_json: str | None
    key: int | None = None
    old_key: int | None = None
    old_from: int | None = None
    virtual: bool = False
    changed: bool = False


def commit_rewrite(
    session: "Session",
    *,
    base_version: int,
    snapshot_last_seq: int,
    plan: Sequence[Keep | Add],
    compaction: CompactionRecord | None = None,
    post_tokens_override: int | None = None,
    kind: str | None = None,
) -> RewriteResult:
    """Apply `plan` as the new view in one transaction, or raise RewriteConflict.

    `kind` names the rewrite for fault injection (default: the compaction's kind).
    """
    prepared: list[tuple[Keep | Add, str | None, int]] = [
        (p, dumps(p.message.content), estimate_content(p.message.content)) if isinstance(p, Add) else (p, None, 0)
        for p in plan
    ]

    def body(db: "Database") -> RewriteResult:
        return _apply(db, session.id, base_version, snapshot_last_seq, prepared, compaction)

    try:
        return session.db.run_write(body, session_id=session.id, point=rewrite_point(kind, compaction))
    finally:
        session.invalidate()


def rewrite_point(kind: str | None, compaction: CompactionRecord | None) -> str:
    """The fault-point name of a rewrite: `rewrite.<kind>`."""
    return f"rewrite.{kind or (compaction.kind if compaction is not None else 'plan')}"


def _apply(
    db: "Database",
    session_id: str,
    base_version: int,
    snapshot_last_seq: int,
    prepared: list[tuple[Keep | Add, str | None, int]],
    compaction: CompactionRecord | None,
) -> RewriteResult:
    state = load_state(db, session_id, for_update=True)
    if state.view_version != base_version:
        raise RewriteConflict(
            f"the view changed underneath this rewrite (version {base_version} -> {state.view_version}); "
            "it was abandoned, nothing was written"
        )
    current = _current_rows(db, session_id, state)
    fault_in(db, "after_locked_state")
    if compaction is not None and compaction.summarized_seqs is None:
        compaction.summarized_seqs = [i.seq for i in current if i.seq <= snapshot_last_seq]
    by_seq = {item.seq: item for item in current}
    version = state.view_version
    new_version = version + 1
    next_seq = state.last_seq
    items: list[_Item] = []
    message_rows: list[tuple[Any, ...]] = []
    added: dict[str, int] = {}
    planned_seqs: set[int] = set()
    for p, content_json, tokens in prepared:
        if isinstance(p, Keep):
            old = by_seq.get(p.seq)
            if old is None:
                raise SessionStoreError(f"message seq {p.seq} is not in the current view")
            if p.seq in planned_seqs:
                raise SessionStoreError(f"message seq {p.seq} is placed twice in the rewrite")
            planned_seqs.add(p.seq)
            if p.content is None:
                items.append(
                    _Item(
                        old.seq,
                        old.tokens,
                        old.content_json,
                        old_key=old.old_key,
                        old_from=old.old_from,
                        virtual=old.virtual,
                    )
                )
            else:
                toks = p.tokens if p.tokens is not None else estimate_content(p.content)
                items.append(
                    _Item(
                        old.seq,
                        toks,
                        dumps(p.content),
                        old_key=old.old_key,
                        old_from=old.old_from,
                        virtual=old.virtual,
                        changed=True,
                    )
                )
        else:
            assert content_json is not None, "an added message is serialized before the transaction"
            next_seq += 1
            message_rows.append(message_row(session_id, next_seq, p.message, content_json, tokens))
            added[p.message.uuid] = next_seq
            items.append(_Item(next_seq, tokens, None))
    meanwhile = [i for i in current if i.seq > snapshot_last_seq and i.seq not in planned_seqs]
    for item in meanwhile:
        planned_seqs.add(item.seq)
        items.append(
            _Item(
                item.seq,
                item.tokens,
                item.content_json,
                old_key=item.old_key,
                old_from=item.old_from,
                virtual=item.virtual,
            )
        )
    upper = (next_seq + 1) * KEY_GAP
    _assign_keys(items, upper)
    db.insert_rows("messages", MESSAGE_INSERT_COLUMNS, db.text_packer.pack_rows(message_rows))
    fault_in(db, "after_messages")
    _write_rows(db, session_id, version, new_version, current, items, planned_seqs)
    fault_in(db, "after_view_rows")
    post_tokens = sum(i.tokens for i in items)
    tail = tail_state_for(db, session_id, [(i.seq, i.content_json) for i in items])
    db.execute(
        "UPDATE sessions SET last_seq = :last, base_seq = :last, view_version = :v, view_tokens = :t, "
        "explicit_count = :n, tail_state = :tail, updated_at = :now WHERE id = :id",
        {
            "last": next_seq,
            "v": new_version,
            "t": post_tokens,
            "n": len(items),
            "tail": tail.dumps(),
            "now": time.time(),
            "id": session_id,
        },
    ).close()
    fault_in(db, "after_session_row")
    compaction_id = None
    if compaction is not None:
        db.execute("UPDATE sessions SET compact_failures = 0 WHERE id = :id", {"id": session_id}).close()
        floor = min((i.old_from for i in current if i.old_from is not None), default=version)
        compaction_id = _insert_compaction(
            db, session_id, version, floor, state.view_tokens, post_tokens, added, compaction
        )
        if compaction.pins:
            from .pins import insert_pin

            for seq, uuid, tokens in compaction.pins:
                insert_pin(db, session_id, seq, uuid, tokens, compaction.pins_budget, source="auto", refuse=False)
        fault_in(db, "after_compaction_row")
    return RewriteResult(new_version, state.view_tokens, post_tokens, added, len(meanwhile), compaction_id)


def _current_rows(db: "Database", session_id: str, state: ViewState) -> list[_Item]:
    """The current view as items: open explicit rows, then the implicit tail (virtual rows)."""
    rows = db.all(
        "SELECT key, seq, content_json, tokens, valid_from FROM view_entries "
        "WHERE session_id = :id AND valid_to IS NULL ORDER BY key",
        {"id": session_id},
    )
    items = [_Item(int(seq), int(tokens), cj, old_key=int(key), old_from=int(vf)) for key, seq, cj, tokens, vf in rows]
    tail = db.all(
        "SELECT seq, tokens FROM messages WHERE session_id = :id AND seq > :base ORDER BY seq",
        {"id": session_id, "base": state.base_seq},
    )
    items += [
        _Item(int(seq), int(tokens), None, old_key=int(seq) * KEY_GAP, old_from=state.view_version, virtual=True)
        for seq, tokens in tail
    ]
    return items


def _assign_keys(items: list[_Item], upper: int) -> None:
    """Keep old keys where order allows and content is unchanged; fill gaps for the rest."""
    last = None
    for item in items:
        if (
            item.old_key is not None
            and not item.changed
            and (last is None or item.old_key > last)
            and item.old_key < upper
        ):
            item.key = item.old_key
            last = item.key
    i = 0
    n = len(items)
    while i < n:
        if items[i].key is not None:
            i += 1
            continue
        j = i
        while j < n and items[j].key is None:
            j += 1
        low = items[i - 1].key if i > 0 else None
        high = items[j].key if j < n else upper
        assert high is not None, "the scan stops at a keyed item or at the end"
        count = j - i
        if low is None:
            for k in range(count):
                items[i + k].key = high - (count - k) * KEY_GAP
        elif high - low - 1 >= count:
            step = (high - low) // (count + 1)
            for k in range(count):
                items[i + k].key = low + step * (k + 1)
        else:
            _renumber(items)
            return
        i = j


def _renumber(items: list[_Item]) -> None:
    """No room between neighbours: give every entry a fresh evenly spaced key."""
    for index, item in enumerate(items):
        item.key = (index + 1) * KEY_GAP


def _write_rows(
    db: "Database",
    session_id: str,
    version: int,
    new_version: int,
    current: list[_Item],
    items: list[_Item],
    planned: set[int],
) -> None:
    """Close what changed or left, open what is new, materialize the implicit tail."""
    staying = {i.seq: i for i in items if i.old_key is not None and i.key == i.old_key and not i.changed}
    close: list[dict[str, Any]] = []
    insert: list[tuple[Any, ...]] = []
    for old in current:
        stays = old.seq in staying
        if old.virtual:
            insert.append(
                (
                    session_id,
                    old.old_from,
                    old.old_key,
                    old.seq,
                    None if stays else new_version,
                    old.content_json,
                    old.tokens,
                )
            )
        elif not stays:
            close.append({"id": session_id, "vf": old.old_from, "key": old.old_key, "vt": new_version})
    for item in items:
        if item.seq in staying:
            continue
        insert.append((session_id, new_version, item.key, item.seq, None, item.content_json, item.tokens))
    db.executemany(
        "UPDATE view_entries SET valid_to = :vt WHERE session_id = :id AND valid_from = :vf AND key = :key",
        close,
    )
    # Positional rows: a materialized tail is thousands of rows, and binding by name costs a lookup per value.
    db.insert_rows("view_entries", VIEW_ENTRY_COLUMNS, insert)


#: The columns of a view row, in the order `_write_rows` builds them.
VIEW_ENTRY_COLUMNS = ("session_id", "valid_from", "key", "seq", "valid_to", "content_json", "tokens")


TAIL_SCAN = 200


def tail_state_for(db: "Database", session_id: str, items: Sequence[tuple[int, str | None]]) -> TailState:
    """Tail state of a view given as (seq, replacement content json) pairs, reading at most TAIL_SCAN rows."""
    last_items = list(items[-TAIL_SCAN:])
    if not last_items:
        return TailState()
    seqs = ",".join(str(int(seq)) for seq, _ in last_items)
    rows = db.all(
        f"SELECT seq, role, api_message_id, content_json FROM messages WHERE session_id = :id AND seq IN ({seqs})",
        {"id": session_id},
    )
    by_seq = {int(r[0]): r for r in rows}
    window: list[tuple[str, str | None, Content]] = []
    for seq, replaced in last_items:
        _, role, api_id, content_json = by_seq[seq]
        if role != "system":
            window.append((role, api_id, loads_stored(replaced or content_json)))
    if len(items) > TAIL_SCAN and not any(role == "assistant" for role, _, _ in window):
        return TailState(last_role="user")
    return TailState.from_messages(window)


def _insert_compaction(
    db: "Database",
    session_id: str,
    replaced_version: int,
    view_floor: int,
    pre_tokens: int,
    post_tokens: int,
    added: dict[str, int],
    rec: CompactionRecord,
) -> int:
    """The `compactions` row linking boundary and summary to the version they replaced.

    It is numbered next in the session (`ordinal`, what `history --boundary K` looks up) and
    records the oldest valid_from of the replaced view (`view_floor`, which bounds its past-view scan).
    """
    boundary_seq = added.get(rec.boundary_uuid)
    summarized = rec.summarized_seqs or []
    if boundary_seq is None:
        raise SessionStoreError("a compaction's boundary must be a message added by the rewrite")
    params = {
        "session_id": session_id,
        "boundary_seq": boundary_seq,
        "summary_seq": added.get(rec.summary_uuid) if rec.summary_uuid else None,
        "replaced_version": replaced_version,
        "kind": rec.kind,
        "trigger": rec.trigger,
        "pre_tokens": pre_tokens,
        "post_tokens": post_tokens,
        "messages_summarized": len(summarized),
        "summarized_seqs_json": dumps(summarized),
        "head_uuid": rec.head_uuid,
        "anchor_uuid": rec.anchor_uuid,
        "tail_uuid": rec.tail_uuid,
        "custom_instructions": rec.custom_instructions,
        "summarizer": rec.summarizer,
        "created_at": time.time(),
        "metadata_json": dumps(rec.metadata),
        "view_floor": view_floor,
    }
    cols = ", ".join(params)
    vals = ", ".join(f":{k}" for k in params)
    cols += ", ordinal"
    vals += ", (SELECT COALESCE(MAX(ordinal), 0) + 1 FROM compactions WHERE session_id = :numbered_in)"
    cur = db.execute(
        f"INSERT INTO compactions ({cols}) VALUES ({vals}) RETURNING id", {**params, "numbered_in": session_id}
    )
    row = cur.fetchone()
    cur.close()
    return int(row[0])
