"""SQL for transcript rows and their conversion to `StoredMessage`.

Kept in one place so the append path, view loading, history and export all
read and write messages the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..codecs.fastjson import compact_dumps, loads_stored
from ..codecs.textpack import MessageCorrupt, TextCorrupt
from ..core.types import StoredMessage
from .validate import NewMessage

if TYPE_CHECKING:
    from ..engine.db import Database

MESSAGE_COLUMNS = (
    "seq, uuid, parent_uuid, role, type, subtype, timestamp, api_message_id, "
    "usage_json, is_meta, is_compact_summary, metadata_json, content_json, tokens"
)

#: The columns a transcript row is written with, in the order of `message_row`.
MESSAGE_INSERT_COLUMNS = (
    "session_id",
    "seq",
    "uuid",
    "parent_uuid",
    "role",
    "type",
    "subtype",
    "timestamp",
    "api_message_id",
    "usage_json",
    "is_meta",
    "is_compact_summary",
    "metadata_json",
    "content_json",
    "tokens",
)

INSERT_MESSAGE = (
    f"INSERT INTO messages ({', '.join(MESSAGE_INSERT_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in MESSAGE_INSERT_COLUMNS)})"
)

#: Compact JSON, non-ASCII kept as is (what we store and export).
dumps = compact_dumps


def message_row(session_id: str, seq: int, msg: NewMessage, content_json: str, tokens: int) -> tuple[Any, ...]:
    """The MESSAGE_INSERT_COLUMNS of one validated message, bound by position (bulk writes)."""
    return (
        session_id,
        seq,
        msg.uuid,
        msg.parent_uuid,
        msg.role,
        msg.type,
        msg.subtype,
        msg.timestamp,
        msg.api_message_id,
        dumps(msg.usage) if msg.usage is not None else None,
        msg.is_meta,
        msg.is_compact_summary,
        dumps(msg.metadata) if msg.metadata else None,
        content_json,
        tokens,
    )


def message_params(session_id: str, seq: int, msg: NewMessage, content_json: str, tokens: int) -> dict[str, Any]:
    """Parameters of INSERT_MESSAGE for one validated message (the same values as message_row, by name)."""
    return dict(zip(MESSAGE_INSERT_COLUMNS, message_row(session_id, seq, msg, content_json, tokens), strict=True))


def stored_from_new(seq: int, msg: NewMessage, tokens: int) -> StoredMessage:
    """The StoredMessage a just-written NewMessage became."""
    return StoredMessage(
        seq=seq,
        uuid=msg.uuid,
        role=msg.role,
        type=msg.type,
        content=msg.content,
        subtype=msg.subtype,
        parent_uuid=msg.parent_uuid,
        timestamp=msg.timestamp,
        api_message_id=msg.api_message_id,
        usage=msg.usage,
        is_meta=msg.is_meta,
        is_compact_summary=msg.is_compact_summary,
        metadata=msg.metadata,
        tokens=tokens,
    )


def stored_from_row(row: Sequence[Any], offset: int = 0) -> StoredMessage:
    """A StoredMessage from the MESSAGE_COLUMNS of a result row, starting at `offset` (the resume hot path).

    A row whose stored texts do not decode raises MessageCorrupt, naming the message.
    """
    o = offset
    usage, meta = row[o + 8], row[o + 11]
    try:
        return StoredMessage(
            row[o],
            row[o + 1],
            row[o + 3],
            row[o + 4],
            loads_stored(row[o + 12]),
            row[o + 5],
            row[o + 2],
            row[o + 6],
            row[o + 7],
            loads_stored(usage) if usage else None,
            row[o + 9] is True or row[o + 9] == 1,
            row[o + 10] is True or row[o + 10] == 1,
            loads_stored(meta) if meta else {},
            row[o + 13],
        )
    except (TextCorrupt, RecursionError) as exc:
        raise MessageCorrupt(int(row[o]), str(row[o + 1]), exc) from exc


def message_content(value: str | bytes, seq: int, uuid: str) -> Any:
    """A message's stored content decoded, or MessageCorrupt naming the message (for readers of raw rows)."""
    try:
        return loads_stored(value)
    except (TextCorrupt, RecursionError) as exc:
        raise MessageCorrupt(int(seq), str(uuid), exc) from exc


def iter_message_rows(
    db: "Database", session_id: str, after_seq: int = 0, batch: int = 1000, *, columns: str = MESSAGE_COLUMNS
) -> Iterator[Any]:
    """A session's transcript rows (`columns`, seq first) in seq order, fetched in batches: constant memory."""
    last = after_seq
    while True:
        rows = db.all(
            f"SELECT {columns} FROM messages WHERE session_id = :id AND seq > :after ORDER BY seq LIMIT {int(batch)}",
            {"id": session_id, "after": last},
        )
        if not rows:
            return
        yield from rows
        last = int(rows[-1][0])
