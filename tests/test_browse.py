"""`sessionstore browse`, driven headlessly with Textual's pilot on a store holding every shared transcript.

Expectations come from elsewhere: the session list from `store.list`, the view
before a boundary and its summary from `history --boundary K --json`, a
spilled original from `spill_original`, exports from `sessionstore export`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from sessionstore import SessionStore
from sessionstore.cli.browse.app import make_app
from sessionstore.cli.browse.boundary import BoundaryScreen
from sessionstore.cli.browse.exportscreen import ExportScreen
from sessionstore.cli.browse.message import MessageScreen, OriginalScreen
from sessionstore.cli.browse.search import SEARCH_LIMIT
from sessionstore.cli.browse.session import SessionScreen
from sessionstore.cli.browse.sessions import SessionsScreen
from sessionstore.cli.browse.viewlist import PAGE, ViewList
from sessionstore.compaction.engine import compact
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.interchange.importing import import_paths
from sessionstore.interchange.install import resume_command
from sessionstore.storage.read import paging
from sessionstore.storage.read.history import boundaries
from sessionstore.storage.write.spill import list_spills, spill_original
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static
from tests.conftest import ENGINES, TRANSCRIPTS, shared_transcripts
from tests.support.cli import run_cli
from tests.support.messages import conversation
from tests.support.newstore import new_store_url
from tests.support.pilot import drive, settle


@dataclasses.dataclass
class Corpus:
    url: str
    store: SessionStore
    spilled_session: str


@pytest.fixture(scope="module", params=ENGINES)
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """Every shared transcript imported; the tool-heavy one prepared with a small budget so it has spills."""
    shared_transcripts()
    with new_store_url(request.param, tmp_path_factory.mktemp("browse") / "corpus.db") as url:
        store = SessionStore.open(url)
        import_paths(store, [TRANSCRIPTS / "claude-code"], source="claude-code")
        import_paths(store, [TRANSCRIPTS / "codex"], source="codex")
        heavy = store.db.one("SELECT session_id FROM imports WHERE path LIKE '%tool_heavy.jsonl'")[0]
        config = dataclasses.replace(
            store.config, tool_result_max_chars=1000, microcompact_enabled=False, snip_enabled=False
        )
        session = store.get(heavy)
        Pipeline(store, config=config).prepare(session)  # a local write: it lands on the local continuation
        assert list_spills(session), "the small budget spills some of the real tool results"
        try:
            yield Corpus(url, store, session.id)
        finally:
            store.close()


def all_rows(listing: ViewList) -> list[Any]:
    return [listing.row_at(i) for i in range(listing.total)]


# ------------------------------------------------------------------ sessions


def test_sessions_screen_lists_every_session_and_the_filter_narrows(corpus: Corpus) -> None:
    everything = corpus.store.list(limit=1000)
    wanted = "spotter"
    narrowed = [
        r["id"] for r in everything if any(wanted in (r[k] or "").lower() for k in ("id", "title", "cwd", "model"))
    ]
    assert 0 < len(narrowed) < len(everything)
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        assert isinstance(screen, SessionsScreen)
        seen["all"] = [r.id for r in screen.rows]
        seen["table_rows"] = screen.table.row_count
        await pilot.press("f", *wanted)
        await settle(pilot)
        seen["filtered"] = [r.id for r in screen.rows]
        seen["filtered_rows"] = screen.table.row_count
        await pilot.press("enter", "enter")
        await settle(pilot)
        seen["opened"] = pilot.app.screen

    drive(make_app(corpus.url), steps)
    assert seen["all"] == [r["id"] for r in everything] and seen["table_rows"] == len(everything)
    assert seen["filtered"] == narrowed and seen["filtered_rows"] == len(narrowed)
    assert isinstance(seen["opened"], SessionScreen) and seen["opened"].session.id == narrowed[0]


def test_preview_pane_shows_first_and_latest_typed_messages(corpus: Corpus) -> None:
    first = corpus.store.list(limit=1)[0]
    session = corpus.store.get(first["id"])
    typed = [m for m in session.transcript() if m.role == "user" and m.type == "user" and paging.typed_text(m.content)]
    seen: dict[str, str] = {}

    async def steps(pilot: Pilot[None]) -> None:
        seen["pane"] = str(pilot.app.screen.query_one("#preview", Static).visual)

    drive(make_app(corpus.url), steps)
    pane = " ".join(seen["pane"].split())
    assert first["id"] in pane and (first["cwd"] or "-") in pane
    assert " ".join(paging.typed_text(typed[0].content).split())[:60] in pane
    assert " ".join(paging.typed_text(typed[-1].content).split())[:60] in pane


# ----------------------------------------------------------- boundary screen


def with_boundaries(store: SessionStore) -> list[str]:
    return [r["id"] for r in store.list(limit=1000) if boundaries(store.get(r["id"]))]


def test_boundary_screen_matches_history_json(corpus: Corpus, capsys: pytest.CaptureFixture[str]) -> None:
    ids = with_boundaries(corpus.store)
    assert len(ids) >= 3, "spotter, fasthooks and the codex rollout each hold a compaction"
    for session_id in ids:
        expected = json.loads(
            run_cli(capsys, "history", session_id, "--boundary", "1", "--json", "--db", corpus.url).out
        )
        summary = json.loads(
            run_cli(capsys, "history", session_id, "--boundary", "1", "--summary", "--json", "--db", corpus.url).out
        )
        seen: dict[str, Any] = {}

        async def steps(pilot: Pilot[None]) -> None:
            assert isinstance(pilot.app.screen, SessionScreen)
            await pilot.press("b", "enter")
            await settle(pilot)
            screen = pilot.app.screen
            assert isinstance(screen, BoundaryScreen)
            before = screen.query_one("#before-list", ViewList)
            seen["rows"] = all_rows(before)
            seen["shown"] = [
                paging.message_at(screen.session, r.seq, version=before.source.version).content for r in seen["rows"]
            ]
            await pilot.press("2")
            await settle(pilot)
            seen["tab"] = screen.active
            seen["summary"] = str(screen.query_one("#summary-text", Static).visual)
            await pilot.press("1", "enter")
            await settle(pilot)
            seen["detail"] = pilot.app.screen

        drive(make_app(corpus.url, session_id=session_id), steps)
        entries = expected["entries"]
        keys = ("position", "uuid", "seq", "role", "type", "subtype", "tokens", "replaced", "is_compact_summary")
        assert [{k: getattr(r, k) for k in keys} for r in seen["rows"]] == [{k: e[k] for k in keys} for e in entries]
        assert seen["shown"] == [e["content"] for e in entries]
        assert seen["tab"] == "summary"
        assert seen["summary"] == (summary["summary"] or "(no summary recorded)") == expected["boundary"]["summary"]
        assert isinstance(seen["detail"], MessageScreen)
        assert seen["detail"].shown.message.uuid == entries[0]["uuid"]


def test_view_before_marks_what_the_boundary_summarized(corpus: Corpus, capsys: pytest.CaptureFixture[str]) -> None:
    session_id = with_boundaries(corpus.store)[0]
    expected = json.loads(run_cli(capsys, "history", session_id, "--boundary", "1", "--json", "--db", corpus.url).out)
    summarized = {m["seq"] for m in expected["summarized"]}
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("b", "enter")
        await settle(pilot)
        before = pilot.app.screen.query_one("#before-list", ViewList)
        seen["marked"] = {r.seq for r in all_rows(before) if r.seq in before.marked}

    drive(make_app(corpus.url, session_id=session_id), steps)
    assert seen["marked"] == summarized & {e["seq"] for e in expected["entries"]}
    assert seen["marked"]


def grown_session(store: SessionStore, compactions: int) -> Any:
    """A synthetic session compacted `compactions` times (the last one partial, keeping a suffix)."""
    s = store.create_session(title="grown", model="claude-sonnet-4-5-20250929")
    source = conversation(400 * compactions, seed=11)
    for round_ in range(compactions):
        batch = [next(source) for _ in range(400)]
        while batch[-1]["role"] != "assistant" or any(b.get("type") == "tool_use" for b in batch[-1]["content"]):
            batch.pop()
        s.append_many(batch)
        if round_ < compactions - 1:
            compact(s)
        else:
            users = [e for e in s.active_entries() if e.role == "user" and isinstance(e.content, str)]
            compact(s, up_to_uuid=users[-3].uuid)
        s.append({"role": "user", "content": f"next round {round_}"})
        s.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    return s


def test_preserved_segment_and_moving_between_boundaries(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        s = grown_session(store, 3)
        found = boundaries(s)
        last = found[-1]
        made_keys = paging.segment_keys(s, last.replaced_version + 1, last.head_uuid, last.tail_uuid)
        assert made_keys is not None
        active = [e.uuid for e in s.active_entries()]
        kept = active[active.index(last.head_uuid) : active.index(last.tail_uuid) + 1]
        session_id = s.id
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("b", "down", "down", "enter")
        await settle(pilot)
        screen = pilot.app.screen
        seen["index"] = screen.index
        await pilot.press("3")
        await settle(pilot)
        seen["kept"] = [r.uuid for r in all_rows(screen.query_one("#kept-list", ViewList))]
        await pilot.press("n")
        await settle(pilot)
        seen["after_n_at_last"] = pilot.app.screen.index
        await pilot.press("p", "p")
        await settle(pilot)
        seen["after_pp"] = pilot.app.screen.index
        seen["before_total"] = pilot.app.screen.query_one("#before-list", ViewList).total
        await pilot.press("p")
        await settle(pilot)
        seen["after_ppp"] = pilot.app.screen.index
        await pilot.press("q")
        await settle(pilot)
        seen["back"] = pilot.app.screen

    drive(make_app(store_url, session_id=session_id), steps)
    assert seen["index"] == 3 and seen["kept"] == kept and len(kept) > 1
    assert seen["after_n_at_last"] == 3
    assert seen["after_pp"] == 1 and seen["after_ppp"] == 1
    with SessionStore.open(store_url) as store:
        from sessionstore.storage.read.history import view_before

        assert seen["before_total"] == len(view_before(store.get(session_id), 1))
    assert isinstance(seen["back"], SessionScreen)


# ------------------------------------------------------------ message detail


def test_spilled_result_shows_its_preview_and_opens_the_original(corpus: Corpus) -> None:
    session = corpus.store.get(corpus.spilled_session)
    spill = list_spills(session)[0]
    entry = next(
        e
        for e in session.active_entries()
        if isinstance(e.content, list)
        and any(b.get("type") == "tool_result" and b.get("tool_use_id") == spill.tool_use_id for b in e.content)
    )
    assert entry.replaced
    position = paging.active_position(session, entry.seq)
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        listing = pilot.app.screen.query_one("#messages", ViewList)
        listing.move_to(position)
        seen["row"] = listing.current
        await pilot.press("enter")
        await settle(pilot)
        detail = pilot.app.screen
        assert isinstance(detail, MessageScreen)
        seen["body"] = " ".join(str(w.visual) for w in detail.query(Static))
        await pilot.press("o")
        await settle(pilot)
        original = pilot.app.screen
        assert isinstance(original, OriginalScreen)
        seen["original"] = original.query_one("#original-text").text
        await pilot.press("q", "q")
        await settle(pilot)
        seen["back"] = pilot.app.screen

    drive(make_app(corpus.url, session_id=corpus.spilled_session), steps)
    assert seen["row"].seq == entry.seq and seen["row"].replaced
    preview = next(b for b in entry.content if b.get("tool_use_id") == spill.tool_use_id)["content"]
    assert " ".join(str(preview).split())[:80] in " ".join(seen["body"].split())
    assert "spilled" in seen["body"] and spill.tool_use_id in seen["body"]
    assert seen["original"] == spill_original(session, spill.tool_use_id).decode("utf-8")
    assert isinstance(seen["back"], SessionScreen)


def test_thinking_is_collapsed_and_tool_calls_show_their_inputs(store_url: str) -> None:
    from textual.widgets import Collapsible

    with SessionStore.open(store_url) as store:
        s = store.create_session(title="detail")
        s.append_many(list(conversation(4, seed=2)))
        entries = s.active_entries()
        session_id = s.id
    thinking = next(e for e in entries if e.role == "assistant" and e.content[0]["type"] == "thinking")
    call = next(e for e in entries if e.role == "assistant" and e.content[0]["type"] == "tool_use")
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        listing = pilot.app.screen.query_one("#messages", ViewList)
        for name, entry in (("thinking", thinking), ("call", call)):
            listing.move_to(entry.position)
            await pilot.press("enter")
            await settle(pilot)
            screen = pilot.app.screen
            seen[name] = (
                " ".join(str(w.visual) for w in screen.query(Static)),
                [c.collapsed for c in screen.query(Collapsible)],
            )
            await pilot.press("q")
            await settle(pilot)

    drive(make_app(store_url, session_id=session_id), steps)
    assert seen["thinking"][1] == [True]
    for block in call.content:
        assert block["name"] in seen["call"][0] and json.dumps(block["input"], indent=2) in seen["call"][0]


# ------------------------------------------------------------ search, export, copy


def test_search_lists_hits_and_enter_opens_each_where_it_lives(corpus: Corpus) -> None:
    query = "spotter-gqc"
    hits = corpus.store.search(query, limit=SEARCH_LIMIT)
    picks = [
        next(i for i, h in enumerate(hits) if h.boundary is None),
        next(i for i, h in enumerate(hits) if h.boundary is not None),
    ]
    for pick in picks:
        seen: dict[str, Any] = {}

        async def steps(pilot: Pilot[None]) -> None:
            await pilot.press("slash", *query, "enter")
            await settle(pilot)
            screen = pilot.app.screen
            seen["listed"] = [(h.session, h.seq, h.boundary) for h in screen.hits]
            seen["rows"] = screen.query_one("#hits", DataTable).row_count
            screen.query_one("#hits", DataTable).move_cursor(row=pick)
            await pilot.press("enter")
            await settle(pilot)
            top = pilot.app.screen
            seen["screen"] = top
            listing = "#messages" if isinstance(top, SessionScreen) else "#before-list"
            seen["at"] = top.query_one(listing, ViewList).current

        drive(make_app(corpus.url), steps)
        hit = hits[pick]
        assert seen["listed"] == [(h.session, h.seq, h.boundary) for h in hits] and seen["rows"] == len(hits)
        if hit.boundary is None:
            assert isinstance(seen["screen"], SessionScreen) and seen["screen"].session.id == hit.session
        else:
            assert isinstance(seen["screen"], BoundaryScreen) and seen["screen"].index == hit.boundary
            assert seen["screen"].session.id == hit.session
        assert seen["at"].seq == hit.seq and seen["at"].uuid == hit.uuid


def test_a_bad_query_says_why(corpus: Corpus) -> None:
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("slash", "enter")
        await settle(pilot)
        seen["pane"] = str(pilot.app.screen.query_one("#preview", Static).visual)
        seen["screen"] = pilot.app.screen

    drive(make_app(corpus.url), steps)
    assert isinstance(seen["screen"], SessionsScreen) and "query is empty" in seen["pane"]


@pytest.mark.parametrize("fmt", ["jsonl", "markdown", "html", "claude-code"])
def test_export_from_the_browser_matches_sessionstore_export(
    corpus: Corpus, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session_id = with_boundaries(corpus.store)[0]
    target = tmp_path / f"browser.{fmt}"

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("e")
        await settle(pilot)
        picker = pilot.app.screen
        assert isinstance(picker, ExportScreen)
        for _ in range(["jsonl", "markdown", "html", "claude-code"].index(fmt)):
            await pilot.press("down")
        await pilot.press("enter")
        path = picker.query_one("#export-path", Input)
        assert path.has_focus and path.value.endswith({"markdown": ".md", "html": ".html"}.get(fmt, ".jsonl"))
        path.value = str(target)
        await pilot.press("enter")
        await settle(pilot)

    drive(make_app(corpus.url, session_id=session_id), steps)
    reference = tmp_path / f"cli.{fmt}"
    assert run_cli(capsys, "export", session_id, "-f", fmt, "-o", str(reference), "--db", corpus.url).code == 0
    assert target.read_bytes() == reference.read_bytes()
    assert not list(tmp_path.glob("*.partial"))


def test_y_copies_the_resume_command(corpus: Corpus) -> None:
    session_id = corpus.store.list(limit=1)[0]["id"]
    seen: dict[str, str] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("y")
        seen["sessions"] = pilot.app.clipboard
        await pilot.press("enter", "y")
        seen["session"] = pilot.app.clipboard

    drive(make_app(corpus.url), steps)
    expected = resume_command(corpus.store.get(session_id), db_option=f" --db {corpus.store.display_url}")
    assert seen["sessions"] == seen["session"] == expected


# ------------------------------------------------------------ cost follows what is shown


def test_a_long_view_is_read_page_by_page(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        s = store.create_session(title="long")
        s.append_many(list(conversation(3 * PAGE + 17, seed=5)))
        session_id = s.id
        total = len(s.active_entries())
        last = s.active_entries()[-1]
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        listing = pilot.app.screen.query_one("#messages", ViewList)
        seen["total"] = listing.total
        seen["pages_at_open"] = sorted(listing._pages.keys())
        await pilot.press("end")
        await settle(pilot)
        seen["pages_at_end"] = sorted(listing._pages.keys())
        seen["last"] = listing.current

    drive(make_app(store_url, session_id=session_id), steps, size=(80, 24))
    assert seen["total"] == total
    assert seen["pages_at_open"] == [0]
    assert seen["pages_at_end"] == [0, (total - 1) // PAGE]
    assert seen["last"].uuid == last.uuid and seen["last"].position == total - 1


def test_rows_of_the_active_view_match_its_entries_after_rewrites(store_url: str) -> None:
    with SessionStore.open(store_url) as store:
        s = grown_session(store, 2)
        entries = s.active_entries()
        count = paging.active_count(s)
        rows = paging.active_rows(s, 0, count + 5)
        window = paging.active_rows(s, 3, 4)
    assert count == len(entries)
    assert [(r.position, r.uuid, r.tokens, r.replaced) for r in rows] == [
        (e.position, e.uuid, e.tokens, e.replaced) for e in entries
    ]
    assert [r.uuid for r in window] == [e.uuid for e in entries[3:7]]


# ------------------------------------------------------------ the command and moving around


def test_browse_command_refuses_without_a_terminal_or_with_an_unknown_session(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with SessionStore.open(sqlite_url) as store:
        session_id = store.create_session(title="t").id
    unknown = run_cli(capsys, "browse", "no-such-session", "--db", sqlite_url)
    assert unknown.code == 2 and unknown.err.count("\n") == 1 and "no-such-session" in unknown.err
    piped = run_cli(capsys, "browse", session_id[:8], "--db", sqlite_url)
    assert piped.code == 2 and piped.err.count("\n") == 1 and "needs a terminal" in piped.err
    assert piped.out == ""


def test_q_goes_back_and_slash_searches_from_a_session(sqlite_url: str) -> None:
    with SessionStore.open(sqlite_url) as store:
        s = store.create_session(title="moving around")
        s.append_many(list(conversation(6, seed=1)))
        session_id = s.id
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        seen["start"] = pilot.app.screen
        await pilot.press("enter")
        await settle(pilot)
        seen["detail"] = pilot.app.screen
        await pilot.press("slash")
        await settle(pilot)
        seen["search"] = pilot.app.screen
        seen["focused"] = pilot.app.focused
        await pilot.press("escape", "enter")
        await settle(pilot)
        seen["reopened"] = pilot.app.screen
        await pilot.press("q")
        await settle(pilot)
        seen["list"] = pilot.app.screen
        await pilot.press("q")
        await settle(pilot)
        seen["running"] = pilot.app.is_running

    drive(make_app(sqlite_url, session_id=session_id), steps)
    assert isinstance(seen["start"], SessionScreen) and isinstance(seen["detail"], MessageScreen)
    assert isinstance(seen["search"], SessionsScreen) and getattr(seen["focused"], "id", None) == "search"
    assert isinstance(seen["reopened"], SessionScreen) and seen["reopened"].session.id == session_id
    assert isinstance(seen["list"], SessionsScreen)
    assert seen["running"] is False


@pytest.mark.slow
def test_make_demo_ends_by_suggesting_browse(tmp_path: Path) -> None:
    import subprocess
    import sys

    demo = Path(__file__).resolve().parents[1] / "examples" / "demo.py"
    out = subprocess.run(
        [sys.executable, str(demo), "--dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert out.rstrip().splitlines()[-1].startswith("Then browse it all full screen: sessionstore browse --db ")


def test_the_session_list_is_read_a_page_at_a_time(sqlite_url: str) -> None:
    from sessionstore.cli.browse.sessions import PAGE as LIST_PAGE

    with SessionStore.open(sqlite_url) as store:
        ids = [store.create_session(title=f"session {i:03d}").id for i in range(2 * LIST_PAGE + 30)]
        newest_first = [r["id"] for r in store.list(limit=1000)]
    assert sorted(newest_first) == sorted(ids)
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        seen["first"] = len(screen.rows)
        for _ in range(3):
            screen.table.move_cursor(row=len(screen.rows) - 1)
            await settle(pilot)
        seen["all"] = [r.id for r in screen.rows]
        seen["table"] = screen.table.row_count

    drive(make_app(sqlite_url), steps, size=(80, 24))
    assert seen["first"] == LIST_PAGE
    assert seen["all"] == newest_first and seen["table"] == len(ids)


def test_an_empty_session_and_an_empty_store_open(sqlite_url: str) -> None:
    seen: dict[str, Any] = {}

    async def empty_store(pilot: Pilot[None]) -> None:
        seen["pane"] = str(pilot.app.screen.query_one("#preview", Static).visual)

    drive(make_app(sqlite_url), empty_store, size=(80, 24))
    with SessionStore.open(sqlite_url) as store:
        session_id = store.create_session(title="nothing yet").id

    async def empty_session(pilot: Pilot[None]) -> None:
        screen = pilot.app.screen
        seen["total"] = screen.query_one("#messages", ViewList).total
        await pilot.press("enter", "b")
        await settle(pilot)
        seen["screen"] = pilot.app.screen

    drive(make_app(sqlite_url, session_id=session_id), empty_session, size=(80, 24))
    assert "No sessions yet" in seen["pane"]
    assert seen["total"] == 0 and isinstance(seen["screen"], SessionScreen)


def test_timeline_follows_the_records_and_marks_each_boundary(sqlite_url: str) -> None:
    from sessionstore.cli.browse.timeline import boundary_columns, draw, tokens_at
    from sessionstore.interchange.export import token_points

    with SessionStore.open(sqlite_url) as store:
        s = grown_session(store, 3)
        found = boundaries(s)
        points = paging.timeline(s, found)
        html = token_points(s, found=found)
        state = s.refresh_state()
    assert points[0] == paging.TimelinePoint(0, 0) and points[-1] == paging.TimelinePoint(
        state.last_seq, state.view_tokens
    )
    assert html[-1] == (state.last_seq, state.view_tokens), "the HTML chart ends where this one does"
    for b in found:
        assert paging.TimelinePoint(b.boundary_seq, b.pre_tokens) in points
        assert paging.TimelinePoint(b.boundary_seq, b.post_tokens) in points
        assert tokens_at(points, b.boundary_seq) == b.post_tokens
        assert dict(html)[b.boundary_seq] == b.post_tokens, "both charts drop to the recorded size"
    columns = boundary_columns(points, 80)
    assert sorted(columns.values()) == [1, 2, 3]
    axis = draw(points, 80, 6)[-1].plain
    for index in (1, 2, 3):
        assert f"✂{index}" in axis
    assert len(axis) == 80


def test_past_views_read_by_pages_match_view_before(store_url: str) -> None:
    from sessionstore.storage.read.history import boundary_floor, view_before

    from sessionstore.storage.write.rewrite import Keep, commit_rewrite

    with SessionStore.open(store_url) as store:
        s = grown_session(store, 2)
        for _ in range(2):  # rewrites without a boundary: a few rows each get a version of their own
            snap = s.snapshot()
            target = next(
                e
                for e in reversed(snap.entries)
                if e.role == "user"
                and not e.replaced
                and isinstance(e.content, list)
                and e.content[0].get("type") == "tool_result"
            )
            cleared = [{**b, "content": "[cleared]"} for b in target.content]
            plan = [Keep(e.seq, content=cleared) if e.seq == target.seq else Keep(e.seq) for e in snap.entries]
            commit_rewrite(s, base_version=snap.view_version, snapshot_last_seq=snap.last_seq, plan=plan)
            s.append({"role": "user", "content": "and one more thing"})
            s.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
        compact(s)
        spans = [boundary_floor(s, b.index) for b in boundaries(s)]
        assert any(0 < floor < version for version, floor in spans), "a past view spread over several versions"
        for b in boundaries(s):
            version, floor = boundary_floor(s, b.index)
            expected = [(e.position, e.uuid, e.tokens, e.replaced) for e in view_before(s, b.index)]
            assert paging.past_count(s, version, floor) == paging.past_count(s, version) == len(expected)
            for step in (7, 100):
                paged = [
                    r
                    for start in range(0, len(expected) + step, step)
                    for r in paging.past_rows(s, version, start, step, floor=floor)
                ]
                assert [(r.position, r.uuid, r.tokens, r.replaced) for r in paged] == expected


def test_a_search_hit_deep_in_a_view_opens_on_screen_and_q_closes_the_hits(sqlite_url: str) -> None:
    """Enter on a hit scrolls the list to it (it sat below the first screen before); q on the hits goes back."""
    with SessionStore.open(sqlite_url) as store:
        s = store.create_session(title="deep hit")
        s.append_many(list(conversation(300, seed=3)))
        s.append({"role": "user", "content": "the zebra-quokka-17 marker sits far down the view"})
        s.append_many(list(conversation(40, seed=4, prefix="after ")))
        target = store.search("zebra-quokka-17", limit=5)[0]
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"zebra-quokka-17", "enter")
        await settle(pilot)
        await pilot.press("q")
        await settle(pilot)
        screen = pilot.app.screen
        seen["after_q"] = (screen, screen.query_one("#hits", DataTable).has_class("hidden"), pilot.app.is_running)
        await pilot.press("slash", *"zebra-quokka-17", "enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        listing = pilot.app.screen.query_one("#messages", ViewList)
        top, height = listing.scroll_offset.y, listing.scrollable_content_region.height
        seen["at"] = (listing.current, top, listing.cursor, height)

    drive(make_app(sqlite_url), steps, size=(80, 24))
    screen, hidden, running = seen["after_q"]
    assert isinstance(screen, SessionsScreen) and hidden and running
    row, top, cursor, height = seen["at"]
    assert row.seq == target.seq
    assert cursor > height, "the hit lies below the first screen"
    assert top <= cursor < top + height, f"the hit's row {cursor} is off screen (rows {top}..{top + height - 1})"


def test_message_detail_shows_usage_at_80_columns_and_every_spilled_original(sqlite_url: str) -> None:
    """The usage line is not cut off at 80x24; n/p move between the originals of a message's spilled results."""
    big = {i: f"result {i} " + "lorem ipsum " * 800 for i in range(2)}
    with SessionStore.open(sqlite_url) as store:
        s = store.create_session(title="two spills")
        s.append({"role": "user", "content": "read both"})
        s.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"file_path": f"f{i}.txt"}}
                    for i in range(2)
                ],
                "usage": {
                    "input_tokens": 1234,
                    "output_tokens": 56,
                    "cache_read_input_tokens": 7890,
                    "cache_creation_input_tokens": 12,
                },
            }
        )
        s.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": big[i]} for i in range(2)],
            }
        )
        s.append({"role": "assistant", "content": "done"})
        config = dataclasses.replace(
            store.config, tool_result_max_chars=1000, microcompact_enabled=False, snip_enabled=False
        )
        Pipeline(store, config=config).prepare(s)
        assert len(list_spills(s)) == 2
        session_id = s.id
    seen: dict[str, Any] = {}

    async def steps(pilot: Pilot[None]) -> None:
        listing = pilot.app.screen.query_one("#messages", ViewList)
        listing.move_to(1)
        await pilot.press("enter")
        await settle(pilot)
        info = pilot.app.screen.query_one("#message-info", Static)
        needed = info.get_content_height(info.container_size, pilot.app.size, info.content_region.width)
        seen["usage"] = (str(info.visual), info.content_region.height, needed)
        await pilot.press("q")
        await settle(pilot)
        listing = pilot.app.screen.query_one("#messages", ViewList)
        listing.move_to(2)
        await pilot.press("enter", "o")
        await settle(pilot)
        seen["originals"] = [pilot.app.screen.query_one("#original-text").text]
        await pilot.press("n")
        await settle(pilot)
        seen["originals"].append(pilot.app.screen.query_one("#original-text").text)
        await pilot.press("p")
        await settle(pilot)
        seen["originals"].append(pilot.app.screen.query_one("#original-text").text)

    drive(make_app(sqlite_url, session_id=session_id), steps, size=(80, 24))
    text, height, needed = seen["usage"]
    assert "usage:" in text and "56" in text and "7,890" in text
    assert height >= needed, f"the header needs {needed} lines at 80 columns but gets {height}: usage is cut off"
    assert seen["originals"] == [big[0], big[1], big[0]]
