"""What a person sees of the API's boundaries through the installed console script, on both engines.

The session's three boundaries were made by the Messages API through the local server
(tests/support/apisession.py): on-demand (manual), threshold (the reply goes on after its block)
and background (two messages appended while the request was in flight). `export -f markdown`
shows each where it cut the conversation, with its trigger and the block's summary, and never the
block's encrypted copy or signature; `history` and `history -b K` list and open them.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Iterator

import pytest

from sessionstore import SessionStore
from tests.support.apisession import (
    FAILED_ANSWER,
    LAST_REQUEST,
    MEANWHILE,
    REQUESTS,
    THRESHOLD_ANSWER,
    ApiSession,
    make_api_session,
)
from tests.support.fakeapi import FakeAPI, start_fake_api
from tests.support.outside import Ran, private_env, sessionstore

#: What the fake server puts in every compaction block beside the summary (base64 of "fake-enc", "fake-sig").
OPAQUE = ("encrypted_content", "signature", "ZmFrZS1lbmM", "ZmFrZS1zaWc", '"type": "compaction"', "[compaction]")


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The local Messages API server, writing the summary tests/support/apisession.py expects."""
    with start_fake_api(default="noted") as server:
        yield server


@pytest.fixture
def made(store: SessionStore, api: FakeAPI) -> ApiSession:
    return make_api_session(store, api)


def run(store: SessionStore, tmp_path: Path, *args: str) -> Ran:
    """`sessionstore ARGS` on the store, as a person runs it; checks it exited 0 with no traceback."""
    ran = sessionstore(store.url, private_env(tmp_path / "home"), *args)
    assert ran.code == 0 and not ran.traceback, ran.err
    return ran


def quoted_summary(summary: str) -> str:
    """How the markdown export shows an API boundary's summary: a block quote in a labelled details."""
    quote = "\n".join(f"> {line}" if line else ">" for line in summary.splitlines())
    return f"<details><summary>Summary (the API's compaction block)</summary>\n\n{quote}\n\n</details>"


def in_order(text: str, *parts: str) -> list[int]:
    """Where each part first occurs in `text`, after the one before it (fails naming the part out of place)."""
    at, found = 0, []
    for part in parts:
        index = text.find(part, at)
        assert index >= 0, f"{part!r} is missing or out of place"
        found.append(index)
        at = index + len(part)
    return found


def test_markdown_export_puts_each_api_boundary_where_it_cut_with_its_summary(
    store: SessionStore, made: ApiSession, tmp_path: Path
) -> None:
    text = run(store, tmp_path, "export", made.id, "-f", "markdown").out
    headings = [f"## ✂ Compaction {k} — {kind}, {trigger}: " for k, (kind, trigger) in enumerate(made.kinds, 1)]
    summaries = [quoted_summary(s) for s in made.summaries]
    in_order(
        text,
        REQUESTS[0],
        "ValueError: bad month 13",
        headings[0],
        summaries[0],
        REQUESTS[1],
        headings[1],
        summaries[1],
        THRESHOLD_ANSWER,
        REQUESTS[2],
        headings[2],
        summaries[2],
        MEANWHILE[0],
        MEANWHILE[1],
        LAST_REQUEST,
        "**compaction** failed: the server returned no summary",
        FAILED_ANSWER,
    )
    for heading, summary in zip(headings, summaries, strict=True):
        assert text.count(heading) == 1 and text.count(summary) == 1
    assert text.count(THRESHOLD_ANSWER) == 1, "the answer after the threshold block is shown once, after its divider"
    assert [p for p in OPAQUE if p in text] == []


def test_history_lists_the_api_boundaries_and_opens_each(
    store: SessionStore, made: ApiSession, api: FakeAPI, tmp_path: Path
) -> None:
    listing = run(store, tmp_path, "history", made.id)
    rows = [line.split() for line in listing.out.splitlines() if line[:1].isdigit()]
    assert [(r[0], r[3], r[4]) for r in rows] == [(str(k), *kt) for k, kt in enumerate(made.kinds, 1)]
    assert all("API summary of" in line for line in listing.out.splitlines() if line[:1].isdigit())
    assert all(len(line) <= 80 for line in listing.out.splitlines())

    background = run(store, tmp_path, "history", made.id, "-b", "3")
    head, tokens, _, _, *entries = background.out.splitlines()
    as_json = json.loads(run(store, tmp_path, "history", made.id, "-b", "3", "--json").out)
    request = [r.messages for r in api.message_requests if "compaction" in r.body][-1]
    assert as_json["messages"] == request, "the view before a background compaction is the request it sent"
    assert (
        head
        == f"view before boundary 3 (api-background, auto): {len(request) + 1} entries, {len(request) + 1} summarized"
    )
    assert len(entries) == len(request) + 1 and all("✂" in e for e in entries), "the boundary row, then the request"
    assert not any(m[:12] in background.out for m in MEANWHILE), "what was appended meanwhile was not replaced"
    assert tokens.startswith("tokens: ")

    for k, summary in enumerate(made.summaries, 1):
        assert run(store, tmp_path, "history", made.id, "-b", str(k), "--summary").out == summary + "\n"


def test_html_export_shows_each_api_summary_and_never_the_encrypted_copy(
    store: SessionStore, made: ApiSession, tmp_path: Path
) -> None:
    """The compaction blocks render as their summary (or that the compaction failed), not as raw JSON."""
    out = tmp_path / "session.html"
    run(store, tmp_path, "export", made.id, "-f", "html", "-o", str(out))
    page = out.read_text(encoding="utf-8")
    for summary in made.summaries:
        assert html.escape(summary.splitlines()[0], quote=False) in page
    assert "compaction failed: the server returned no summary" in page
    assert html.escape(THRESHOLD_ANSWER, quote=False) in page
    assert [p for p in OPAQUE if p in page] == [], "the block's encrypted copy and signature stay out of the page"


def test_a_compaction_message_reads_as_its_summary_in_one_line(
    store: SessionStore, made: ApiSession, tmp_path: Path
) -> None:
    """`view` and `history -b K` rows show the block's summary (or that it failed), never a bare `[compaction]`."""
    env = {**private_env(tmp_path / "home"), "COLUMNS": "200"}
    view = sessionstore(store.url, env, "view", made.id)
    before = sessionstore(store.url, env, "history", made.id, "-b", "2")
    assert view.code == 0 and before.code == 0, view.err + before.err
    first_line = made.summaries[-1].splitlines()[0]
    assert f"[compaction] {first_line}" in view.out
    assert "[compaction failed]" in view.out
    assert f"[compaction] {made.summaries[0].splitlines()[0][:40]}" in before.out
    assert "[compaction]  " not in view.out + before.out and "[compaction] │" not in view.out
