"""The API's own compactions as boundaries.

A reply holding a `compaction` block with a summary (threshold compaction,
on-demand compaction, or its background form) replaces everything the request
sent before it: the API takes that message in place of all that came before.
So appending it commits, in the same transaction, a boundary like ours: a
`compact_boundary` system message and a `compactions` row of kind
`api-threshold`, `api-on-demand` or `api-background`, whose summary is the
compaction message itself. The new view is the boundary, the compaction
message exactly as returned (its signature covers it), then whatever was
appended after the request went out; the transcript keeps everything, so
`history -b K` shows the exact messages of the request that was compacted.

A block with null content (the server's compaction failed) is an ordinary
message: stored, shown as failed, and it changes no view.

How the reply came is read from `metadata["api_compaction"]` when the caller
says (`{"mode": "threshold" | "on-demand", "background": bool, "trigger":
"auto" | "manual"}`), else guessed from the content: a reply that is only the
block is on-demand, one that goes on after it is threshold.
"""

from __future__ import annotations

import uuid as uuid_mod
from typing import TYPE_CHECKING, Any

from ..core.blocktypes import COMPACTION, compaction_block, compaction_summary
from ..core.errors import SessionStoreError
from .rewrite import Add, CompactionRecord, RewriteResult, _apply
from ..records.rows import dumps, stored_from_new
from ..records.state import load_state
from ..codecs.tokens import estimate_content
from ..core.types import BOUNDARY_SUBTYPE, StoredMessage
from ..records.validate import NewMessage, normalize

if TYPE_CHECKING:
    from ..engine.db import Database
    from .session import Session
    from ..records.state import ViewSnapshot

#: The message metadata key that says how the API compacted.
METADATA_KEY = "api_compaction"
#: The `summarizer` recorded for every API boundary.
API_SUMMARIZER = "api"
#: Compaction kinds of API boundaries (ours are full, partial-*, session-memory, collapse).
API_KINDS = ("api-threshold", "api-on-demand", "api-background")
MODES = ("threshold", "on-demand")


class ServerCompactionFailed(SessionStoreError):
    """The API answered a compaction request without a summary (or not at all); nothing was written."""


def is_api_boundary(msg: NewMessage) -> bool:
    """True for a message whose compaction block carries a summary (the ones that replace the view)."""
    return msg.compaction and compaction_summary(compaction_block(msg.content)) is not None


def is_failed_compaction(content: Any) -> bool:
    """True for content holding a compaction block with null content (the server's compaction failed)."""
    if isinstance(content, str) or not content:
        return False
    block = compaction_block(content)
    return block is not None and compaction_summary(block) is None


def describe(msg: NewMessage) -> dict[str, Any]:
    """How the API compacted (mode, background, trigger), from the caller's metadata or the content's shape.

    The answer is also written into the message's metadata, and the message is flagged as the boundary's
    summary (`is_compact_summary`), so the stored message says it too.
    """
    given = msg.metadata.get(METADATA_KEY)
    info = dict(given) if isinstance(given, dict) else {}
    mode = info.get("mode")
    if mode not in MODES:
        only_block = not isinstance(msg.content, str) and all(b.get("type") == COMPACTION for b in msg.content)
        mode = "on-demand" if only_block else "threshold"
    background = bool(info.get("background")) and mode == "on-demand"
    trigger = info.get("trigger")
    if not isinstance(trigger, str) or not trigger:
        trigger = "auto" if mode == "threshold" or background else "manual"
    info.update({"mode": mode, "background": background, "trigger": trigger})
    msg.metadata[METADATA_KEY] = info
    msg.is_compact_summary = True
    return info


def kind_of(info: dict[str, Any]) -> str:
    """The compaction kind of an API boundary."""
    if info["mode"] == "threshold":
        return "api-threshold"
    return "api-background" if info["background"] else "api-on-demand"


def boundary_for(msg: NewMessage, info: dict[str, Any], pre_tokens: int) -> NewMessage:
    """The `compact_boundary` system message recorded before the API's compaction message."""
    kind = kind_of(info)
    return normalize(
        {
            "role": "system",
            "subtype": BOUNDARY_SUBTYPE,
            "content": f"Conversation compacted by the API ({info['mode']}"
            f"{', background' if info['background'] else ''}, {info['trigger']})",
            "uuid": str(uuid_mod.uuid4()),
            "timestamp": msg.timestamp,
            "metadata": {
                "trigger": info["trigger"],
                "kind": kind,
                "pre_tokens": pre_tokens,
                "post_tokens": estimate_content(msg.content),
                "preserved_segment": None,
                "summarizer": API_SUMMARIZER,
                "api_message_uuid": msg.uuid,
                "api_message_id": msg.api_message_id,
                "background": info["background"],
            },
        }
    )


