"""`usage --by host`: usage per machine the sessions were captured on, from the rollup and the sessions table."""

from __future__ import annotations

import csv
import io
import json
import random
import sqlite3
from collections import defaultdict
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.usage import NO_HOST, session_usage, usage_report
from tests.support.cli import run_cli

#: The kinds as the report names them, and the message usage field each comes from.
FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_write_tokens": "cache_creation_input_tokens",
    "cache_read_tokens": "cache_read_input_tokens",
}
SONNET = "claude-sonnet-4-5-20250929"


def _new(store: SessionStore, **fields: Any) -> Any:
    """A session (title, model, cwd, host, parent_id as given) whose transcript starts with the user's request."""
    session = store.create_session(title="t", **fields)
    session.append({"role": "user", "content": "go", "timestamp": "2026-11-01T00:00:00Z"})
    return session


def _figures(row: dict[str, Any]) -> dict[str, int]:
    return {k: row[k] for k in ("responses", *FIELDS)}


def _fill(store: SessionStore, seed: int = 27) -> dict[str | None, dict[str, int]]:
    """Sessions on two hosts and one recording none, with streamed pieces and a sub-agent; returns the
    expected figures per host (None: no host), summed here from the usage appended, each response once."""
    rng = random.Random(seed)
    plan = [("laptop", SONNET), ("build-box", SONNET), ("laptop", "acme-coder-9"), (None, SONNET)]
    sessions = []
    for host, model in plan:
        sessions.append((host, _new(store, model=model, host=host or "placeholder")))
    child = _new(store, model=SONNET, host="build-box", parent_id=sessions[0][1].id)
    sessions.append(("build-box", child))
    for host, session in sessions:
        if host is None:
            # A session captured before revision 0009 recorded hosts.
            store.db.run_write(
                lambda d, sid=session.id: d.execute(
                    "UPDATE sessions SET host = NULL WHERE id = :id", {"id": sid}
                ).close()
            )
    responses: dict[tuple[str, str], tuple[str | None, dict[str, int]]] = {}
    for n in range(40):
        host, session = sessions[n % len(sessions)]
        api_id = f"msg_{n}"
        usage = {
            "input_tokens": rng.randint(1, 900),
            "output_tokens": rng.randint(1, 3_000),
            "cache_creation_input_tokens": rng.randint(0, 40_000),
            "cache_read_input_tokens": rng.randint(0, 150_000),
        }
        pieces = [dict(usage, output_tokens=usage["output_tokens"] // 3), usage] if n % 3 == 0 else [usage]
        for piece in pieces:
            session.append(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"reply {n}"}],
                    "usage": piece,
                    "timestamp": f"2026-11-{1 + n % 5:02d}T{n % 24:02d}:15:00Z",
                    "api_message_id": api_id,
                }
            )
            key = (session.id, api_id)
            seen = responses.get(key, (host, {}))[1]
            responses[key] = (host, {k: max(seen.get(k, 0), v) for k, v in piece.items()})
    expected: dict[str | None, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("responses", *FIELDS), 0))
    for host, usage in responses.values():
        expected[host]["responses"] += 1
        for name, field in FIELDS.items():
            expected[host][name] += usage[field]
    return dict(expected)


