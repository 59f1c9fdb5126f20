"""The chat agent's Bash tool runs with an allow-list environment: an `env` call leaks no secret.

The real tool runs `env` for a model served by the local Messages-API server; the secrets set in
the agent's own environment must reach neither the stored transcript, nor the next request sent
to the model, nor the search index. One allow-listed variable proves the command really ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest

from sessionstore import SessionStore
from sessionstore.agent import Agent
from sessionstore.compaction.pipeline import Pipeline
from tests.support.fakeapi import Reply, start_fake_api

SECRETS = {
    "ANTHROPIC_AUTH_TOKEN": "AuthTokenValue5521",
    "PGPASSWORD": "PgPasswordValue7391",
    "DATABASE_URL": "postgresql://app:DbUrlPasswordValue8812@db.internal:5432/app",
    "AWS_SECRET_ACCESS_KEY": "AwsSecretValue3307",
    "GITHUB_TOKEN": "GithubTokenValue6620",
    "MY_SERVICE_PASSWORD": "ServicePasswordValue1149",
}
NEEDLES = [
    "AuthTokenValue5521",
    "PgPasswordValue7391",
    "DbUrlPasswordValue8812",
    "AwsSecretValue3307",
    "GithubTokenValue6620",
    "ServicePasswordValue1149",
]
#: Allow-listed (LC_*): present in the output, so the test sees `env` really ran and was indexed.
PROBE = ("LC_SESSIONSTORE_PROBE", "AllowedProbeValue4411")


def test_env_in_the_bash_tool_stores_sends_and_indexes_no_secret(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {**SECRETS, PROBE[0]: PROBE[1]}.items():
        monkeypatch.setenv(name, value)
    with start_fake_api() as api:
        api.script(Reply.tool_use("Bash", {"command": "env"}), "Done.")
        client = anthropic.Anthropic(base_url=api.base_url, api_key="sk-ant-test-env", max_retries=0)
        session = store.create_session(title="env", model="claude-sonnet-4-6", cwd=str(tmp_path))
        agent = Agent(session=session, pipeline=Pipeline(store), client=client, workdir=tmp_path)
        assert agent.ask("Show me the environment.") == "Done."
        sent = json.dumps([request.body for request in api.message_requests])
    stored = json.dumps([m.content for m in session.transcript()])
    assert PROBE[1] in stored and PROBE[1] in sent, "the env command ran and its output was stored and sent"
    assert [h.session for h in store.search(PROBE[1])] == [session.id], "the output is indexed"
    for needle in NEEDLES:
        assert needle not in stored, f"{needle} stored"
        assert needle not in sent, f"{needle} sent to the model"
        assert store.search(needle) == [], f"{needle} indexed"
