"""`secrets` and `export --redact` agree, through the installed console script on a fresh store.

A crafted Claude Code transcript puts credentials where a person would not look for them: a
quoted `aws_secret_access_key = "..."` in their own message, a key in a tool input's nested
`env`, a token in a tool result, a key in the title, a URL password in the working directory.
It is imported with the real shared transcripts; `secrets` must list each credential, and no
export format, with `--redact`, may carry any of them (`--install` included, whose file must
still import back as a session). Without `--redact` every export carries them all, so the
check is not vacuous; on the real transcripts `--redact` changes nothing.
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from sessionstore.secrets import mask
from tests.conftest import ENGINES, PG_URL, TRANSCRIPTS, _pg_schema_url, shared_transcripts

SESSIONSTORE = Path(sys.executable).parent / "sessionstore"
SOURCE_ID = "35e0c0de-0000-4000-8000-000000000035"
FORMATS = ("jsonl", "markdown", "html", "claude-code")
_RNG = random.Random(35)


def _chars(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Credential:
    """A synthetic credential: the kind `secrets` names it by, where it lists it, the value."""

    kind: str
    where: str
    value: str


AWS_ALPHABET = string.ascii_letters + string.digits + "/+"
TEXT = Credential("aws-access-key", "text", _chars(AWS_ALPHABET, 40))
ENV = Credential("aws-access-key", "tool input", _chars(AWS_ALPHABET, 40))
RESULT = Credential("github-token", "tool result", "ghp_" + _chars(string.ascii_letters + string.digits, 36))
TITLE = Credential(
    "slack-token",
    "title",
    f"xoxb-{_chars(string.digits, 11)}-{_chars(string.digits, 13)}-{_chars(string.ascii_lowercase + string.digits, 24)}",
)
CWD = Credential("url-password", "cwd", "Pw" + _chars(string.ascii_letters + string.digits, 14))
PLANTED = (TEXT, ENV, RESULT, TITLE, CWD)
#: What each format shows of a session: markdown and HTML leave the working directory out.
SHOWN = {
    "jsonl": PLANTED,
    "markdown": (TEXT, ENV, RESULT, TITLE),
    "html": (TEXT, ENV, RESULT, TITLE),
    "claude-code": PLANTED,
}


def crafted_transcript(path: Path) -> Path:
    """A Claude Code session file holding every PLANTED credential, each in its own place."""
    cwd = f"/srv/mirror/https://deploy:{CWD.value}@git.example.com/app"

    def line(uuid: str, parent: str | None, kind: str, message: dict[str, object]) -> dict[str, object]:
        return {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": cwd,
            "sessionId": SOURCE_ID,
            "version": "1.0.0",
            "type": kind,
            "uuid": uuid,
            "timestamp": f"2026-01-01T00:00:0{uuid[-1]}.000Z",
            "message": message,
        }

    command = {"command": "./deploy.sh", "env": {"AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": ENV.value}}
    lines = [
        line(
            "c0000000-0000-4000-8000-000000000001",
            None,
            "user",
            {
                "role": "user",
                "content": (f'my ~/.aws/credentials says aws_secret_access_key = "{TEXT.value}"; deploy please'),
            },
        ),
        line(
            "c0000000-0000-4000-8000-000000000002",
            "c0000000-0000-4000-8000-000000000001",
            "assistant",
            {
                "id": "msg_35a",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "toolu_35a", "name": "Bash", "input": command}],
                "usage": {"input_tokens": 12, "output_tokens": 7},
            },
        ),
        line(
            "c0000000-0000-4000-8000-000000000003",
            "c0000000-0000-4000-8000-000000000002",
            "user",
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_35a", "content": f"pushed with {RESULT.value}"}
                ],
            },
        ),
        line(
            "c0000000-0000-4000-8000-000000000004",
            "c0000000-0000-4000-8000-000000000003",
            "assistant",
            {
                "id": "msg_35b",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Deployed."}],
                "usage": {"input_tokens": 20, "output_tokens": 3},
            },
        ),
        {"type": "custom-title", "customTitle": f"deploy with {TITLE.value}", "sessionId": SOURCE_ID},
    ]
    path.write_text("".join(json.dumps(item) + "\n" for item in lines), encoding="utf-8")
    return path


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed console script with ARGS; output as text."""
    return subprocess.run(
        [str(SESSIONSTORE), *args], capture_output=True, text=True, timeout=300, cwd=cwd, encoding="utf-8"
    )


