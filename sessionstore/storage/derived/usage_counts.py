"""Counting usage: each API response once, summed per session, hour, model and prompt band.

Like the search index, the usage tables are derived data kept off the append path: each
session has a high-water mark (`usage_marks.counted_seq`), and a usage report first counts
the messages above it, in write transactions of its own, reading their `usage_json`,
`metadata_json` (the model) and timestamps, never their content.

Streamed pieces of one response share an `api_message_id` and each repeats the response's
usage, the output count growing as the stream goes on; a response is counted once, with the
largest count of each kind among its pieces, at the hour of its first piece. A message with
usage but no id is a response of its own.

A response is counted once across sessions too (revision 0018). A fork, a local continuation
(a fork) and a Claude Code resume copy messages with their response ids and usage: each copy is
recorded under the response's `identity` (its API id; an id minted per line or a message uuid
with its first piece's timestamp) and only one row per identity is `counted` into the rollup, the first counted
(sessions are counted oldest first, so the original keeps it). Deleting that session hands each of
its counted responses to the oldest remaining copy (`release`). One indexed lookup per batch of
new responses: the counting stays incremental.
"""

from __future__ import annotations

from functools import partial

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..codecs.fastjson import loads_stored
from ..team.ownership import writable_clause

if TYPE_CHECKING:
    from ..engine.db import Database

#: Prompt sizes (input + cache writes + cache reads of one request) where some model's price
#: changes; a response records how many of them its prompt exceeded. A price table's
#: long-context threshold must be one of these (sessionstore.prices checks it).
PROMPT_BANDS: tuple[int, ...] = (200_000, 272_000)

#: The token kinds, in the column order of usage_responses and usage_rollup.
KINDS = ("input_tokens", "output_tokens", "cache_write_5m", "cache_write_1h", "cache_read")

#: Messages with usage read per batch, and per write transaction.
_FETCH_ROWS = 2_000
_ROWS_PER_TRANSACTION = 20_000
#: Prefixes of response ids an importer mints per line, the same in unrelated sessions (the Codex importer's).
SYNTHETIC_IDS = ("codex-response-",)


@dataclass(slots=True)
class Response:
    """One response's folded usage and where it is summed."""

    hour: int
    model: str
    counts: list[int]

    @property
    def band(self) -> int:
        """How many PROMPT_BANDS thresholds the prompt exceeded."""
        prompt = self.counts[0] + self.counts[2] + self.counts[3] + self.counts[4]
        return sum(1 for threshold in PROMPT_BANDS if prompt > threshold)

    def key(self) -> tuple[int, str, int]:
        return self.hour, self.model, self.band

    def merged(self, other: "Response") -> "Response":
        """Both pieces as one response: the largest count of each kind, the earlier hour, a known model."""
        return Response(
            min(self.hour, other.hour),
            self.model or other.model,
            [max(a, b) for a, b in zip(self.counts, other.counts, strict=True)],
        )


def token_counts(usage: dict[str, Any]) -> list[int]:
    """[input, output, cache write 5m, cache write 1h, cache read] of one stored usage object.

    Cache writes without the 5m/1h breakdown (`cache_creation`) are 5-minute writes, the API's default.
    The server's compaction runs as iterations of the request (`usage.iterations` entries of type
    `compaction`) whose tokens the top-level fields leave out: they are billed, so they are added,
    priced as the model's input and output like the rest.
    """
    counts = _top_level_counts(usage)
    iterations = usage.get("iterations")
    if isinstance(iterations, list):
        for item in iterations:
            if isinstance(item, dict) and item.get("type") == COMPACTION_ITERATION:
                counts = [a + b for a, b in zip(counts, _top_level_counts(item), strict=True)]
    return counts


#: The `usage.iterations` entry type of a server-side compaction (not in the top-level usage).
COMPACTION_ITERATION = "compaction"


