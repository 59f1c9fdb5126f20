"""What the agents cost: token usage and cost by day, week, month, session, project, model or host.

Every report first counts what was appended since the last one (`storage.usage_counts`,
reading usage, never content), then answers from `usage_rollup` alone: one grouped, indexed
query whose size follows the hours, sessions and models reported, not the messages. Each API
response counts once. Days are UTC. Cost comes from the price table (`sessionstore.prices`);
tokens of a model the table does not name make the cost unknown (None), never zero:
`cost_usd_known` then says what the priced part costs and `unpriced_models` names the rest.

    from sessionstore.usage import usage_report
    report = usage_report(store, by="day", since="7d")
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .prices import PriceTable, Rates, load_prices
from .storage.core.errors import SessionStoreError
from .storage.derived.usage_counts import KINDS, catch_up
from .usage_groupings import GROUPINGS

if TYPE_CHECKING:
    from .storage.store import SessionStore

#: The `--by host` row of sessions that record no host (captured before revision 0009 added it).
NO_HOST = "(no host)"

_AGE = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class UsageQueryError(SessionStoreError, ValueError):
    """A usage report asked for something it cannot be (an unknown grouping, an unreadable date)."""


@dataclass(slots=True)
class Usage:
    """Tokens of each kind, responses and cost of one group of API responses."""

    responses: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0
    cost_usd_known: float = 0.0
    unpriced_models: set[str] = field(default_factory=set)

    @property
    def cache_write(self) -> int:
        """Cache writes of both lifetimes."""
        return self.cache_write_5m + self.cache_write_1h

    @property
    def prompt_tokens(self) -> int:
        """Every input token: uncached, written to the cache and read from it."""
        return self.input_tokens + self.cache_write + self.cache_read

    @property
    def cache_hit_rate(self) -> float | None:
        """Share of the prompt tokens read from the cache (None without prompt tokens)."""
        prompt = self.prompt_tokens
        return self.cache_read / prompt if prompt else None

    @property
    def cost_usd(self) -> float | None:
        """The cost, or None when some tokens are of a model the price table does not name."""
        return None if self.unpriced_models else self.cost_usd_known

    def add(self, counts: Sequence[int], responses: int, cost: float | None, model: str) -> None:
        """Add one rollup group (counts in KINDS order) and its cost (None: unpriced `model`)."""
        self.responses += responses
        self.input_tokens += counts[0]
        self.output_tokens += counts[1]
        self.cache_write_5m += counts[2]
        self.cache_write_1h += counts[3]
        self.cache_read += counts[4]
        if cost is None:
            self.unpriced_models.add(model or "(unknown model)")
        else:
            self.cost_usd_known += cost

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values (exact token counts; cost rounded to 1e-6 USD)."""
        rate = self.cache_hit_rate
        cost = self.cost_usd
        return {
            "responses": self.responses,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_write_tokens": self.cache_write,
            "cache_write_5m_tokens": self.cache_write_5m,
            "cache_write_1h_tokens": self.cache_write_1h,
            "cache_read_tokens": self.cache_read,
            "cache_hit_rate": round(rate, 6) if rate is not None else None,
            "cost_usd": round(cost, 6) if cost is not None else None,
            "cost_usd_known": round(self.cost_usd_known, 6),
            "unpriced_models": sorted(self.unpriced_models),
        }


@dataclass(slots=True)
class UsageRow:
    """One line of a report: its key (a date, a session id, a cwd, a model, a host or NO_HOST) and its usage."""

    key: str
    usage: Usage
    #: For `--by session`: the session's title, cwd and parent (a sub-agent's main session).
    title: str | None = None
    cwd: str | None = None
    parent: str | None = None

    def to_dict(self, by: str) -> dict[str, Any]:
        out: dict[str, Any] = {by: self.key}
        if by == "session":
            out.update(title=self.title, cwd=self.cwd, parent=self.parent)
        out.update(self.usage.to_dict())
        return out


@dataclass(slots=True)
class UsageReport:
    """Rows in key order (sessions: a main session, then its sub-agents) and their total."""

    by: str
    rows: list[UsageRow]
    total: Usage
    prices: PriceTable
    since: str | None = None
    until: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "since": self.since,
            "until": self.until,
            "days": "UTC",
            "prices": {"date": self.prices.date, "sources": list(self.prices.sources)},
            "rows": [row.to_dict(self.by) for row in self.rows],
            "total": self.total.to_dict(),
        }


# ------------------------------------------------------------------ reports


