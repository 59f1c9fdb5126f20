"""What a person does to their store after the import (docs/: command-line, fork, usage-and-cost, security).

Each journey writes to its own copy of the imported store, through the installed script, on SQLite
and on PostgreSQL as an ordinary role, and checks what the person looks at.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.journeys.conftest import Person, Ran, World, fits

SPOTTER = "258c7280"
INIT = "1af7fc5e"  # a short Claude Code session (29 messages) no compaction rewrote
CODEX = "019c8a59"  # the long Codex rollout, with one compaction

AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ANTHROPIC = "sk-ant-api03-Xy7kP2mQ9vR4tL8wN3bJ6hF1dS5aG0cZ-eU"
URL_PASSWORD = "Hunter2Secret"
SECRETS = (AWS, ANTHROPIC, URL_PASSWORD)
CJK = "東京都の天気"


def deploy_messages() -> str:
    """A person's own session as JSONL: Japanese text, a credential pasted in a message and one in a tool's env."""
    messages = [
        {"role": "user", "content": f'{CJK}を調べてから deploy して。aws_secret_access_key = "{AWS}"'},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Deploying."},
                {
                    "type": "tool_use",
                    "id": "toolu_deploy1",
                    "name": "Bash",
                    "input": {"command": "./deploy.sh", "env": {"ANTHROPIC_API_KEY": ANTHROPIC}},
                },
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_deploy1", "content": "deployed"}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"Deployed. {CJK}: 晴れ。"}]},
    ]
    return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)


@dataclass
class Mine:
    """The imported store plus two sessions the person recorded themselves."""

    me: Person
    deploy: str
    db_notes: str


@pytest.fixture(scope="module")
def mine(world: World, tmp_path_factory: pytest.TempPathFactory) -> Mine:
    me = world.writable(tmp_path_factory.mktemp("mine"))
    deploy = me.run(
        "new", "--title", "deploy notes", "--cwd", "/home/me/app", "--model", "claude-sonnet-4-6"
    ).out.strip()
    me.run("append", deploy, "-", input=deploy_messages())
    notes = me.run("new", "--title", "db notes", "--cwd", "/home/me/app").out.strip()
    me.run(
        "append",
        notes,
        "-",
        input=json.dumps({"role": "user", "content": f"postgresql://app:{URL_PASSWORD}@db.example/prod"}),
    )
    return Mine(me, deploy, notes)


def usage_total(me: Person) -> tuple[int, float]:
    """(responses, cost) summed over `usage --json`: what `usage` shows as its total row."""
    rows = me.run("usage", "--json").json()["rows"]
    return sum(r["responses"] for r in rows), round(sum(r["cost_usd_known"] or 0 for r in rows), 6)


# ------------------------------------------------------------------------------ CJK, secrets


def test_search_finds_japanese_text_as_written(mine: Mine) -> None:
    found = mine.me.run("search", CJK, "--json").json()
    assert found["total"] == 2 and {h["session"] for h in found["hits"]} == {mine.deploy}
    assert fits(mine.me.run("search", CJK)).out.strip().splitlines()[-1] == "2 hit(s) in 1 session(s)"


def test_secrets_lists_each_credential_masked_and_tells_the_messages_apart(mine: Mine) -> None:
    found = mine.me.run("secrets", "--json").json()
    assert {r["session"] for r in found} == {mine.deploy, mine.db_notes}
    assert len(found) == len(SECRETS), found
    table = fits(mine.me.run("secrets"))
    assert all(secret not in table.out for secret in SECRETS)
    assert f"{len(SECRETS)} secret(s) found" in table.out + table.err
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in table.out.splitlines() if line.startswith("│")]
    shown = [(row[0].rstrip("…"), row[2].rstrip("…")) for row in rows if row and row[0]]
    assert len(shown) == len(found)
    # The person tells messages apart by the ids shown: a shown uuid names one message only.
    for (session, message), finding in zip(shown, found, strict=True):
        assert finding["session"].startswith(session) and finding["uuid"].startswith(message)
    uuids = {r["uuid"] for r in found}
    assert len({m for _, m in shown}) == len(uuids), f"secrets shows {len(uuids)} messages under ids {shown}"


@pytest.mark.parametrize("fmt", ["jsonl", "markdown", "html", "claude-code"])
def test_export_holds_everything_and_redact_leaves_no_credential(mine: Mine, tmp_path: Path, fmt: str) -> None:
    plain = tmp_path / f"plain.{fmt}"
    mine.me.run("export", mine.deploy, "-f", fmt, "-o", str(plain))
    text = plain.read_text(encoding="utf-8")
    assert CJK in text
    for secret in (AWS, ANTHROPIC):
        assert secret in text or json.dumps(secret)[1:-1] in text, f"{fmt} export without --redact lost {secret[:6]}…"
    shared = tmp_path / f"shared.{fmt}"
    ran = mine.me.run("export", mine.deploy, "-f", fmt, "--redact", "-o", str(shared))
    redacted = shared.read_text(encoding="utf-8")
    left = [s[:6] + "…" for s in (AWS, ANTHROPIC) if s in redacted or json.dumps(s)[1:-1] in redacted]
    assert not left, f"export -f {fmt} --redact left {left} that `secrets` lists"
    assert "[REDACTED:" in redacted and CJK in redacted
    assert re.search(r"redacted 2 secret\(s\)", ran.err), ran.err


@pytest.mark.parametrize("tool", ["claude-code", "codex"])
def test_install_with_redact_leaves_no_credential_in_the_tools_home(mine: Mine, tool: str) -> None:
    ran = mine.me.run("export", mine.deploy, "-f", tool, "--install", "--redact", code=None)
    home = mine.me.home / (".claude" if tool == "claude-code" else ".codex")
    written = "".join(p.read_text(encoding="utf-8") for p in home.rglob("*.jsonl")) if home.is_dir() else ""
    if ran.code == 2:  # refusing is fine: one line, nothing written
        assert len(ran.err.strip().splitlines()) == 1 and not written
        return
    assert ran.code == 0
    assert written and not any(s in written for s in (AWS, ANTHROPIC)), (
        f"--install --redact into {tool} kept a credential"
    )


# ------------------------------------------------------------------------------ exports of imported sessions


def test_the_claude_code_export_of_an_imported_session_is_its_file(world: World, tmp_path: Path) -> None:
    named = [p for p in (world.transcripts / "claude-code").rglob("*.jsonl") if re.fullmatch(r"[0-9a-f-]{36}", p.stem)]
    assert named, "no Claude Code transcript named by its session id"
    for path in sorted(named)[:2]:
        out = tmp_path / path.name
        world.person.run("export", path.stem, "-f", "claude-code", "-o", str(out))
        assert out.read_bytes() == path.read_bytes(), path.name


def test_markdown_and_html_exports_name_the_boundary(world: World, tmp_path: Path) -> None:
    messages = len(world.person.run("export", SPOTTER, "-f", "jsonl").out.splitlines())
    assert messages == world.source(SPOTTER)["messages"]
    for fmt in ("markdown", "html"):
        out = tmp_path / f"spotter.{fmt}"
        ran = world.person.run("export", SPOTTER, "-f", fmt, "-o", str(out))
        assert f"wrote {messages} messages" in ran.out + ran.err
        assert "compact" in out.read_text(encoding="utf-8").lower()


# ------------------------------------------------------------------------------ hand it back


def installed(ran: Ran, resume: str) -> str:
    """The new id from the last line `cd CWD && claude --resume ID` (or `codex resume ID`)."""
    last = ran.out.strip().splitlines()[-1]
    match = re.fullmatch(rf"cd (.+) && {resume} ([0-9a-f-]{{36}})", last)
    assert match, f"no resume command in {ran.out!r}"
    return match.group(2)


def same_view(me: Person, original: str, copy: str) -> tuple[str, str]:
    """The re-imported session shows the model what the original's view showed; (original, copy) ids."""
    a, b = me.run("view", original, "--json").json(), me.run("view", copy, "--json").json()
    assert a["messages"] == b["messages"]
    return a["session"], b["session"]