def _top_level_counts(usage: dict[str, Any]) -> list[int]:
    """The five counts of one usage object's own fields (a response's, or one iteration's)."""
    total_write = _int(usage.get("cache_creation_input_tokens"))
    split = usage.get("cache_creation")
    one_hour = _int(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else 0
    if isinstance(split, dict) and not total_write:
        total_write = one_hour + _int(split.get("ephemeral_5m_input_tokens"))
    one_hour = min(one_hour, total_write)
    return [
        _int(usage.get("input_tokens")),
        _int(usage.get("output_tokens")),
        total_write - one_hour,
        one_hour,
        _int(usage.get("cache_read_input_tokens")),
    ]


def _int(value: Any) -> int:
    """A stored count as a non-negative integer (validation already refused negative and huge ones)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return max(int(value), 0)


def hour_of(timestamp: str | None, fallback: float) -> int:
    """Hours since the Unix epoch (UTC) of an ISO-8601 timestamp (naive = UTC), else of `fallback`."""
    if timestamp:
        try:
            parsed = datetime.fromisoformat(timestamp)
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                return int((parsed - datetime(1970, 1, 1)).total_seconds() // 3600)
            return int(parsed.timestamp() // 3600)
    return int(fallback // 3600)


def lagging_sessions(db: "Database", session_ids: Sequence[str] | None = None) -> list[str]:
    """Sessions holding messages above their usage mark (all of them, or those among `session_ids`)."""
    return [r[0] for r in _lagging_of(db, session_ids)]


def _lagging_of(db: "Database", session_ids: Sequence[str] | None) -> list[Any]:
    """`_lagging` for all sessions or those among `session_ids`."""
    where = ""
    params: dict[str, Any] = {}
    if session_ids is not None:
        if not session_ids:
            return []
        names = [f"s{i}" for i in range(len(session_ids))]
        where = f" AND s.id IN ({', '.join(':' + n for n in names)})"
        params = dict(zip(names, session_ids, strict=True))
    return _lagging(db, where, params)


def _lagging(db: "Database", where: str, params: dict[str, Any]) -> list[Any]:
    """(session, whether this role owns it) of the lagging sessions this role may write.

    Usage rows are written as the session owner's (revision 0009), so a session shared read-only is
    counted as far as its writers counted it, like the search index.
    """
    mine = "1" if db.is_sqlite else "CASE WHEN s.owner = current_user THEN 1 ELSE 0 END"
    return db.all(
        f"SELECT s.id, {mine} FROM sessions s LEFT JOIN usage_marks m ON m.session_id = s.id "
        "WHERE (SELECT MAX(x.seq) FROM messages x WHERE x.session_id = s.id) > COALESCE(m.counted_seq, 0) "
        f"AND {writable_clause(db, 's')}" + where + " ORDER BY s.created_at, s.id",
        params,
    )


def catch_up(
    db: "Database", session_ids: Sequence[str] | None = None, writer: Callable[[], "Database"] | None = None
) -> int:
    """Count every message above each session's mark (all sessions, or `session_ids`); returns how many.

    On SQLite it first asks whether the newest transcript row is still the one recorded when every
    session was last found counted (one lookup): then nothing was appended since, to any session.
    A new row gets a larger rowid than every row present, and the recorded one is still present.

    The checks read through `db`; the counting writes through `writer()` (default: `db`), called only
    when there is something to write, so a read-only store opens its writing connection only then.
    """
    tail = _newest_row(db)
    if tail is not None and _unchanged_since_last_check(db, tail):
        return 0
    if session_ids is not None:
        tail = None
    lagging = _lagging_of(db, session_ids)
    if not lagging and tail is None:
        return 0
    out = writer() if writer is not None else db
    done = 0
    for sid, own in lagging:
        while True:
            # A session shared writable is locked by id, which names its owner for the rows written.
            counted, more = out.run_write(partial(_count_batch, sid=sid), session_id=None if own else sid)
            done += counted
            if not more:
                break
    if tail is not None:
        out.run_write(lambda d: _record_tail(d, tail))
    return done


def _newest_row(db: "Database") -> tuple[int, str, int] | None:
    """SQLite: (rowid, session, seq) of the newest transcript row; None elsewhere or without messages."""
    if not db.is_sqlite:
        return None
    row = db.one("SELECT rowid, session_id, seq FROM messages ORDER BY rowid DESC LIMIT 1")
    return (int(row[0]), row[1], int(row[2])) if row else None


def _unchanged_since_last_check(db: "Database", tail: tuple[int, str, int]) -> bool:
    """True when `tail` is the row recorded by the last complete check and its session is counted past it."""
    row = db.one(
        "SELECT t.last_rowid, t.session_id, t.seq, m.counted_seq FROM usage_state t "
        "LEFT JOIN usage_marks m ON m.session_id = t.session_id WHERE t.name = 'tail'"
    )
    return (
        row is not None and (int(row[0]), row[1], int(row[2])) == tail and row[3] is not None and int(row[3]) >= tail[2]
    )


def _record_tail(db: "Database", tail: tuple[int, str, int]) -> None:
    params = {"r": tail[0], "s": tail[1], "q": tail[2]}
    if db.one("SELECT 1 FROM usage_state WHERE name = 'tail'") is None:
        db.execute(
            "INSERT INTO usage_state (name, last_rowid, session_id, seq) VALUES ('tail', :r, :s, :q)", params
        ).close()
    else:
        db.execute(
            "UPDATE usage_state SET last_rowid = :r, session_id = :s, seq = :q WHERE name = 'tail'", params
        ).close()


def _count_batch(db: "Database", sid: str) -> tuple[int, bool]:
    """Count the next messages of one session in this transaction; (messages passed, whether more remain)."""
    pg_mark = None if db.is_sqlite else db.lock_mark("usage_marks", "counted_seq", sid)
    session = db.one("SELECT model, created_at FROM sessions WHERE id = :id", {"id": sid})
    if session is None:
        return 0, False
    row = db.one("SELECT counted_seq FROM usage_marks WHERE session_id = :id", {"id": sid}) if db.is_sqlite else pg_mark
    mark = int(row[0]) if row else 0
    top = db.one("SELECT MAX(seq) FROM messages WHERE session_id = :id", {"id": sid})[0]
    top = int(top or 0)
    limit = min(top, mark + _ROWS_PER_TRANSACTION)
    folded: dict[str, Response] = {}
    identities: dict[str, str] = {}
    after = mark
    while True:
        rows = db.all(
            "SELECT seq, api_message_id, timestamp, written_at, usage_json, metadata_json, uuid FROM messages "
            "WHERE session_id = :id AND seq > :after AND seq <= :limit AND usage_json IS NOT NULL "
            "ORDER BY seq LIMIT :n",
            {"id": sid, "after": after, "limit": limit, "n": _FETCH_ROWS},
        )
        for seq, api_id, timestamp, written_at, usage_json, metadata_json, uuid in rows:
            key = api_id or f"seq:{seq}"
            identities.setdefault(key, identity_of(api_id, uuid, timestamp))
            _fold(
                folded,
                key,
                _response(timestamp, written_at, usage_json, metadata_json, session[0] or "", float(session[1])),
            )
        if len(rows) < _FETCH_ROWS:
            break
        after = int(rows[-1][0])
    _apply(db, sid, folded, identities)
    if limit > mark:
        if row is None:
            db.execute(
                "INSERT INTO usage_marks (session_id, counted_seq) VALUES (:id, :s)", {"id": sid, "s": limit}
            ).close()
        else:
            db.execute(
                "UPDATE usage_marks SET counted_seq = :s WHERE session_id = :id", {"id": sid, "s": limit}
            ).close()
    return limit - mark, limit < top


def _response(
    timestamp: str | None,
    written_at: float | None,
    usage_json: str,
    metadata_json: str | None,
    session_model: str,
    created_at: float,
) -> Response:
    usage = loads_stored(usage_json)
    usage = usage if isinstance(usage, dict) else {}
    metadata = loads_stored(metadata_json) if metadata_json else {}
    model = metadata.get("model") if isinstance(metadata, dict) else None
    model = model if isinstance(model, str) and model else session_model
    return Response(
        hour_of(timestamp, written_at if written_at is not None else created_at), model[:200], token_counts(usage)
    )


def identity_of(api_id: str | None, uuid: str, timestamp: str | None) -> str:
    """A response across sessions: its API id; a per-line id or a uuid with its first piece's timestamp.

    Copies (a fork's, a resume's) keep the id, though not always every piece: a piece left out of
    the view (blank text) is not forked. Ids minted per line (`SYNTHETIC_IDS`: Codex rollouts number
    their lines alike) and responses without an id are told apart by their first piece's timestamp.
    """
    if api_id and not api_id.startswith(SYNTHETIC_IDS):
        return api_id
    return f"{api_id or 'uuid:' + uuid}|{timestamp or ''}"


def _fold(folded: dict[str, Response], key: str, response: Response) -> None:
    earlier = folded.get(key)
    folded[key] = response if earlier is None else earlier.merged(response)


def _apply(db: "Database", sid: str, folded: dict[str, Response], identities: dict[str, str]) -> None:
    """Merge `folded` into usage_responses and move each change of a counted response into usage_rollup.

    A new response whose identity another session already counts is recorded uncounted.
    """
    if not folded:
        return
    stored = _stored_responses(db, sid, list(folded))
    elsewhere = _counted_elsewhere(db, sid, [identities[k] for k in folded if k not in stored])
    deltas: dict[tuple[int, str, int], list[int]] = {}
    inserts, updates = [], []
    for key, fresh in folded.items():
        old, counted = stored.get(key, (None, True))
        new = fresh if old is None else old.merged(fresh)
        if old is not None:
            if old.key() == new.key() and old.counts == new.counts:
                continue
            if counted:
                _add(deltas, old.key(), [-1, *(-c for c in old.counts)])
            updates.append((new.hour, new.model, new.band, *new.counts, sid, key))
        else:
            counted = identities[key] not in elsewhere
            inserts.append((sid, key, new.hour, new.model, new.band, *new.counts, identities[key], counted))
        if counted:
            _add(deltas, new.key(), [1, *new.counts])
    columns = ", ".join(KINDS)
    if inserts:
        db.insert_rows(
            "usage_responses",
            ("session_id", "response_id", "hour", "model", "band", *KINDS, "identity", "counted"),
            inserts,
        )
    if updates:
        mark = "?" if db.is_sqlite else "%s"
        sets = ", ".join(f"{c} = {mark}" for c in ("hour", "model", "band", *KINDS))
        cur = db.conn.cursor()
        cur.executemany(
            f"UPDATE usage_responses SET {sets} WHERE session_id = {mark} AND response_id = {mark}", updates
        )
        cur.close()
    _add_to_rollup(db, sid, deltas, columns)


def _stored_responses(db: "Database", sid: str, keys: list[str]) -> dict[str, tuple[Response, bool]]:
    """The usage_responses rows of these response ids and whether each is counted, read in chunks."""
    out: dict[str, tuple[Response, bool]] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        names = {f"k{i}": k for i, k in enumerate(chunk)}
        rows = db.all(
            f"SELECT response_id, counted, hour, model, {', '.join(KINDS)} FROM usage_responses "
            f"WHERE session_id = :sid AND response_id IN ({', '.join(':' + n for n in names)})",
            {"sid": sid, **names},
        )
        for r in rows:
            out[r[0]] = (Response(int(r[2]), r[3], [int(v) for v in r[4:]]), bool(r[1]))
    return out


def _counted_elsewhere(db: "Database", sid: str, identities: list[str]) -> set[str]:
    """Which of these identities another session (one this role sees) already counts, by the index."""
    out: set[str] = set()
    for start in range(0, len(identities), 500):
        names = {f"i{i}": k for i, k in enumerate(identities[start : start + 500])}
        rows = db.all(
            "SELECT identity FROM usage_responses WHERE counted = :yes AND session_id <> :sid "
            f"AND identity IN ({', '.join(':' + n for n in names)})",
            {"sid": sid, "yes": True, **names},
        )
        out.update(r[0] for r in rows)
    return out


def release(db: "Database", sid: str) -> None:
    """Before `sid` is deleted: each response it counts passes to the oldest other copy of its owner's.

    Runs in the deleting transaction; the copies' rollups gain what the deleted session's lose with it.
    """
    held = [
        r[0]
        for r in db.all(
            "SELECT identity FROM usage_responses WHERE session_id = :sid AND counted = :yes", {"sid": sid, "yes": True}
        )
    ]
    for start in range(0, len(held), 500):
        names = {f"i{i}": k for i, k in enumerate(held[start : start + 500])}
        rows = db.all(
            f"SELECT r.session_id, r.response_id, r.identity, r.hour, r.model, {', '.join('r.' + k for k in KINDS)} "
            "FROM usage_responses r JOIN sessions s ON s.id = r.session_id "
            "WHERE r.counted = :no AND r.session_id <> :sid "
            "AND s.owner = (SELECT owner FROM sessions WHERE id = :sid) "
            f"AND r.identity IN ({', '.join(':' + n for n in names)}) ORDER BY s.created_at, s.id",
            {"sid": sid, "no": False, **names},
        )
        taken: set[str] = set()
        for heir, response_id, identity, hour, model, *counts in rows:
            if identity in taken:
                continue
            taken.add(identity)
            response = Response(int(hour), model, [int(c) for c in counts])
            db.execute(
                "UPDATE usage_responses SET counted = :yes WHERE session_id = :s AND response_id = :r",
                {"yes": True, "s": heir, "r": response_id},
            ).close()
            _add_to_rollup(db, heir, {response.key(): [1, *response.counts]}, ", ".join(KINDS))


def _add(deltas: dict[tuple[int, str, int], list[int]], key: tuple[int, str, int], values: Iterable[int]) -> None:
    current = deltas.setdefault(key, [0] * (1 + len(KINDS)))
    for i, value in enumerate(values):
        current[i] += value


def _add_to_rollup(db: "Database", sid: str, deltas: dict[tuple[int, str, int], list[int]], columns: str) -> None:
    """Add each delta to its rollup row (creating it), then drop rows no response is summed in any more."""
    changed = [(sid, hour, model, band, *values) for (hour, model, band), values in deltas.items() if any(values)]
    if not changed:
        return
    mark = "?" if db.is_sqlite else "%s"
    names = ("responses", *KINDS)
    updates = ", ".join(f"{c} = usage_rollup.{c} + excluded.{c}" for c in names)
    cur = db.conn.cursor()
    cur.executemany(
        f"INSERT INTO usage_rollup (session_id, hour, model, band, responses, {columns}) "
        f"VALUES ({', '.join([mark] * (4 + len(names)))}) "
        f"ON CONFLICT (session_id, hour, model, band) DO UPDATE SET {updates}",
        changed,
    )
    cur.close()
    db.execute("DELETE FROM usage_rollup WHERE session_id = :id AND responses = 0", {"id": sid}).close()
