"""What a person sees from the installed console script on a fresh store of the real transcripts (issue 35).

Each test runs `sessionstore` (the console script beside this Python) as a subprocess at
80 columns on a copy of one store made by importing the shared Claude Code and Codex
folders, and checks the text, the width, the exit code and that no traceback shows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRANSCRIPTS, shared_transcripts

SCRIPT = Path(sys.executable).parent / "sessionstore"
#: The Claude Code session of the shared transcripts that has an automatic compaction.
SPOTTER = "258c7280"


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return (self.out + self.err).splitlines()


def sessionstore(url: str, *args: str, cwd: Path | None = None, columns: int = 80, **env: str) -> Run:
    """Run the installed console script against the store at `url`, at `columns` columns."""
    environ = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "SESSIONSTORE_DB_URL"}}
    environ.update({"COLUMNS": str(columns), "SESSIONSTORE_DB_URL": url, **env})
    proc = subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def ok(run: Run) -> Run:
    """`run`, after checking it exited 0 and printed no traceback."""
    assert run.code == 0, run.err
    assert "Traceback" not in run.out + run.err
    return run


def fails(run: Run, code: int) -> str:
    """The one error line of `run`, after checking its exit code and that no traceback shows."""
    assert run.code == code, (run.code, run.out, run.err)
    assert "Traceback" not in run.out + run.err, run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    return lines[0]


def too_wide(run: Run, width: int = 80) -> list[str]:
    """The lines of `run`'s output longer than `width` characters."""
    return [line for line in run.lines if len(line) > width]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store holding every shared transcript, imported once per module through the console script."""
    shared_transcripts()  # a skip, or a failure under .ci/run (SESSIONSTORE_REQUIRE_TRANSCRIPTS)
    path = tmp_path_factory.mktemp("outside") / "template.db"
    url = f"sqlite:///{path}"
    for tool in ("claude-code", "codex"):
        ok(sessionstore(url, "import", tool, str(TRANSCRIPTS / tool)))
    return path


@pytest.fixture
def url(template: Path, tmp_path: Path) -> str:
    """A fresh copy of the imported store, for one test."""
    target = tmp_path / "store.db"
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


@pytest.fixture
def any_url(store_url: str, template: Path, tmp_path: Path) -> str:
    """A fresh store of the shared transcripts on each engine (PostgreSQL: imported through the console script)."""
    if store_url.startswith("sqlite"):
        target = tmp_path / "store.db"
        shutil.copyfile(template, target)
        return f"sqlite:///{target}"
    for tool in ("claude-code", "codex"):
        ok(sessionstore(store_url, "import", tool, str(TRANSCRIPTS / tool)))
    return store_url


def as_json(run: Run) -> Any:
    """`run`'s stdout as JSON, after checking it succeeded."""
    return json.loads(ok(run).out)


def forked(url: str, session: str) -> str:
    """The id of a new native fork of `session`'s active view (compacting it writes to it, not to a continuation)."""
    return str(as_json(sessionstore(url, "fork", session, "--json"))["id"])


def view_uuids(url: str, session: str) -> list[str]:
    """The uuids of `session`'s active view, in order."""
    return [e["uuid"] for e in as_json(sessionstore(url, "view", session, "--json"))["entries"]]


def test_history_with_a_partial_boundary_fits_80_columns(url: str) -> None:
    sid = forked(url, SPOTTER)
    middle = view_uuids(url, sid)[80]
    ok(sessionstore(url, "compact", sid, "--up-to", middle))
    listing = ok(sessionstore(url, "history", sid))
    assert "partial-up_to" in listing.out and "full" in listing.out, listing.out
    assert not too_wide(listing), too_wide(listing)
    for k in ("1", "2"):
        before = ok(sessionstore(url, "history", sid, "-b", k))
        assert not too_wide(before), too_wide(before)[:3]


