"""Usage reports and their prices: counting each response once, the filters, and costs worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.prices import PriceTableError, load_prices
from sessionstore.usage import session_usage, usage_report
from tests.support.cli import run_cli


def _usage(
    input_tokens: int = 0, output: int = 0, write_5m: int = 0, write_1h: int = 0, read: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output,
        "cache_creation_input_tokens": write_5m + write_1h,
        "cache_read_input_tokens": read,
        "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
    }


def _session(
    store: SessionStore,
    model: str | None = "claude-sonnet-4-5-20250929",
    cwd: str | None = None,
    parent_id: str | None = None,
) -> Any:
    session = store.create_session(title="t", model=model, cwd=cwd, parent_id=parent_id)
    session.append({"role": "user", "content": "go", "timestamp": "2026-11-02T09:00:00Z"})
    return session


def _reply(
    session: Any,
    usage: dict[str, Any],
    *,
    api_id: str | None = "msg_1",
    model: str | None = None,
    timestamp: str = "2026-11-02T10:00:00Z",
    text: str = "done",
) -> None:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "usage": usage,
        "timestamp": timestamp,
        # API ids are unique across sessions (the same id in two sessions is one response, copied).
        "api_message_id": f"{api_id}_{session.id}" if api_id else None,
    }
    if model:
        message["metadata"] = {"model": model}
    session.append(message)


# ------------------------------------------------------------ prices


def test_a_known_models_cost_is_the_rates_times_the_tokens(store: SessionStore) -> None:
    s = _session(store)
    _reply(s, _usage(1_000, 500, 2_000, 3_000, 10_000))
    usage = session_usage(store, [s.id])[s.id]
    # claude-sonnet-4-5: $3 input, $15 output, $3.75 5m write, $6 1h write, $0.30 read per million
    by_hand = (1_000 * 3 + 500 * 15 + 2_000 * 3.75 + 3_000 * 6 + 10_000 * 0.30) / 1_000_000
    assert usage.cost_usd == pytest.approx(by_hand, rel=1e-12) == pytest.approx(0.039)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_write_5m, usage.cache_write_1h, usage.cache_read) == (
        1_000,
        500,
        2_000,
        3_000,
        10_000,
    )
    assert usage.cache_hit_rate == pytest.approx(10_000 / 16_000)


def test_cache_writes_without_the_lifetime_split_are_5_minute_writes(store: SessionStore) -> None:
    s = _session(store)
    _reply(s, {"input_tokens": 10, "output_tokens": 0, "cache_creation_input_tokens": 100_000})
    usage = session_usage(store, [s.id])[s.id]
    assert (usage.cache_write_5m, usage.cache_write_1h) == (100_000, 0)
    assert usage.cost_usd == pytest.approx((100_000 * 3.75 + 10 * 3) / 1_000_000)


def test_an_unknown_model_has_an_unknown_cost_never_zero(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    known = _session(store)
    _reply(known, _usage(100_000))
    unknown = _session(store, model="acme-coder-9")
    _reply(unknown, _usage(1_000_000, 1_000))
    costs = session_usage(store, [known.id, unknown.id])
    assert costs[known.id].cost_usd == pytest.approx(0.3)
    assert costs[unknown.id].cost_usd is None and costs[unknown.id].cost_usd_known == 0
    assert costs[unknown.id].unpriced_models == {"acme-coder-9"}
    report = usage_report(store, by="day")
    assert report.total.cost_usd is None, "a total with unpriced tokens is not a price"
    assert report.total.cost_usd_known == pytest.approx(0.3)
    result = run_cli(capsys, "usage", "--by", "session", "--db", store.url)
    assert result.code == 0 and "?+$0.30" in result.out and "acme-coder-9" in result.out
    rows = json.loads(run_cli(capsys, "usage", "--by", "model", "--db", store.url, "--json").out)["rows"]
    assert {r["model"]: r["cost_usd"] for r in rows} == {"acme-coder-9": None, "claude-sonnet-4-5-20250929": 0.3}


def test_a_user_price_file_adds_and_replaces_models(
    store: SessionStore, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _session(store, model="acme-coder-9")
    _reply(s, _usage(2_000_000, 1_000_000))
    other = _session(store)
    _reply(other, _usage(1_000_000))
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "date": "2026-12-01",
                "models": {
                    "acme-coder-9": {
                        "input": 0.5,
                        "output": 2,
                        "cache_write_5m": 0.5,
                        "cache_write_1h": 0.5,
                        "cache_read": 0.05,
                    },
                    "claude-sonnet-4-5": {
                        "input": 1,
                        "output": 5,
                        "cache_write_5m": 1,
                        "cache_write_1h": 1,
                        "cache_read": 0.1,
                    },
                },
            }
        )
    )
    table = load_prices(prices)
    costs = session_usage(store, [s.id, other.id], prices=table)
    assert costs[s.id].cost_usd == pytest.approx(2 * 0.5 + 1 * 2)
    assert costs[other.id].cost_usd == pytest.approx(1.0), "the user's entry replaces the shipped one"
    assert load_prices().lookup("claude-opus-4-6") is not None and table.lookup("claude-opus-4-6") is not None

    monkeypatch.setenv("SESSIONSTORE_PRICES", str(prices))
    out = json.loads(run_cli(capsys, "usage", "--by", "session", "--db", store.url, "--json").out)
    assert {r["session"]: r["cost_usd"] for r in out["rows"]} == {s.id: 3.0, other.id: 1.0}
    assert str(prices) in out["prices"]["sources"]

    prices.write_text('{"models": {"x": {"input": 1}}}')
    result = run_cli(capsys, "usage", "--db", store.url)
    assert result.code == 2 and result.err.count("\n") == 1 and "'output' must be" in result.err


def test_long_context_rates_apply_to_every_token_of_a_request_over_the_threshold(store: SessionStore) -> None:
    over = _session(store)
    _reply(over, _usage(150_000, 1_000, read=50_001))
    at = _session(store)
    _reply(at, _usage(150_000, 1_000, read=50_000))
    opus = _session(store, model="claude-opus-4-6")
    _reply(opus, _usage(150_000, 1_000, read=50_001))
    costs = session_usage(store, [over.id, at.id, opus.id])
    # Sonnet 4.5 above 200K prompt tokens: $6 input, $22.50 output, $0.60 read (base: $3, $15, $0.30)
    assert costs[over.id].cost_usd == pytest.approx((150_000 * 6 + 1_000 * 22.5 + 50_001 * 0.6) / 1e6)
    assert costs[at.id].cost_usd == pytest.approx((150_000 * 3 + 1_000 * 15 + 50_000 * 0.3) / 1e6)
    assert costs[opus.id].cost_usd == pytest.approx((150_000 * 5 + 1_000 * 25 + 50_001 * 0.5) / 1e6)


def test_a_long_context_threshold_must_be_one_the_store_records(tmp_path: Path) -> None:
    prices = tmp_path / "p.json"
    rates = {"input": 1, "output": 1, "cache_write_5m": 1, "cache_write_1h": 1, "cache_read": 1}
    entry = {**rates, "long_context": {**rates, "above_prompt_tokens": 128_000}}
    prices.write_text(json.dumps({"models": {"m": entry}}))
    with pytest.raises(PriceTableError, match="200,000"):
        load_prices(prices)


def test_model_ids_are_matched_without_dates_and_prefixes() -> None:
    table = load_prices()
    for name in (
        "claude-sonnet-4-20250514",
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5[1m]",
        "claude-sonnet-4@20250514",
    ):
        assert table.lookup(name) is not None, name
    assert table.lookup("claude-sonnet-4-7") is None, "a version the table does not name is unknown, not a neighbour"
    assert table.lookup("gpt-5.3-codex") is not None


# ------------------------------------------------------------ counting


def test_streamed_pieces_count_once_even_when_counted_apart(store: SessionStore) -> None:
    s = _session(store)
    _reply(s, _usage(3, 10, 8_000, read=17_000), text="thinking")
    assert session_usage(store, [s.id])[s.id].output_tokens == 10
    _reply(s, _usage(3, 441, 8_000, read=17_000), timestamp="2026-11-02T11:30:00Z", text="the answer")
    usage = session_usage(store, [s.id])[s.id]
    assert (usage.responses, usage.input_tokens, usage.output_tokens, usage.cache_write_5m) == (1, 3, 441, 8_000)
    report = usage_report(store, by="day")
    assert [(r.key, r.usage.output_tokens) for r in report.rows] == [("2026-11-02", 441)]
    _reply(s, _usage(5, 7), api_id=None, text="no id")
    _reply(s, _usage(5, 7), api_id=None, text="no id again")
    assert session_usage(store, [s.id])[s.id].responses == 3, "a message with usage and no id is a response"


def test_filters_by_time_session_and_folder(store: SessionStore, capsys: pytest.CaptureFixture[str]) -> None:
    a = _session(store, cwd="/work/app")
    _reply(a, _usage(100), timestamp="2026-11-01T23:30:00Z")
    _reply(a, _usage(200), api_id="msg_2", timestamp="2026-11-02T00:30:00+01:00")
    _reply(a, _usage(400), api_id="msg_3", timestamp="2026-11-03T08:00:00Z")
    b = _session(store, cwd="/work/application")
    _reply(b, _usage(1_000), timestamp="2026-11-02T12:00:00Z")
    child = _session(store, cwd="/tmp/agent", parent_id=a.id)
    _reply(child, _usage(10_000), timestamp="2026-11-02T12:00:00Z")

    def days(**filters: Any) -> dict[str, int]:
        return {r.key: r.usage.input_tokens for r in usage_report(store, by="day", **filters).rows}

    assert days() == {"2026-11-01": 300, "2026-11-02": 11_000, "2026-11-03": 400}, "UTC days"
    assert days(since="2026-11-02") == {"2026-11-02": 11_000, "2026-11-03": 400}
    assert days(until="2026-11-02") == {"2026-11-01": 300, "2026-11-02": 11_000}
    assert days(since="2026-11-03T07:59:00Z", until="2026-11-03T08:00:01Z") == {"2026-11-03": 400}
    assert days(session=a.id[:8]) == {"2026-11-01": 300, "2026-11-02": 10_000, "2026-11-03": 400}
    assert days(cwd="/work/app/") == {"2026-11-01": 300, "2026-11-03": 400}
    projects = {r.key: r.usage.input_tokens for r in usage_report(store, by="project").rows}
    assert projects == {"/work/app": 700, "/work/application": 1_000, "/tmp/agent": 10_000}
    weeks = {r.key: r.usage.input_tokens for r in usage_report(store, by="week").rows}
    assert weeks == {"2026-10-26": 300, "2026-11-02": 11_400}, "weeks start on Monday (2026-11-02 is one)"
    result = run_cli(capsys, "usage", "--since", "yesterday", "--db", store.url)
    assert result.code == 2 and result.err.startswith("error: --since 'yesterday'")


def test_deleting_a_session_deletes_its_usage(store: SessionStore) -> None:
    s = _session(store)
    _reply(s, _usage(100))
    assert usage_report(store).total.input_tokens == 100
    store.delete(s.id)
    assert usage_report(store).total.input_tokens == 0
    for table in ("usage_rollup", "usage_responses", "usage_marks"):
        assert store.db.one(f"SELECT COUNT(*) FROM {table}")[0] == 0, table


# ------------------------------------------------------------ sessions and stats


def test_sessions_show_each_sessions_cost_from_100_columns_and_stats_its_usage(
    store: SessionStore, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionstore.cli.common import console

    priced = _session(store)
    _reply(priced, _usage(100_000))
    unpriced = _session(store, model="acme-coder-9")
    _reply(unpriced, _usage(5))
    listed = json.loads(run_cli(capsys, "sessions", "--db", store.url, "--json").out)
    assert {r["id"]: r["cost_usd"] for r in listed} == {priced.id: pytest.approx(0.3), unpriced.id: None}

    monkeypatch.setattr(console, "width", 120)
    wide = run_cli(capsys, "sessions", "--db", store.url).out
    assert "cost" in wide and "│ $0.30 │" in wide and "│     ? │" in wide
    monkeypatch.setattr(console, "width", 99)
    assert "cost" not in run_cli(capsys, "sessions", "--db", store.url).out

    stats = json.loads(run_cli(capsys, "stats", priced.id, "--db", store.url, "--json").out)
    assert stats["usage"]["input_tokens"] == 100_000 and stats["usage"]["cost_usd"] == pytest.approx(0.3)
    monkeypatch.setattr(console, "width", 80)
    table = run_cli(capsys, "stats", unpriced.id, "--db", store.url).out
    assert "cost" in table and "?" in table and "acme-coder-9" in table


def test_a_report_counts_what_was_appended_after_the_last_one_deletes_included(store: SessionStore) -> None:
    a = _session(store)
    _reply(a, _usage(100))
    assert usage_report(store).total.input_tokens == 100
    assert usage_report(store).total.input_tokens == 100, "nothing new: nothing counted twice"
    b = _session(store)
    _reply(b, _usage(200))
    _reply(b, _usage(400), api_id="msg_2")
    assert usage_report(store).total.input_tokens == 700
    store.delete(b.id)
    _reply(a, _usage(50), api_id="msg_3")
    assert usage_report(store).total.input_tokens == 150, "a row appended after a delete is counted"
    _reply(a, _usage(7), api_id="msg_4")
    assert usage_report(store, by="model").total.input_tokens == 157


# ------------------------------------------------------------ the HTML export


def _usage_line(store: SessionStore, session_id: str) -> str | None:
    import io
    import re

    from sessionstore.interchange.export import export_html

    out = io.StringIO()
    export_html(store.get(session_id), out)
    found = re.search(r'<p class="usage" id="usage">(.*?)</p>', out.getvalue())
    return found.group(1) if found else None


def test_the_html_export_header_shows_the_sessions_usage_and_cost(store: SessionStore) -> None:
    s = _session(store)
    _reply(s, _usage(1_000, 500, 2_000, 3_000, 10_000))
    assert _usage_line(store, s.id) == (
        "API usage: 1 responses · input 1,000 · cache write 5,000 (5m 2,000, 1h 3,000) · cache read 10,000 · "
        "output 500 · cache hit 62% · cost $0.04 (prices of 2026-12-02)"
    )
    hostile = _session(store, model=None)
    _reply(hostile, _usage(10), model="<script>alert(1)</script>")
    line = _usage_line(store, hostile.id) or ""
    assert "cost unknown (&lt;script&gt;alert(1)&lt;/script&gt; not in the price table; the rest $0.00)" in line
    assert "<script>" not in line
    quiet = store.create_session(title="no usage")
    quiet.append({"role": "user", "content": "hi"})
    assert _usage_line(store, quiet.id) is None