def ok(*args: str) -> str:
    """stdout of a command that must succeed without a traceback."""
    done = run(*args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    return done.stdout


@pytest.fixture(scope="module", params=ENGINES)
def fresh_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(store URL, crafted session id): a brand-new store, the real transcripts and the crafted one imported into it
    by the console script. Shared by this module's tests, which only read it (or import into it what they check)."""
    shared_transcripts()  # a skip, or a failure under .ci/run (SESSIONSTORE_REQUIRE_TRANSCRIPTS)
    folder = tmp_path_factory.mktemp("redaction")
    if request.param == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{folder / 'fresh.db'}"])
    elif PG_URL:
        urls = _pg_schema_url(PG_URL)
    else:
        pytest.skip("PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)")
    url = next(urls)
    ok("import", "claude-code", str(TRANSCRIPTS / "claude-code"), "--db", url, "--no-progress")
    ok("import", "codex", str(TRANSCRIPTS / "codex"), "--db", url, "--no-progress")
    ok("import", "claude-code", str(crafted_transcript(folder / "crafted.jsonl")), "--db", url)
    sessions = json.loads(ok("sessions", "--json", "--limit", "1000", "--db", url))
    [crafted] = [s["id"] for s in sessions if s.get("source_id") == SOURCE_ID]
    yield url, crafted
    next(urls, None)


def leaked(text: str) -> list[str]:
    """The planted credentials found in `text`, by where they were planted."""
    return [c.where for c in PLANTED if c.value in text]


def test_secrets_lists_every_planted_credential_and_nothing_else(fresh_store: tuple[str, str]) -> None:
    url, crafted = fresh_store
    rows = json.loads(ok("secrets", "--json", "--db", url))
    listed = {(r["where"], r["kind"], r["preview"]) for r in rows if r["session"] == crafted}
    expected = {(c.where, c.kind, mask(c.value)) for c in PLANTED}
    assert expected - listed == set(), "secrets misses a planted credential (the env one, the title, the cwd)"
    assert {r["preview"] for r in rows} == {mask(c.value) for c in PLANTED}, "a finding that was never planted"
    assert leaked(json.dumps(rows)) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_redacted_export_holds_nothing_secrets_lists(fresh_store: tuple[str, str], fmt: str) -> None:
    url, crafted = fresh_store
    plain = ok("export", crafted, "-f", fmt, "--db", url)
    assert sorted(leaked(plain)) == sorted(c.where for c in SHOWN[fmt]), "without --redact the export carries them"
    done = run("export", crafted, "-f", fmt, "--redact", "--db", url)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert leaked(done.stdout) == [], f"{fmt} --redact leaks what `secrets` lists"
    assert {c.kind for c in SHOWN[fmt]} <= set(_placeholders(done.stdout))
    assert f"redacted {len(SHOWN[fmt])} secret(s)" in done.stderr.splitlines()
    if fmt in ("jsonl", "claude-code"):
        assert all(json.loads(raw) for raw in done.stdout.splitlines()), "every redacted line is still JSON"


def _placeholders(text: str) -> list[str]:
    """The kinds of the [REDACTED:<kind>] placeholders in `text`."""
    return [part.split("]", 1)[0] for part in text.split("[REDACTED:")[1:]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_redact_changes_nothing_in_a_session_without_credentials(fresh_store: tuple[str, str], fmt: str) -> None:
    url, crafted = fresh_store
    sessions = json.loads(ok("sessions", "--json", "--limit", "1000", "--db", url))
    real = min((s for s in sessions if s["id"] != crafted and s["messages"] >= 20), key=lambda s: s["messages"])["id"]
    assert run("export", real, "-f", fmt, "--redact", "--db", url).stdout == ok("export", real, "-f", fmt, "--db", url)


@pytest.mark.parametrize("tool", ["claude-code", "codex"])
def test_install_with_redact_writes_a_session_without_them(
    fresh_store: tuple[str, str], tool: str, tmp_path: Path
) -> None:
    url, crafted = fresh_store
    plain_home, home = tmp_path / "plain", tmp_path / "redacted"
    option = "--claude-dir" if tool == "claude-code" else "--codex-home"
    ok("export", crafted, "-f", tool, "--install", option, str(plain_home), "--db", url)
    [plain] = list(plain_home.rglob("*.jsonl"))
    assert set(leaked(plain.read_text(encoding="utf-8"))) >= {TEXT.where, ENV.where, RESULT.where}
    done = run("export", crafted, "-f", tool, "--install", "--redact", option, str(home), "--db", url)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    [installed] = list(home.rglob("*.jsonl"))
    assert leaked(installed.read_text(encoding="utf-8")) == [], f"--install --redact leaks into the {tool} file"
    assert "redacted" in done.stderr
    again = json.loads(ok("import", tool, str(installed), "--json", "--db", url))
    [result] = again["files"]
    assert result["status"] == "imported" and result["session"], "the redacted install still imports as a session"
    view = json.loads(ok("view", result["session"], "--json", "--db", url))
    assert len(view["messages"]) >= 3
    rows = json.loads(ok("secrets", result["session"], "--json", "--db", url))
    assert rows == []