def test_usage_by_host_matches_an_independent_sum_per_host(
    store: SessionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _fill(store)
    report = usage_report(store, by="host")
    assert [row.key for row in report.rows] == ["build-box", "laptop", NO_HOST], "hosts by name, no host last"
    got = {row.key: _figures(row.to_dict("host")) for row in report.rows}
    assert got == {(NO_HOST if host is None else host): figures for host, figures in expected.items()}
    assert _figures(report.total.to_dict()) == {k: sum(f[k] for f in expected.values()) for k in expected[None]}

    costs = {row.key: row.usage for row in report.rows}
    assert costs["laptop"].cost_usd is None and costs["laptop"].unpriced_models == {"acme-coder-9"}
    hosts = dict(store.db.all("SELECT id, COALESCE(host, :none) FROM sessions", {"none": NO_HOST}))
    per_session = session_usage(store, hosts)
    for host in ("build-box", NO_HOST):
        priced = sum(u.cost_usd_known for sid, u in per_session.items() if hosts[sid] == host)
        assert costs[host].cost_usd == pytest.approx(priced) and priced > 0

    out = json.loads(run_cli(capsys, "usage", "--by", "host", "--db", store.url, "--json").out)
    assert out["by"] == "host" and {r["host"]: _figures(r) for r in out["rows"]} == got
    table = list(csv.reader(io.StringIO(run_cli(capsys, "usage", "--by", "host", "--db", store.url, "--csv").out)))
    assert table[0][:2] == ["host", "responses"] and [r[0] for r in table[1:]] == [
        "build-box",
        "laptop",
        NO_HOST,
        "total",
    ]
    assert int(table[3][1]) == expected[None]["responses"]
    shown = run_cli(capsys, "usage", "--by", "host", "--db", store.url).out
    assert "(no host)" in shown and "build-box" in shown
    bad = run_cli(capsys, "usage", "--by", "machine", "--db", store.url)
    assert bad.code == 2 and "host" in bad.err


def test_usage_by_host_keeps_the_time_and_folder_filters(store: SessionStore) -> None:
    a = _new(store, model=SONNET, cwd="/work/app", host="laptop")
    b = _new(store, model=SONNET, cwd="/srv/other", host="laptop")
    for session, stamp, tokens in (
        (a, "2026-11-01T10:00:00Z", 100),
        (a, "2026-11-03T10:00:00Z", 20),
        (b, "2026-11-03T11:00:00Z", 7),
    ):
        session.append(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}],
                "usage": {"input_tokens": tokens, "output_tokens": 1},
                "timestamp": stamp,
                "api_message_id": f"m{stamp}",
            }
        )

    def hosts(**filters: Any) -> dict[str, int]:
        return {r.key: r.usage.input_tokens for r in usage_report(store, by="host", **filters).rows}

    assert hosts() == {"laptop": 127}
    assert hosts(since="2026-11-02") == {"laptop": 27}
    assert hosts(cwd="/work/app") == {"laptop": 120}
    assert hosts(session=b.id) == {"laptop": 7}


def test_the_host_report_reads_no_message(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once counted, a report by host is answered from usage_rollup and sessions: reading messages is refused."""
    import sessionstore.usage as usage_module

    with SessionStore.open(sqlite_url) as store:
        expected = _fill(store)
        usage_report(store, by="host")
        monkeypatch.setattr(usage_module, "catch_up", lambda *args, **kwargs: 0)

        def refuse_messages(action: int, table: str | None, *rest: Any) -> int:
            return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_READ and table == "messages" else sqlite3.SQLITE_OK

        store.db.conn.set_authorizer(refuse_messages)
        try:
            rows = usage_report(store, by="host").rows
        finally:
            store.db.conn.set_authorizer(None)
    assert {r.key: r.usage.responses for r in rows} == {
        (NO_HOST if h is None else h): f["responses"] for h, f in expected.items()
    }


def test_a_read_only_store_opens_its_writing_connection_only_to_count(store_url: str) -> None:
    with SessionStore.open(store_url) as writer:
        session = _new(writer, model=SONNET)
        reply = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": "2026-11-01T10:00:00Z"}
        session.append({**reply, "usage": {"input_tokens": 5, "output_tokens": 1}, "api_message_id": "m1"})
        usage_report(writer)
        with SessionStore.open(store_url, read_only=True) as reader:
            assert session_usage(reader, [session.id])[session.id].input_tokens == 5
            assert reader._index_db is None, "everything was counted: nothing to write, no second connection"
            session.append({**reply, "usage": {"input_tokens": 9, "output_tokens": 1}, "api_message_id": "m2"})
            assert session_usage(reader, [session.id])[session.id].input_tokens == 14
            assert reader._index_db is not None
