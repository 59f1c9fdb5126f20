"""What a person does first with a store of their own transcripts, reading only (docs/command-line.md,
docs/search-and-browse.md).

Every command runs through the installed script on the store the journeys' conftest imported, on
SQLite and on PostgreSQL as an ordinary role; each checks what the person looks at.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.journeys.conftest import Person, Ran, World, fits, too_wide

SPOTTER = "258c7280"  # the long Claude Code session with one auto compaction (shared/transcripts/SOURCES.md)
SPOTTER_FILE = "claude-code/spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def recorded_boundary(world: World) -> dict[str, Any]:
    """The compact_boundary line of the spotter file, as Claude Code wrote it."""
    for line in (world.transcripts / SPOTTER_FILE).read_text(encoding="utf-8").splitlines():
        entry = json.loads(line) if line.strip() else {}
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            return entry
    raise AssertionError("the spotter transcript holds no compact_boundary")


def header(ran: Ran) -> str:
    """The lines a command prints before the message body (up to the first blank line)."""
    return ran.out.split("\n\n", 1)[0]


def texts(message: dict[str, Any]) -> list[str]:
    """The typed text of a stored message (string content and text blocks): what search indexes for sure."""
    content = message["message"]["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]


def compacted_words(me: Person) -> list[str]:
    """Words typed in the spotter session's summarized span that appear nowhere in its active view."""
    before = me.run("history", SPOTTER, "-b", "1", "--json").json()
    view = me.run("view", SPOTTER, "--json").out.lower()
    words: set[str] = set()
    for message in before["summarized"]:
        for text in texts(message):
            words.update(re.findall(r"\b[A-Za-z][A-Za-z0-9_]{9,}\b", text))
    return sorted(w for w in words if w.lower() not in view)


def footer(ran: Ran) -> tuple[int, int]:
    """(hits, sessions) from the table's last line, `N hit(s) in M session(s)`."""
    match = re.search(r"(\d+) hit\(s\) in (\d+) session\(s\)", ran.out.strip().splitlines()[-1])
    assert match, f"no hit count at the end of:\n{ran.out[-500:]}"
    return int(match.group(1)), int(match.group(2))


# ------------------------------------------------------------------------------ import, sessions


def test_the_import_lists_every_file_and_sessions_lists_every_session(world: World) -> None:
    for kind, ran in world.imports.items():
        files = sorted((world.transcripts / kind).rglob("*.jsonl"))
        fits(ran)
        assert f"imported {len(files)} of {len(files)} file(s)" in ran.out
        assert sum(1 for line in ran.out.splitlines() if line.startswith("│ imported ")) == len(files)
    total = sum(len(list((world.transcripts / kind).rglob("*.jsonl"))) for kind in world.imports)
    assert len(world.sessions) == total
    ran = fits(world.person.run("sessions"))
    assert f"sessions ({total};" in ran.out
    for row in world.sessions:
        assert row["id"][:8] in ran.out
    if world.engine.name == "postgresql":  # the person's own sessions, under row-level security
        assert {row["owner"] for row in world.sessions} == {world.engine.person}  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ search


@pytest.mark.parametrize("query", ["error", "lib/spotter_web/router.ex", '"Compile with warnings"'])
def test_search_finds_what_the_transcripts_hold_and_counts_it(world: World, tmp_path: Path, query: str) -> None:
    me = world.writable(tmp_path / "home")  # a store just imported: this search is its first
    found = me.run("search", query, "--json", "--limit", "500").json()
    hits = found["hits"]
    assert hits, f"no hit for {query!r} in the shared transcripts"
    terms = [t.lower() for t in re.findall(r'"([^"]+)"|(\S+)', query) for t in t if t]
    for hit in hits:
        snippet = hit["snippet"].replace("«", "").replace("»", "").lower()
        assert any(term in snippet for term in terms), (query, hit["snippet"])
        assert hit["open"].startswith(f"sessionstore show {hit['session']} ")
    table = fits(me.run("search", query, "--limit", "500"))
    if not found["more"]:
        assert found["total"] == len(hits)
        assert footer(table) == (len(hits), len({h["session"] for h in hits}))
    for hit in hits:
        where = "active view" if hit["boundary"] is None else f"boundary {hit['boundary']}"
        assert where in table.out


def test_search_finds_a_word_that_only_lives_in_a_compacted_span(world: World) -> None:
    me = world.person
    words = compacted_words(me)
    assert words, "the spotter session's summarized span holds no word missing from its view"
    for word in words[:1]:
        hits = me.run("search", word, "--session", SPOTTER, "--json").json()["hits"]
        assert hits and all(h["boundary"] == 1 for h in hits), (word, hits)
        compacted = me.run("search", word, "--session", SPOTTER, "--in", "compacted", "--json").json()["hits"]
        assert [h["uuid"] for h in compacted] == [h["uuid"] for h in hits]
        active = me.run("search", word, "--session", SPOTTER, "--in", "active", "--json").json()
        assert active["hits"] == [] and active["total"] == 0
    table = fits(me.run("search", words[0], "--session", SPOTTER, "--in", "compacted"))
    assert "boundary 1" in table.out and "active view" not in table.out