def usage_report(
    store: "SessionStore",
    *,
    by: str = "day",
    since: str | None = None,
    until: str | None = None,
    session: str | None = None,
    cwd: str | None = None,
    fold_subagents: bool = False,
    prices: PriceTable | None = None,
    now: dt.datetime | None = None,
) -> UsageReport:
    """Usage grouped `by` one of GROUPINGS, within the filters; each API response counted once.

    `since`: a date, an ISO time or an age (`12h`, `7d`, `2w`); `until`: a date (through its end)
    or an ISO time (before it). `session`: that session and its sub-agent sessions. `cwd`: sessions
    in that folder or below. `fold_subagents`: a sub-agent session's usage is counted in its main
    session's row (`by="session"`). `by="host"`: by the machine each session was captured on,
    sessions recording none (captured before hosts were recorded) in one NO_HOST row, listed last.
    """
    if by not in GROUPINGS:
        raise UsageQueryError(f"--by must be one of {', '.join(GROUPINGS)}, not {by!r}")
    prices = prices or load_prices(store.config.prices or None)
    low = _since_hour(since, now)
    high = _until_hour(until)
    ids = _session_scope(store, session)
    catch_up(store.db, ids, writer=lambda: store.index_db)
    where, params = _filters(low, high, ids, cwd)
    key = {
        "session": "COALESCE(s.parent_id, r.session_id)" if fold_subagents else "r.session_id",
        "project": "COALESCE(s.cwd, '')",
        "model": "r.model",
        "host": "s.host",
    }.get(by, "r.hour / 24")
    joined = by in ("session", "project", "host") or cwd is not None
    rows = store.db.all(
        f"SELECT {key}, r.model, r.band, SUM(r.responses), {', '.join(f'SUM(r.{k})' for k in KINDS)} "
        f"FROM usage_rollup r{' JOIN sessions s ON s.id = r.session_id' if joined else ''}"
        f"{' WHERE ' + ' AND '.join(where) if where else ''} GROUP BY {key}, r.model, r.band",
        params,
    )
    groups: dict[Any, Usage] = {}
    keys: dict[Any, Any] = {}
    total = Usage()
    pricer = _Pricer(prices)
    for row in rows:
        group_key = keys.get(row[0])
        if group_key is None:
            group_key = keys[row[0]] = _group_key(by, row[0])
        counts = [int(v) for v in row[4:]]
        cost = pricer.cost(row[1], int(row[2]), counts)
        groups.setdefault(group_key, Usage()).add(counts, int(row[3]), cost, row[1])
        total.add(counts, int(row[3]), cost, row[1])
    if by == "session":
        report_rows = _session_rows(store, groups)
    elif by == "host":
        # Sessions without a host are keyed None (apart from any host's name), listed last as NO_HOST.
        report_rows = [
            UsageRow(NO_HOST if k is None else k, groups[k]) for k in sorted(groups, key=lambda k: (k is None, k or ""))
        ]
    else:
        report_rows = [UsageRow(str(k), groups[k]) for k in sorted(groups)]
    return UsageReport(by, report_rows, total, prices, _shown_hour(low), _shown_hour(high))


def session_usage(
    store: "SessionStore", session_ids: Iterable[str], prices: PriceTable | None = None
) -> dict[str, Usage]:
    """Each session's own usage and cost (sub-agent sessions apart), from the rollup alone."""
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return {}
    prices = prices or load_prices(store.config.prices or None)
    catch_up(store.db, ids, writer=lambda: store.index_db)
    out = {sid: Usage() for sid in ids}
    pricer = _Pricer(prices)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        names = {f"s{i}": sid for i, sid in enumerate(chunk)}
        rows = store.db.all(
            f"SELECT session_id, model, band, SUM(responses), {', '.join(f'SUM({k})' for k in KINDS)} "
            f"FROM usage_rollup WHERE session_id IN ({', '.join(':' + n for n in names)}) "
            "GROUP BY session_id, model, band",
            names,
        )
        for row in rows:
            counts = [int(v) for v in row[4:]]
            out[row[0]].add(counts, int(row[3]), pricer.cost(row[1], int(row[2]), counts), row[1])
    return out


# ------------------------------------------------------------------ pieces


class _Pricer:
    """Costs from a price table, with each (model, band)'s rates looked up once per report."""

    __slots__ = ("prices", "rates")

    def __init__(self, prices: PriceTable) -> None:
        self.prices = prices
        self.rates: dict[tuple[str, int], Rates | None] = {}

    def cost(self, model: str, band: int, counts: Sequence[int]) -> float | None:
        """USD for `counts` (KINDS order) of `model` in prompt band `band`; None when the model has no price."""
        key = (model, band)
        try:
            rates = self.rates[key]
        except KeyError:
            price = self.prices.lookup(model)
            rates = self.rates[key] = None if price is None else price.rates_for_band(band)
        return None if rates is None else rates.cost(counts)


def _group_key(by: str, value: Any) -> Any:
    """A grouped value as the report's key: a date string for the calendar groupings (a host stays None)."""
    if by == "host":
        return value
    if by not in ("day", "week", "month"):
        return value if value is not None else ""
    day = (_EPOCH + dt.timedelta(days=int(value))).date()
    if by == "week":
        monday = day - dt.timedelta(days=day.weekday())
        return monday.isoformat()
    if by == "month":
        return day.strftime("%Y-%m")
    return day.isoformat()


def _session_scope(store: "SessionStore", session: str | None) -> list[str] | None:
    """None (every session), or the named session and its sub-agent sessions."""
    if session is None:
        return None
    sid = store.get(session).id
    children = store.db.all("SELECT id FROM sessions WHERE parent_id = :id ORDER BY id", {"id": sid})
    return [sid, *(r[0] for r in children)]