def test_eval_table_is_whole_at_80_columns(url: str) -> None:
    run = ok(sessionstore(url, "eval", "--all"))
    assert not too_wide(run), too_wide(run)[:3]
    table = [line for line in run.out.splitlines() if any(name in line for name in ("extractive", "strategy"))]
    assert len(table) >= 2, run.out
    assert not [line for line in table if "…" in line], "no header or figure of the table is cut: " + "\n".join(table)
    assert "0." in run.out and "%" in run.out, "the ratios and shares are printed"


def first_prompt(url: str, session: str) -> str:
    """The uuid of the first user message with several lines of text in `session`'s active view."""
    entries = as_json(sessionstore(url, "view", session, "--json"))["entries"]
    return next(e["uuid"] for e in entries if isinstance(e["content"], str) and "\n" in e["content"].strip())


def test_pins_prints_one_short_line_per_pin(url: str) -> None:
    sid = forked(url, SPOTTER)
    pinned = first_prompt(url, sid)
    ok(sessionstore(url, "pin", sid, pinned))
    run = ok(sessionstore(url, "pins", sid))
    assert not too_wide(run), too_wide(run)
    [row] = [line for line in run.out.splitlines() if "user" in line]
    assert "\\n" not in row, "the text's line breaks are spaces, not a literal \\n"
    shown = row.split()[0]
    assert pinned.startswith(shown) and len(shown) >= 8, row
    assert row.endswith("…"), "the text is cut to the width with an ellipsis"


def test_secrets_shows_uuid_prefixes_that_tell_the_messages_apart(url: str, tmp_path: Path) -> None:
    sid = ok(sessionstore(url, "new", "--title", "keys")).out.strip()
    lines = []
    for i in range(4):
        command = f"export GITHUB_TOKEN=ghp_{'abcdefghijklmnopqrstuvwxyz012345678'}{i} && deploy --with-a-long-flag"
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": command}}
        lines += [
            {"role": "user", "content": f"deploy number {i}"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "done"}]},
            {"role": "assistant", "content": "deployed"},
        ]
    batch = tmp_path / "batch.jsonl"
    batch.write_text("".join(json.dumps(m) + "\n" for m in lines))
    ok(sessionstore(url, "append", sid, str(batch)))
    found = as_json(sessionstore(url, "secrets", sid, "--json"))
    assert len({f["uuid"] for f in found}) == 4, found
    run = ok(sessionstore(url, "secrets", sid))
    assert not too_wide(run), too_wide(run)
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in run.out.splitlines() if sid[:8] in line]
    shown = {row[1]: row[2] for row in rows}  # seq -> the uuid cell
    assert len(shown) == 4 and len(set(shown.values())) == 4, f"each message its own prefix: {run.out}"
    for f in found:
        prefix = shown[str(f["seq"])]
        assert "…" not in prefix and f["uuid"].startswith(prefix), (prefix, f["uuid"])
        assert not any(g["uuid"].startswith(prefix) for g in found if g["uuid"] != f["uuid"])
        assert as_json(sessionstore(url, "show", sid, prefix, "--json"))["message"]["uuid"] == f["uuid"]


def test_recall_refuses_a_negative_cursor(any_url: str) -> None:
    line = fails(sessionstore(any_url, "recall", SPOTTER, "--cursor", "-1"), 2)
    assert line.startswith("error: -1 is not a cursor"), line
    first = as_json(sessionstore(any_url, "recall", SPOTTER, "--max-tokens", "200", "--json"))
    assert first["next_cursor"] is not None, "a page that leaves earlier messages names its cursor"
    after = as_json(
        sessionstore(any_url, "recall", SPOTTER, "--max-tokens", "200", "--cursor", str(first["next_cursor"]), "--json")
    )
    assert after["messages"] and after["messages"] != first["messages"], "the cursor a page gave pages on"