def test_search_by_role_keeps_to_that_role(world: World) -> None:
    hits = world.person.run("search", "spotter", "--role", "user", "--json", "--limit", "100").json()["hits"]
    assert hits and {h["role"] for h in hits} == {"user"}


# ------------------------------------------------------------------------------ history, show, recall


def test_history_names_the_boundary_the_transcript_recorded(world: World) -> None:
    me = world.person
    recorded = recorded_boundary(world)["compactMetadata"]
    listing = fits(me.run("history", SPOTTER))
    assert "1 boundary" in listing.out.splitlines()[0]
    (row,) = [line for line in listing.out.splitlines() if line.startswith("1 ")]
    assert "full" in row and recorded["trigger"] in row and f"{recorded['preTokens']:,}" in row
    before = me.run("history", SPOTTER, "-b", "1", "--json").json()
    assert before["boundary"]["pre_tokens"] == recorded["preTokens"]
    assert before["boundary"]["trigger"] == recorded["trigger"]
    entries, summarized = len(before["entries"]), len(before["summarized"])
    table = fits(me.run("history", SPOTTER, "-b", "1"))
    first = table.out.splitlines()[0]
    assert first.startswith(f"view before boundary 1 (full, {recorded['trigger']}): {entries} entries, {summarized}")
    assert sum(1 for line in table.out.splitlines() if "✂" in line) == summarized
    assert {m["uuid"] for m in before["summarized"]} <= {e["uuid"] for e in before["entries"]}


def test_show_says_where_a_message_lives(world: World) -> None:
    me = world.person
    first = me.run("show", SPOTTER, "1")
    top = header(first)
    assert not too_wide(top)
    assert re.search(r"in view\s+no", top) and re.search(r"boundary\s+1 \(full\): summarized", top)
    assert "Implement spotter-gqc" in first.out
    view = me.run("view", SPOTTER, "--json").json()
    last = view["entries"][-1]
    shown = me.run("show", SPOTTER, str(last["seq"]), "--json").json()
    assert shown["message"]["uuid"] == last["uuid"]
    assert shown["in_view"] is True, "show says a message the active view lists is not in view"
    never_compacted = world.source("1af7fc5e")["id"]  # a session no compaction ever rewrote
    entry = me.run("view", never_compacted, "--json").json()["entries"][-1]
    assert me.run("show", never_compacted, str(entry["seq"]), "--json").json()["in_view"] is True


def test_recall_reads_back_exact_messages_the_compaction_summarized(world: World) -> None:
    me = world.person
    before = me.run("history", SPOTTER, "-b", "1", "--json").json()
    by_seq = {m["seq"]: m for m in before["summarized"]}
    recalled = me.run("recall", SPOTTER, "--query", "spotter-gqc", "--json").json()
    assert recalled["boundary"] == 1 and recalled["messages"]
    for message in recalled["messages"]:
        assert message["seq"] in by_seq and message["uuid"] == by_seq[message["seq"]]["uuid"]
        assert "spotter-gqc" in json.dumps(by_seq[message["seq"]]["message"])
    text = me.run("recall", SPOTTER, "--query", "spotter-gqc").out
    assert text.count("--- #") == len(recalled["messages"])


# ------------------------------------------------------------------------------ usage, doctor


def test_usage_counts_each_response_once_whichever_way_it_is_grouped(world: World) -> None:
    me = world.person
    totals = {}
    for by in ("day", "model"):
        report = me.run("usage", "--by", by, "--json").json()
        totals[by] = (sum(r["responses"] for r in report["rows"]), sum(r["output_tokens"] for r in report["rows"]))
    assert len(set(totals.values())) == 1, totals
    responses = totals["day"][0]
    assert responses > 0
    fits(me.run("usage", "--by", "session"))
    table = fits(me.run("usage")).out
    (total,) = [line for line in table.splitlines() if line.startswith("│ total")]
    assert f" {responses} " in total or f" {responses:,} " in total


def test_doctor_finds_nothing_wrong_with_a_fresh_import(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    ran = fits(me.run("doctor"))
    assert "no problems" in ran.out
    assert f"{len(world.sessions)} session(s)" in ran.out
    me.run("search", "error", "--json")  # the index built by a read-only command
    assert "no problems" in fits(me.run("doctor")).out