def apply_api_compaction(
    db: "Database",
    session_id: str,
    msg: NewMessage,
    content_json: str,
    tokens: int,
    *,
    base_version: int | None = None,
    sent_through: int | None = None,
) -> RewriteResult:
    """Inside a write transaction: record `msg` and its boundary and make them the new view.

    `base_version` / `sent_through` are the view version and last seq of the request that was
    compacted (a background compaction sent earlier); by default the view as it stands. Messages
    appended after `sent_through` follow the compaction message; a rewrite since `base_version`
    raises RewriteConflict and nothing is written.
    """
    state = load_state(db, session_id, for_update=True)
    last = state.last_seq if sent_through is None else sent_through
    info = describe(msg)
    boundary = boundary_for(msg, info, state.view_tokens)
    content_json = dumps(msg.content) if content_json is None else content_json
    record = CompactionRecord(
        kind=kind_of(info),
        trigger=info["trigger"],
        boundary_uuid=boundary.uuid,
        summary_uuid=msg.uuid,
        summarized_seqs=None,
        summarizer=API_SUMMARIZER,
        custom_instructions=info.get("instructions") if isinstance(info.get("instructions"), str) else None,
        metadata={"api": info, "api_message_id": msg.api_message_id, "sent_through": last},
    )
    prepared: list[tuple[Any, str | None, int]] = [
        (Add(boundary), dumps(boundary.content), estimate_content(boundary.content)),
        (Add(msg), content_json, tokens),
    ]
    return _apply(
        db,
        session_id,
        state.view_version if base_version is None else base_version,
        last,
        prepared,
        record,
    )


#: What each context-editing report says the server cleared, by edit type: (count field, what it counts).
_EDIT_WORDS = {
    "clear_tool_uses_20250919": ("cleared_tool_uses", "tool result"),
    "clear_thinking_20251015": ("cleared_thinking_turns", "thinking turn"),
}


def server_notes(content: Any, usage: dict[str, Any] | None, metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, line) pairs saying what the server did with this response, for `show` and the browse screen:
    the context edits it applied, its compaction (or that it failed), and its billed iterations."""
    notes: list[tuple[str, str]] = []
    managed = metadata.get("context_management")
    edits = managed.get("applied_edits") if isinstance(managed, dict) else None
    for edit in edits if isinstance(edits, list) else ():
        if not isinstance(edit, dict):
            continue
        field, noun = _EDIT_WORDS.get(str(edit.get("type")), ("", ""))
        count = edit.get(field) if field else None
        tokens = edit.get("cleared_input_tokens")
        what = f"{count:,} {noun}{'' if count == 1 else 's'}" if isinstance(count, int) else str(edit.get("type"))
        cost = f", {tokens:,} tokens" if isinstance(tokens, int) else ""
        notes.append(("server", f"the server cleared {what}{cost}"))
    block = compaction_block(content)
    if block is not None:
        info = metadata.get(METADATA_KEY)
        how = (
            f" ({info.get('mode')}{', background' if info.get('background') else ''})" if isinstance(info, dict) else ""
        )
        if compaction_summary(block) is None:
            notes.append(("compaction", "failed: the server returned no summary; the view did not change"))
        else:
            notes.append(("compaction", f"by the API{how}: this message starts the view that replaced the one before"))
    iterations = usage.get("iterations") if isinstance(usage, dict) else None
    for item in iterations if isinstance(iterations, list) else ():
        if isinstance(item, dict):
            notes.append(
                (
                    "iteration",
                    f"{item.get('type')}: {int(item.get('input_tokens') or 0):,} in, "
                    f"{int(item.get('output_tokens') or 0):,} out",
                )
            )
    return notes


#: The fault-point names of the two writes: a reply appended in the foreground, a background swap.
APPEND_POINT = "rewrite.api-boundary"
SWAP_POINT = "rewrite.api-background"


def commit_api_compaction(
    session: "Session",
    reply: Any,
    *,
    sent: "ViewSnapshot | None" = None,
    background: bool = False,
    trigger: str | None = None,
    instructions: str | None = None,
) -> StoredMessage:
    """Record an on-demand compaction reply the caller requested with the view `sent` (default: the present view).

    The swap runs under the view-version guard exactly like a partial compaction `--up-to` the last
    message sent: what was sent is replaced by the reply, every message appended since follows it,
    and a rewrite since `sent` raises RewriteConflict with nothing written. A reply without a summary
    (failed compaction) raises ServerCompactionFailed and writes nothing: the view stays as it is.
    """
    session.before_local_write()
    msg = normalize(reply)
    if not is_api_boundary(msg):
        raise ServerCompactionFailed("the API returned no compaction summary; the view was left as it was")
    info = dict(msg.metadata.get(METADATA_KEY) or {})
    info.update({"mode": "on-demand", "background": background})
    if trigger:
        info["trigger"] = trigger
    if instructions:
        info["instructions"] = instructions
    msg.metadata[METADATA_KEY] = info
    content_json = dumps(msg.content)
    tokens = estimate_content(msg.content)

    def body(db: "Database") -> int:
        result = apply_api_compaction(
            db,
            session.id,
            msg,
            content_json,
            tokens,
            base_version=sent.view_version if sent is not None else None,
            sent_through=sent.last_seq if sent is not None else None,
        )
        return result.added_seqs[msg.uuid]

    try:
        seq = session.db.run_write(body, session_id=session.id, point=SWAP_POINT if background else APPEND_POINT)
    finally:
        session.invalidate()
    return stored_from_new(seq, msg, tokens)
