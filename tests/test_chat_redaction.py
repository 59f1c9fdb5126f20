"""`chat` error lines hide credentials: an API body echoing the key, a base URL with a password.

The real CLI runs against the local Messages-API server (or a closed port); the secret planted in
the API's answer or in ANTHROPIC_BASE_URL must not appear on stderr, while the line still says
what failed. The shared function (`hide_credentials`) is also checked on its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionstore.credentials import hide_credentials, hide_url_credentials
from sessionstore.storage.engine.db import shown_url
from tests.support.fakeapi import Reply, start_fake_api
from tests.test_chat_repl import _chat, _closed_port_url, _env

KEY = "sk-ant-api03-EchoedKeyValue0123456789abcdefABCDEF"


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_400_body_echoing_the_bearer_key_is_printed_without_it(sqlite_url: str, tmp_path: Path) -> None:
    echoed = f"invalid header: Authorization: Bearer {KEY} (token OtherBearerToken77 too)"
    with start_fake_api() as api:
        api.script(Reply.error(400, "invalid_request_error", echoed), "Answered.")
        proc = _chat(["--new"], "first\nsecond\n", _env(api.base_url, key=KEY), sqlite_url, tmp_path)
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1 and "the API answered 400" in errors[0], proc.stderr
    assert "EchoedKeyValue" not in proc.stderr and "EchoedKeyValue" not in proc.stdout
    assert "[redacted]" in errors[0]


@pytest.mark.parametrize("password", ["PlainPassw0rd", "Unencoded@Passw0rd"])
def test_a_base_url_password_is_hidden_in_the_cannot_reach_line(sqlite_url: str, tmp_path: Path, password: str) -> None:
    down = _closed_port_url().replace("http://", f"http://alice:{password}@")
    proc = _chat(["--new"], "hello\n", _env(down), sqlite_url, tmp_path)
    errors = _error_lines(proc.stderr)
    assert len(errors) == 1, proc.stderr
    assert "Passw0rd" not in proc.stderr and "Traceback" not in proc.stderr
    assert "alice:***@127.0.0.1" in errors[0], errors[0]


def test_hide_credentials_covers_keys_bearer_tokens_and_url_passwords() -> None:
    text = (
        "Bearer abcdefgh12345678 at postgresql://app:p@ss@db:5432/x and https://u:pw@h/p?q=1 "
        f"with {KEY} and known-secret-xyz"
    )
    shown = hide_credentials(text, ["known-secret-xyz", None])
    for secret in ("abcdefgh12345678", "p@ss", "ss@db", ":pw@", "EchoedKeyValue", "known-secret-xyz"):
        assert secret not in shown, secret
    assert "postgresql://app:***@db:5432/x" in shown and "https://u:***@h/p?q=1" in shown
    assert hide_url_credentials("sqlite:////tmp/a@b.db") == "sqlite:////tmp/a@b.db"


def test_shown_url_hides_a_password_with_an_unencoded_at() -> None:
    assert shown_url("postgresql+psycopg://app:p@ss@db.host:5432/x") == "postgresql+psycopg://app:***@db.host:5432/x"