def same_model(me: Person, original: str, copy: str) -> None:
    """The re-imported session names the model the original did (its cost depends on it)."""
    models = {r["id"]: r["model"] for r in me.run("sessions", "--json", "--limit", "1000").json()}
    assert models[copy] == models[original], "the re-imported session lost its model"


def test_install_into_claude_code_and_import_back(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    spend = usage_total(me)
    ran = me.run("export", SPOTTER, "-f", "claude-code", "--install")
    new_id = installed(ran, "claude --resume")
    cwd = world.source(SPOTTER)["cwd"]
    path = me.home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd) / f"{new_id}.jsonl"
    assert path.is_file()
    again = me.run("export", SPOTTER, "-f", "claude-code", "--install", code=2)
    assert len(again.err.strip().splitlines()) == 1
    imported = fits(me.run("import", "claude-code", str(me.home / ".claude" / "projects")))
    assert "imported 1 of 1 file(s)" in imported.out
    ids = same_view(me, SPOTTER, new_id)
    assert "1 boundary" in me.run("history", new_id).out.splitlines()[0]
    assert usage_total(me) == spend, "a response counted again after its view came back from Claude Code"
    same_model(me, *ids)


def test_install_into_codex_and_import_back(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    ran = me.run("export", CODEX, "-f", "codex", "--install")
    new_id = installed(ran, "codex resume")
    (path,) = (me.home / ".codex" / "sessions").rglob(f"rollout-*-{new_id}.jsonl")
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["type"] == "session_meta"
    imported = fits(me.run("import", "codex", str(me.home / ".codex" / "sessions")))
    assert "imported 1 of 1 file(s)" in imported.out
    same_model(me, *same_view(me, CODEX, new_id))


# ------------------------------------------------------------------------------ fork


def test_fork_before_the_boundary_and_at_a_message(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    spend = usage_total(me)
    before = me.run("history", SPOTTER, "-b", "1", "--json").json()
    fork = me.run("fork", SPOTTER, "-b", "1", "--title", "before the compaction", "--json").json()
    assert fork["entries"] == len(before["entries"]) and fork["fork"]["boundary_index"] == 1
    assert me.run("view", fork["id"], "--json").json()["messages"] == before["messages"]
    listing = fits(me.run("sessions"))
    assert f"⑂{world.source(SPOTTER)['id'][:6]}" in listing.out
    assert "forked from" in fits(me.run("history", fork["id"])).out
    count = len(me.run("sessions", "--json", "--limit", "1000").json())
    refused = me.run("fork", SPOTTER, "--at", "5", code=2)
    assert len(refused.err.strip().splitlines()) == 1 and "nearest valid points" in refused.err
    assert len(me.run("sessions", "--json", "--limit", "1000").json()) == count, "a refused fork wrote a session"
    after = re.search(r"after ([0-9a-f-]{36}) \(seq (\d+)\)", refused.err)
    assert after, refused.err
    at = me.run("fork", SPOTTER, "--at", after.group(2), "--json").json()
    entries = me.run("view", at["id"], "--json").json()["entries"]
    assert entries[-1]["uuid"] == after.group(1) and at["fork"]["message_seq"] == int(after.group(2))
    assert usage_total(me) == spend, "forking counted the parent's API responses again"


# ------------------------------------------------------------------------------ compact, pin


def view_uuids(me: Person, session: str) -> list[str]:
    return [e["uuid"] for e in me.run("view", session, "--json").json()["entries"]]


def continuation(ran: Ran) -> str:
    """The local continuation a write to an imported session went to, from the CLI's note on stderr."""
    match = re.search(r"local continuation ([0-9a-f-]{36})", ran.err)
    assert match, f"no continuation named in {ran.err!r}"
    return match.group(1)


def test_compact_up_to_then_from_then_full_and_walk_back(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    start = view_uuids(me, INIT)
    up_to = me.run("compact", INIT, "--up-to", start[len(start) // 3][:8])
    session = continuation(up_to)
    assert re.match(r"compacted \(partial-up_to\): [\d,]+ -> [\d,]+ tokens", up_to.out)
    middle = view_uuids(me, session)
    me.run("compact", session, "--from", middle[2 * len(middle) // 3][:8])
    full = me.run("compact", session)
    assert full.out.startswith("compacted (full)")
    listing = me.run("history", session)
    shown = [listing]  # checked against 80 columns at the end, after the round trip
    assert "3 boundaries" in listing.out.splitlines()[0]
    kinds = [h["kind"] for h in me.run("history", session, "--json").json()]
    assert kinds == ["partial-up_to", "partial-from", "full"]
    for k, kind in enumerate(kinds, start=1):
        before = me.run("history", session, "-b", str(k), "--json").json()
        table = me.run("history", session, "-b", str(k))
        shown.append(table)
        first = table.out.splitlines()[0]
        assert first.startswith(f"view before boundary {k} ({kind}, manual): {len(before['entries'])} entries")
        assert sum(1 for line in table.out.splitlines() if "✂" in line) == len(before["summarized"])
    # Hand it back to Claude Code and import it again: the same boundaries, the same view.
    new_id = installed(me.run("export", session, "-f", "claude-code", "--install"), "claude --resume")
    me.run("import", "claude-code", str(me.home / ".claude" / "projects"))
    back = [h["kind"] for h in me.run("history", new_id, "--json").json()]
    assert back == kinds or back == kinds[-1:], f"the round trip made {back} of {kinds}"
    assert me.run("view", new_id, "--json").json()["messages"] == me.run("view", session, "--json").json()["messages"]
    for ran in shown:
        fits(ran)


def test_a_pinned_message_survives_a_compaction(world: World, tmp_path: Path) -> None:
    me = world.writable(tmp_path / "home")
    entries = me.run("view", INIT, "--json").json()["entries"]
    rule = next(e for e in entries if e["role"] == "user" and isinstance(e["content"], str) and len(e["content"]) > 3)
    pinned = me.run("pin", INIT, rule["uuid"])
    session = continuation(pinned) if "local continuation" in pinned.err else world.source(INIT)["id"]
    listing = me.run("pins", session)
    assert rule["uuid"][:8] in listing.out
    me.run("compact", session)
    view = json.dumps(me.run("view", session, "--json").json()["messages"], ensure_ascii=False)
    assert rule["content"][:200] in view or json.dumps(rule["content"][:200], ensure_ascii=False)[1:-1] in view
    fits(listing)