def _filters(
    low: int | None, high: int | None, ids: list[str] | None, cwd: str | None
) -> tuple[list[str], dict[str, Any]]:
    where: list[str] = []
    params: dict[str, Any] = {}
    if low is not None:
        where.append("r.hour >= :low")
        params["low"] = low
    if high is not None:
        where.append("r.hour < :high")
        params["high"] = high
    if ids is not None:
        names = {f"id{i}": sid for i, sid in enumerate(ids)}
        where.append(f"r.session_id IN ({', '.join(':' + n for n in names)})")
        params.update(names)
    if cwd is not None:
        prefix = cwd.rstrip("/") or "/"
        escaped = prefix.rstrip("/").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append("(s.cwd = :cwd OR s.cwd LIKE :cwd_like ESCAPE '\\')")
        params.update(cwd=prefix, cwd_like=escaped + "/%")
    return where, params


def _session_rows(store: "SessionStore", groups: dict[Any, Usage]) -> list[UsageRow]:
    """Session rows: each main session (most expensive first), followed by its sub-agent sessions."""
    info: dict[str, tuple[str | None, str | None, str | None]] = {}
    ids = list(groups)
    for start in range(0, len(ids), 500):
        names = {f"s{i}": sid for i, sid in enumerate(ids[start : start + 500])}
        for sid, title, cwd, parent in store.db.all(
            f"SELECT id, title, cwd, parent_id FROM sessions WHERE id IN ({', '.join(':' + n for n in names)})", names
        ):
            info[sid] = (title, cwd, parent)
    rows = {sid: UsageRow(sid, usage, *info.get(sid, (None, None, None))) for sid, usage in groups.items()}
    children: dict[str, list[UsageRow]] = {}
    mains = []
    for row in rows.values():
        if row.parent is not None and row.parent in rows:
            children.setdefault(row.parent, []).append(row)
        else:
            mains.append(row)
    order = sorted(mains, key=_spend_order)
    out: list[UsageRow] = []
    for row in order:
        out.append(row)
        out.extend(sorted(children.get(row.key, []), key=_spend_order))
    return out


def _spend_order(row: UsageRow) -> tuple[float, int, str]:
    return -row.usage.cost_usd_known, -row.usage.prompt_tokens - row.usage.output_tokens, row.key


def _since_hour(value: str | None, now: dt.datetime | None) -> int | None:
    """The first hour counted, from a date, an ISO time or an age (`12h`, `7d`, `2w`)."""
    if value is None or not value.strip():
        return None
    match = _AGE.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        hours = amount * {"h": 1, "d": 24, "w": 168}[unit]
        current = now or dt.datetime.now(dt.timezone.utc)
        return max(_hour(current) - hours, 0)
    return _hour(_parse_time(value, "--since"))


def _until_hour(value: str | None) -> int | None:
    """The first hour not counted: the end of a date, or an ISO time rounded up to its hour."""
    if value is None or not value.strip():
        return None
    parsed = _parse_time(value, "--until")
    if len(value.strip()) == 10:
        return _hour(parsed) + 24
    return -(-int((parsed - _EPOCH).total_seconds()) // 3600)


def _parse_time(value: str, option: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageQueryError(
            f"{option} {value!r} is neither a date (2026-11-01), an ISO time nor an age (12h, 7d, 2w)"
        ) from None
    return parsed.replace(tzinfo=dt.timezone.utc) if parsed.tzinfo is None else parsed


def _hour(moment: dt.datetime) -> int:
    return int((moment - _EPOCH).total_seconds() // 3600)


def _shown_hour(hour: int | None) -> str | None:
    if hour is None:
        return None
    return (_EPOCH + dt.timedelta(hours=hour)).strftime("%Y-%m-%dT%H:00:00Z")


# ------------------------------------------------------------------ shown as text


def short_count(n: int) -> str:
    """A token count in at most 6 characters: 950, 12.3k, 4.56M, 1.2G."""
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= size:
            value = n / size
            return f"{value:.3g}{suffix}" if value < 1000 else f"{value:.0f}{suffix}"
    return str(n)


def cost_text(usage: Usage) -> str:
    """`$12.34`, `-` without responses, `?` when unpriced tokens make the cost unknown (`?+$1.20`: part priced)."""
    if usage.responses == 0 and not usage.unpriced_models:
        return "-"
    if usage.cost_usd is not None:
        return _dollars(usage.cost_usd)
    if usage.cost_usd_known > 0:
        return f"?+{_dollars(usage.cost_usd_known)}"
    return "?"


def _dollars(value: float) -> str:
    if value >= 1000:
        return f"${value:,.0f}"
    if 0 < value < 0.01:
        return "<$0.01"
    return f"${value:.2f}"


def hit_rate_text(usage: Usage) -> str:
    """The cache hit rate as a whole percentage, or `-` without prompt tokens."""
    rate = usage.cache_hit_rate
    return "-" if rate is None else f"{rate * 100:.0f}%"
