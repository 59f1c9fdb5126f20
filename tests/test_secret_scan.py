"""`secrets` and `export --redact` on synthetic credentials planted in real shared transcripts.

Recall: every planted secret is found, in the message it was planted in, with its kind, on both
engines; no output of `secrets` shows a value. Redaction: no export format carries a planted
value, each says how many it replaced; markdown and HTML exports hint when secrets are left in.
False positives: the unmodified shared transcripts give FALSE_POSITIVES findings (the README's
figure).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_paths
from sessionstore.secrets import Redactor, find_secrets, mask, redact, scan_store
from tests.support.cli import run_cli
from tests.support.secret_corpus import Planted, corpus, plant

SOURCE = "claude-code/claude-code-viewer/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
#: Findings on the unmodified shared transcripts (stated in README.md, "Guarantees", and docs/security.md).
FALSE_POSITIVES = 0
PLANTED = corpus()


@pytest.fixture
def planted_store(store_url: str, transcripts_dir: Path, tmp_path: Path) -> tuple[str, str, dict[str, Planted]]:
    """(url, session id, uuid -> planted secret) of the real transcript with the corpus planted in it."""
    placed = plant(transcripts_dir / SOURCE, tmp_path / "planted.jsonl", PLANTED)
    assert len(placed) == len(PLANTED)
    with SessionStore.open(store_url) as store:
        [result] = import_paths(store, [tmp_path / "planted.jsonl"])
        assert result.session_id
        return store_url, result.session_id, placed


def _secret_parts(secret: Planted) -> list[str]:
    """The value, and for a multi-line key each of its body lines: none may appear in output."""
    return [secret.value, *(line for line in secret.value.splitlines() if "-----" not in line)]


def test_every_planted_secret_is_found_where_it_was_planted(planted_store: tuple[str, str, dict[str, Planted]]) -> None:
    url, sid, placed = planted_store
    with SessionStore.open(url) as store:
        findings = scan_store(store, sid)
    found = {(f.uuid, f.kind) for f in findings}
    missed = [(uuid, s.kind) for uuid, s in placed.items() if (uuid, s.kind) not in found]
    assert missed == [], "recall is 100% on the planted set"
    assert len(findings) == len(placed) + FALSE_POSITIVES
    assert {f.where for f in findings} >= {"text", "tool input", "tool result"}


def test_the_secrets_command_never_prints_a_value(
    capsys: pytest.CaptureFixture[str], planted_store: tuple[str, str, dict[str, Planted]]
) -> None:
    url, sid, placed = planted_store
    listed = run_cli(capsys, "secrets", "--json", "--db", url)
    table = run_cli(capsys, "secrets", sid[:8], "--db", url)
    assert listed.code == 0 and table.code == 0, (listed.err, table.err)
    rows = json.loads(listed.out)
    assert sorted((r["uuid"], r["kind"]) for r in rows) == sorted((u, s.kind) for u, s in placed.items())
    assert {r["session"] for r in rows} == {sid} and all(r["seq"] >= 1 for r in rows)
    for secret in placed.values():
        for part in _secret_parts(secret):
            assert part not in listed.out + listed.err + table.out + table.err, secret.kind
    assert f"{len(placed)} secret(s) found" in table.err


@pytest.mark.parametrize("fmt", ["jsonl", "markdown", "html", "claude-code"])
def test_export_redact_leaves_no_planted_value_and_says_how_many(
    capsys: pytest.CaptureFixture[str], planted_store: tuple[str, str, dict[str, Planted]], fmt: str
) -> None:
    url, sid, placed = planted_store
    plain = run_cli(capsys, "export", sid, "-f", fmt, "--db", url)
    result = run_cli(capsys, "export", sid, "-f", fmt, "--redact", "--db", url)
    assert plain.code == 0 and result.code == 0, (plain.err, result.err)
    assert all(
        s.value.splitlines()[1 if "\n" in s.value else 0] in plain.out.replace("\\n", "\n") for s in placed.values()
    ), "the plain export carries every planted value"
    for secret in placed.values():
        for part in _secret_parts(secret):
            assert part not in result.out, (fmt, secret.kind)
    for kind in {s.kind for s in placed.values()}:
        assert f"[REDACTED:{kind}]" in result.out, kind
    assert f"redacted {len(placed)} secret(s)" in result.err.splitlines()
    if fmt == "jsonl":
        assert all(json.loads(line) for line in result.out.splitlines()), "the redacted jsonl still parses"


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_a_shareable_export_hints_when_secrets_are_left_in(
    capsys: pytest.CaptureFixture[str], planted_store: tuple[str, str, dict[str, Planted]], fmt: str
) -> None:
    url, sid, placed = planted_store
    result = run_cli(capsys, "export", sid, "-f", fmt, "--db", url)
    hints = [line for line in result.err.splitlines() if line.startswith("hint:")]
    assert len(hints) == 1 and "--redact" in hints[0] and f"{len(placed)} secret(s)" in hints[0], result.err
    with SessionStore.open(url) as store:
        clean = store.create_session(title="clean")
        clean.append({"role": "user", "content": "nothing secret here"})
    quiet = run_cli(capsys, "export", clean.id, "-f", fmt, "--db", url)
    assert quiet.code == 0 and "hint:" not in quiet.err


def test_false_positives_on_the_unmodified_shared_transcripts(sqlite_url: str, transcripts_dir: Path) -> None:
    with SessionStore.open(sqlite_url) as store:
        import_paths(store, [transcripts_dir / "claude-code", transcripts_dir / "codex"])
        assert len(store.list(limit=100)) >= 8
        findings = scan_store(store)
    assert len(findings) == FALSE_POSITIVES, [(f.session, f.seq, f.kind, f.preview) for f in findings]


def test_the_redactor_takes_whole_json_lines() -> None:
    key = next(p for p in PLANTED if p.kind == "private-key").value
    token = next(p for p in PLANTED if p.kind == "anthropic-api-key").value
    env_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    clean = b'{"a": 1,  "b": "nothing here"}\r\n'
    line = json.dumps({"input": {"env": {"AWS_SECRET_ACCESS_KEY": env_secret}, "key": key}, "t": token}) + "\n"
    redactor = Redactor(redact=True)
    assert redactor.json_line(clean) == clean, "a line without secrets keeps its bytes"
    assert json.loads(redactor.json_line(line.encode())) == {
        "input": {"env": {"AWS_SECRET_ACCESS_KEY": "[REDACTED:aws-access-key]"}, "key": "[REDACTED:private-key]"},
        "t": "[REDACTED:anthropic-api-key]",
    }
    assert redactor.json_line(b"\xff\xfe " + token.encode() + b"\n") == b"\xff\xfe [REDACTED:anthropic-api-key]\n"
    assert redactor.found == 3, "distinct secrets met"
    counting = Redactor(redact=False)
    assert counting.json_line(line.encode()) == line.encode() and counting.found == 3


def test_masked_previews_and_the_unencoded_at() -> None:
    text = "git clone https://deploy:p@ssw0rd@x@git.example.com/r.git"
    [secret] = find_secrets(text)
    assert text[secret.start : secret.end] == "p@ssw0rd@x"
    assert redact(text) == ("git clone https://deploy:[REDACTED:url-password]@git.example.com/r.git", 1)
    for planted in PLANTED:
        shown = mask(planted.value)
        assert all(part not in shown for part in _secret_parts(planted))
        if planted.kind != "private-key":  # a key's header is no secret, its body is
            assert planted.value[4:12] not in shown
