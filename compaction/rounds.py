"""API rounds and split points that keep the view a valid Messages-API request.

Split-index convention: a split at index ``i`` of ``entries`` cuts the view
into ``entries[:i]`` (the older part: summarized, dropped, or kept as a prefix)
and ``entries[i:]`` (the newer part). ``0`` and ``len(entries)`` leave one side
empty and are always valid. Any other split is valid when both sides keep
invariant 3 of DESIGN.md:

* no ``tool_use`` / ``tool_result`` pair straddles it (this also keeps parallel
  tool calls and all their results on one side);
* no two stored pieces of one streamed response (same ``api_message_id``)
  straddle it;
* the newer part's first sent message is a user message, and the run of user
  entries it opens carries no ``tool_result`` block (it would be an orphan).

System-role entries are never sent, so they do not constrain a split; they
simply travel with the side they end up on.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Sequence

from sessionstore.storage.core.types import Content, ViewEntry

Direction = Literal["earlier", "later"]
#: What the newer part of a split may open with: "user" (it opens the request:
#: a user message without tool_result), "after_user" (it follows a user message,
#: e.g. a summary: anything but a tool_result run) or "any" (it is not sent).
Opening = Literal["user", "after_user", "any"]

_SENT_ROLES = ("user", "assistant")


def _blocks(content: Content) -> list[dict[str, Any]]:
    """Content as a block list; a plain string has no structured blocks."""
    return content if isinstance(content, list) else []


def _tool_use_ids(entry: ViewEntry) -> list[str]:
    """Ids of the tool_use blocks of an assistant entry."""
    if entry.role != "assistant":
        return []
    return [b["id"] for b in _blocks(entry.content) if b.get("type") == "tool_use" and "id" in b]


def _tool_result_ids(entry: ViewEntry) -> list[str]:
    """tool_use_ids answered by the tool_result blocks of a user entry."""
    if entry.role != "user":
        return []
    return [b["tool_use_id"] for b in _blocks(entry.content) if b.get("type") == "tool_result" and "tool_use_id" in b]


def _has_tool_result(entry: ViewEntry) -> bool:
    """True when a user entry carries at least one tool_result block."""
    return entry.role == "user" and any(b.get("type") == "tool_result" for b in _blocks(entry.content))


def _spans(entries: Sequence[ViewEntry]) -> list[tuple[int, int]]:
    """Index ranges (first, last) that no split may cut through.

    One span per streamed response (first to last piece with the same
    api_message_id) and one per answered tool call (tool_use to tool_result).
    """
    spans: list[tuple[int, int]] = []
    first_piece: dict[str, int] = {}
    last_piece: dict[str, int] = {}
    use_at: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if entry.role == "assistant" and entry.api_message_id:
            first_piece.setdefault(entry.api_message_id, index)
            last_piece[entry.api_message_id] = index
        for use_id in _tool_use_ids(entry):
            use_at.setdefault(use_id, index)
        for use_id in _tool_result_ids(entry):
            if use_id in use_at and use_at[use_id] < index:
                spans.append((use_at[use_id], index))
    spans.extend((first_piece[key], last_piece[key]) for key in first_piece)
    return spans


def _cut_through(entries: Sequence[ViewEntry]) -> list[bool]:
    """For each split index 0..n: does it cut through a span (invalid)?"""
    n = len(entries)
    depth = [0] * (n + 2)
    for first, last in _spans(entries):
        if last > first:
            depth[first + 1] += 1
            depth[last + 1] -= 1
    cut: list[bool] = []
    running = 0
    for index in range(n + 1):
        running += depth[index]
        cut.append(running > 0)
    return cut


def _bad_suffix_start(entries: Sequence[ViewEntry], opening: Opening = "user") -> list[bool]:
    """For each split index 0..n: would the newer part open badly?

    Badly means the leading run of user entries (system entries skipped)
    holds a tool_result block, or, with `opening` "user", its first sent
    entry is an assistant; with "any" nothing is bad.
    """
    n = len(entries)
    bad = [False] * (n + 1)
    if opening == "any":
        return bad
    next_role: str | None = None
    run_has_result = False
    for index in range(n - 1, -1, -1):
        entry = entries[index]
        if entry.role == "assistant":
            next_role, run_has_result = "assistant", False
        elif entry.role == "user":
            run_has_result = _has_tool_result(entry) or (next_role == "user" and run_has_result)
            next_role = "user"
        opens_with_assistant = next_role == "assistant" and opening == "user"
        bad[index] = opens_with_assistant or (next_role == "user" and run_has_result)
    return bad


def valid_splits(entries: Sequence[ViewEntry], opening: Opening = "user") -> list[bool]:
    """Validity of every split index 0..len(entries), computed in one O(n) pass.

    Callers that probe many split points use this instead of calling
    `is_valid_split` repeatedly. `opening` says what the newer part may open with.
    """
    n = len(entries)
    cut = _cut_through(entries)
    bad_start = _bad_suffix_start(entries, opening)
    valid = [not cut[i] and not bad_start[i] for i in range(n + 1)]
    valid[0] = True
    valid[n] = True
    return valid


def is_valid_split(entries: Sequence[ViewEntry], index: int) -> bool:
    """True when splitting into entries[:index] / entries[index:] keeps invariant 3."""
    if index <= 0 or index >= len(entries):
        return True
    return valid_splits(entries)[index]


def _nearest(valid: list[bool], index: int, direction: Direction) -> int:
    """The closest valid index at or before (earlier) / at or after (later) `index`."""
    last = len(valid) - 1
    index = min(max(index, 0), last)
    step = -1 if direction == "earlier" else 1
    while not valid[index]:
        index += step
    return index


def adjust_split(
    entries: Sequence[ViewEntry], index: int, *, direction: Direction = "earlier", opening: Opening = "user"
) -> int:
    """Move a proposed split to the nearest valid one in `direction`.

    "earlier" returns the largest valid index <= `index` (the newer part
    grows); "later" the smallest valid index >= `index` (the newer part
    shrinks). A valid index is returned unchanged; out-of-range indexes are
    clamped to 0..len(entries), which are always valid.
    """
    if direction not in ("earlier", "later"):
        raise ValueError(f"direction must be 'earlier' or 'later', not {direction!r}")
    return _nearest(valid_splits(entries, opening), index, direction)


def split_problem(entries: Sequence[ViewEntry], index: int, opening: Opening = "user") -> str | None:
    """Why a split at `index` breaks invariant 3, in words (None when it does not)."""
    if index <= 0 or index >= len(entries):
        return None
    for first, last in _spans(entries):
        if first < index <= last:
            older, newer = entries[first], entries[last]
            shared = set(_tool_use_ids(older)) & set(_tool_result_ids(newer))
            if shared:
                return f"it would separate tool_use {sorted(shared)[0]} from its tool_result"
            return f"it would split the pieces of streamed response {older.api_message_id}"
    if _bad_suffix_start(entries, opening)[index]:
        following = next((e for e in entries[index:] if e.role in _SENT_ROLES), None)
        if following is not None and following.role == "assistant":
            return "the kept part would open with an assistant message"
        return "the kept part would open with a tool_result that answers nothing kept"
    return None


def group_rounds(entries: Sequence[ViewEntry]) -> list[list[ViewEntry]]:
    """The view cut into API rounds, the unit compaction keeps or drops whole.

    A round is an assistant response (all its consecutive assistant entries)
    plus the user entries after it (tool results, then any user text). User
    entries before the first assistant form the first group. A round never
    ends inside a streamed response or a tool call, so pieces sharing an
    api_message_id interleaved with their tool results stay in one round.
    System entries stay in the group they sit in. Concatenating the groups
    gives back `entries`. Every group after the first opens with an
    assistant entry, so a caller dropping leading rounds must put a user
    message in front of what remains.
    """
    cut = _cut_through(entries)
    groups: list[list[ViewEntry]] = []
    current: list[ViewEntry] = []
    previous_role: str | None = None
    for index, entry in enumerate(entries):
        starts_round = entry.role == "assistant" and previous_role == "user" and not cut[index]
        if starts_round and current:
            groups.append(current)
            current = []
        current.append(entry)
        if entry.role in _SENT_ROLES:
            previous_role = entry.role
    if current:
        groups.append(current)
    return groups


def has_text(entry: ViewEntry) -> bool:
    """True when a sent entry carries non-blank text (a "message with text")."""
    if entry.role not in _SENT_ROLES:
        return False
    if isinstance(entry.content, str):
        return bool(entry.content.strip())
    return any(b.get("type") == "text" and str(b.get("text", "")).strip() for b in entry.content)


def _sent(entries: Iterable[ViewEntry]) -> list[ViewEntry]:
    """Only the entries that go to the model."""
    return [e for e in entries if e.role in _SENT_ROLES]


def _widen(
    entries: Sequence[ViewEntry],
    start: int,
    min_tokens: int,
    min_text_messages: int,
    max_tokens: int,
    floor_index: int,
) -> int:
    """Move `start` back one entry at a time until the kept part is big enough.

    Stops as soon as the kept sent entries reach both minimums, when they
    reach `max_tokens`, or at `floor_index`.
    """
    kept = _sent(entries[start:])
    tokens = sum(e.tokens for e in kept)
    texts = sum(1 for e in kept if has_text(e))

    def enough() -> bool:
        """Both minimums met, or the maximum reached."""
        return tokens >= max_tokens or (tokens >= min_tokens and texts >= min_text_messages)

    while start > floor_index and not enough():
        start -= 1
        entry = entries[start]
        if entry.role in _SENT_ROLES:
            tokens += entry.tokens
            texts += 1 if has_text(entry) else 0
    return start


def kept_suffix_start(
    entries: Sequence[ViewEntry],
    min_tokens: int = 10_000,
    min_text_messages: int = 5,
    max_tokens: int = 40_000,
    floor_index: int = 0,
    start: int | None = None,
) -> int:
    """Index of the first entry session-memory compaction keeps verbatim.

    `start` is the proposed first kept index (the entry right after the last
    one the notes summarized; default: len(entries), keep nothing). It is
    widened backwards until the kept sent entries hold >= `min_tokens` tokens
    and >= `min_text_messages` entries with text, stopping once they hold
    `max_tokens` and never going before `floor_index` (the entry after the
    last boundary). The result is then adjusted earlier for invariant 3 (it may
    pass `max_tokens` for that: the invariant wins); if that would cross
    `floor_index`, it is adjusted later instead, which can return an index
    greater than `start` (callers must then not rely on the notes covering
    entries[:result]) or len(entries) (nothing kept).
    """
    n = len(entries)
    floor_index = min(max(floor_index, 0), n)
    proposed = n if start is None else min(max(start, floor_index), n)
    widened = _widen(entries, proposed, min_tokens, min_text_messages, max_tokens, floor_index)
    valid = valid_splits(entries)
    earlier = _nearest(valid, widened, "earlier")
    if earlier >= floor_index:
        return earlier
    return _nearest(valid, widened, "later")