def test_sessions_on_an_unknown_host_names_the_hosts_there_are(any_url: str) -> None:
    hosts = sorted({row["host"] for row in as_json(sessionstore(any_url, "sessions", "--json"))})
    run = sessionstore(any_url, "sessions", "--host", "nohost")
    assert run.code == 0 and "Traceback" not in run.err, run.err
    said = run.err.strip()
    assert "no sessions here yet" not in said, said
    assert "nohost" in said and all(host in said for host in hosts), said


def test_chat_stats_of_a_session_that_is_no_fork(url: str, tmp_path: Path) -> None:
    sid = ok(sessionstore(url, "new", "--title", "plain")).out.strip()
    environ = {"ANTHROPIC_API_KEY": "sk-ant-test-stats", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    proc = subprocess.run(
        [str(SCRIPT), "chat", sid, "--workdir", str(tmp_path), "--db", url],
        input="/stats\n",
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80", **environ},
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "view tokens" in proc.stdout, proc.stdout
    assert "None" not in proc.stdout, proc.stdout


def test_new_stores_a_relative_cwd_as_an_absolute_path(url: str, tmp_path: Path) -> None:
    (tmp_path / "work" / "repo").mkdir(parents=True)
    made = as_json(sessionstore(url, "new", "--cwd", "work/repo", "--json", cwd=tmp_path))
    [row] = [r for r in as_json(sessionstore(url, "sessions", "--json")) if r["id"] == made["id"]]
    assert row["cwd"] == str((tmp_path / "work" / "repo").resolve()), row["cwd"]


def test_compact_with_an_unreachable_api_is_a_runtime_failure(url: str) -> None:
    from tests.test_secrets import closed_port_url

    sid = forked(url, SPOTTER)
    before = as_json(sessionstore(url, "stats", sid, "--json"))["view_version"]
    down = {"ANTHROPIC_API_KEY": "sk-ant-test-unreachable", "ANTHROPIC_BASE_URL": closed_port_url()}
    line = fails(sessionstore(url, "compact", sid, "--summarizer", "anthropic", **down), 1)
    assert line.startswith("error: ") and "sk-ant-test-unreachable" not in line, line
    assert as_json(sessionstore(url, "stats", sid, "--json"))["view_version"] == before, "nothing written"
    no_key = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "ANTHROPIC_BASE_URL": closed_port_url()}
    assert "credentials" in fails(sessionstore(url, "compact", sid, "--summarizer", "anthropic", **no_key), 2)


def seq_and_uuid(url: str, session: str, position: int) -> tuple[str, str]:
    """(seq, uuid) of the active view's entry at `position`, as `view --json` gives them."""
    entry = as_json(sessionstore(url, "view", session, "--json"))["entries"][position]
    return str(entry["seq"]), entry["uuid"]


@pytest.mark.parametrize("option,kind", [("--up-to", "partial-up_to"), ("--from", "partial-from")])
@pytest.mark.parametrize("form", ["seq", "prefix"])
def test_compact_takes_a_message_as_show_and_fork_take_it(url: str, option: str, kind: str, form: str) -> None:
    sid = forked(url, SPOTTER)
    seq, uuid = seq_and_uuid(url, sid, 100)
    named = seq if form == "seq" else uuid[:8]
    assert as_json(sessionstore(url, "show", sid, named, "--json"))["message"]["uuid"] == uuid
    done = as_json(sessionstore(url, "compact", sid, option, named, "--json"))
    assert done["kind"] == kind, done
    assert uuid in view_uuids(url, sid), "the message named stays in the view"


def test_pin_and_unpin_take_a_seq_or_a_prefix(any_url: str) -> None:
    sid = forked(any_url, SPOTTER)
    uuid = first_prompt(any_url, sid)
    seq = str(as_json(sessionstore(any_url, "show", sid, uuid, "--json"))["message"]["seq"])
    pinned = as_json(sessionstore(any_url, "pin", sid, seq, "--json"))
    assert pinned["uuid"] == uuid, pinned
    assert as_json(sessionstore(any_url, "unpin", sid, uuid[:8], "--json")) == {"uuid": uuid, "unpinned": True}
    assert as_json(sessionstore(any_url, "pin", sid, uuid[:10], "--json"))["uuid"] == uuid
    line = fails(sessionstore(any_url, "pin", sid, "999999"), 2)
    assert "999999" in line, line


def test_one_resolver_names_the_same_message_everywhere(any_url: str) -> None:
    sid = forked(any_url, SPOTTER)
    uuids = view_uuids(any_url, sid)
    # Two uuids of the view sharing a first letter (digits name a seq first): the letter alone names neither.
    shared = next(u[0] for u in uuids if u[0].isalpha() and sum(v.startswith(u[0]) for v in uuids) > 1)
    for args in (("show", sid), ("pin", sid), ("compact", sid, "--up-to"), ("fork", sid, "--at"), ("unpin", sid)):
        line = fails(sessionstore(any_url, *args, shared), 2)
        assert f"{shared!r} is ambiguous: it starts " in line and "give more characters" in line, (args, line)


def test_a_small_window_has_a_positive_threshold_and_prepare_leaves_a_small_view(url: str, tmp_path: Path) -> None:
    sid = ok(sessionstore(url, "new", "--context-window", "30000")).out.strip()
    talk = [{"role": "user", "content": "what is in the readme?"}, {"role": "assistant", "content": "A short intro."}]
    batch = tmp_path / "talk.jsonl"
    batch.write_text("".join(json.dumps(m) + "\n" for m in talk))
    ok(sessionstore(url, "append", sid, str(batch)))
    planned = as_json(sessionstore(url, "prepare", sid, "--dry-run", "--json"))
    threshold = planned["thresholds"]["autocompact_threshold"]
    assert 30000 // 10 <= threshold < 30000, planned["thresholds"]
    assert planned["thresholds"]["warning_at"] >= 0, planned["thresholds"]
    assert planned["above_threshold"] is False
    ok(sessionstore(url, "prepare", sid))
    assert as_json(sessionstore(url, "history", sid, "--json")) == [], "a two-message view is not compacted"


def test_the_usage_chart_draws_the_days_its_header_counts(url: str) -> None:
    import asyncio
    from datetime import date

    from sessionstore.cli.browse.app import make_app
    from sessionstore.cli.browse.usage import DayChart

    rows = as_json(sessionstore(url, "usage", "--by", "day", "--json"))["rows"]
    first, last = rows[0]["day"], rows[-1]["day"]
    days = (date.fromisoformat(last) - date.fromisoformat(first)).days + 1
    assert days > 80, "the shared transcripts span more days than 80 columns"
    app = make_app(url)
    seen: list[str] = []

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.app.workers.wait_for_complete()
            await pilot.press("u")
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            chart = pilot.app.screen.query_one(DayChart)
            seen.extend(chart.render().plain.splitlines())

    try:
        asyncio.run(main())
    finally:
        app.store.close()
    title, axis = seen[0], seen[-1]
    assert f"{days} days" in title, title
    assert axis.startswith(first) and axis.rstrip().endswith(last), f"the bars span {first}..{last}: {axis!r}"
    assert all(len(line) <= 80 for line in seen), seen


def test_every_table_of_the_read_commands_fits_80_columns(url: str) -> None:
    sid = forked(url, SPOTTER)
    ok(sessionstore(url, "compact", sid, "--up-to", "80"))
    ok(sessionstore(url, "pin", sid, first_prompt(url, sid)))
    for args in (
        ("sessions",),
        ("view", sid),
        ("stats", sid),
        ("history", sid),
        ("history", sid, "-b", "2"),
        ("pins", sid),
        ("eval", sid),
        ("doctor",),
        ("spill", "list", sid),
        ("prepare", sid, "--dry-run"),
        *(("usage", "--by", by) for by in ("day", "week", "month", "session", "project", "model", "host")),
    ):
        run = ok(sessionstore(url, *args))
        assert run.lines and not too_wide(run), (args, too_wide(run)[:3])
