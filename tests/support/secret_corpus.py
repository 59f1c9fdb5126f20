"""Synthetic credentials in documented formats, and real transcripts with them planted inside.

Every value is made here from a fixed seed in the shape its issuer documents (prefix, alphabet,
length); none is a real credential. `plant` copies a real Claude Code transcript, adding one
secret to each of several messages of different kinds (user text, assistant text, tool input,
tool result), and says which message got which.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

_RNG = random.Random(20)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits


def _chars(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _pem(label: str) -> str:
    body = base64.b64encode(bytes(_RNG.randrange(256) for _ in range(600))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


@dataclass(frozen=True)
class Planted:
    """One synthetic secret: its kind as `secrets` names it, the value, and the text it is written in."""

    kind: str
    value: str
    text: str


def corpus() -> list[Planted]:
    """One or more synthetic values per documented format."""
    anthropic = "sk-ant-api03-" + _chars(ALNUM + "-_", 93) + "AA"
    admin = "sk-ant-admin01-" + _chars(ALNUM + "-_", 93) + "AA"
    openai_project = "sk-proj-" + _chars(ALNUM + "-_", 74) + "T3BlbkFJ" + _chars(ALNUM + "-_", 74)
    openai_legacy = "sk-" + _chars(ALNUM, 20) + "T3BlbkFJ" + _chars(ALNUM, 20)
    aws = "AKIA" + _chars(UPPER, 16)
    aws_session = "ASIA" + _chars(UPPER, 16)
    ghp = "ghp_" + _chars(ALNUM, 36)
    fine = "github_pat_" + _chars(ALNUM, 22) + "_" + _chars(ALNUM, 59)
    slack_bot = f"xoxb-{_chars(string.digits, 11)}-{_chars(string.digits, 13)}-{_chars(ALNUM, 24).lower()}"
    slack_user = f"xoxp-{_chars(string.digits, 11)}-{_chars(string.digits, 11)}-{_chars(string.digits, 13)}-" + _chars(
        string.hexdigits.lower()[:16], 32
    )
    jwt = ".".join(
        [
            _b64url({"alg": "HS256", "typ": "JWT"}),
            _b64url({"sub": "1234567890", "name": "Synthetic User", "iat": 1516239022}),
            _chars(ALNUM + "-_", 43),
        ]
    )
    rsa, openssh = _pem("RSA PRIVATE KEY"), _pem("OPENSSH PRIVATE KEY")
    pg_password, at_password = "Sy" + _chars(ALNUM, 14), "p@" + _chars(ALNUM, 10) + "@x"
    return [
        Planted("anthropic-api-key", anthropic, f"export ANTHROPIC_API_KEY={anthropic}"),
        Planted("anthropic-api-key", admin, f"admin key: {admin}"),
        Planted("openai-api-key", openai_project, f"OPENAI_API_KEY={openai_project}"),
        Planted("openai-api-key", openai_legacy, f'openai.api_key = "{openai_legacy}"'),
        Planted("aws-access-key", aws, f"AWS_ACCESS_KEY_ID={aws}"),
        Planted("aws-access-key", aws_session, f"aws_access_key_id = {aws_session}"),
        Planted("github-token", ghp, f"git remote set-url origin https://{ghp}@github.com/o/r.git"),
        Planted("github-token", fine, f"GITHUB_TOKEN={fine}"),
        Planted("slack-token", slack_bot, f"SLACK_BOT_TOKEN={slack_bot}"),
        Planted("slack-token", slack_user, f"token: {slack_user}"),
        Planted("jwt", jwt, f"Authorization: Bearer {jwt}"),
        Planted("private-key", rsa, f"$ cat ~/.ssh/id_rsa\n{rsa}\n"),
        Planted("private-key", openssh, f"{openssh}\n"),
        Planted("url-password", pg_password, f"DATABASE_URL=postgresql://app:{pg_password}@db.internal:5432/app"),
        Planted("url-password", at_password, f"git clone https://deploy:{at_password}@git.example.com/r.git"),
    ]


def _text_slots(line: dict[str, Any]) -> list[tuple[str, Callable[[str], None]]]:
    """Places in one transcript line where a text can be added: (where, add)."""
    message = line.get("message")
    if not isinstance(message, dict) or line.get("type") not in ("user", "assistant") or line.get("isMeta"):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [("text", lambda t: message.__setitem__("content", content + "\n" + t))]
    slots: list[tuple[str, Callable[[str], None]]] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type")
        if kind == "text":
            slots.append(("text", lambda t, b=block: b.__setitem__("text", b["text"] + "\n" + t)))
        elif kind == "tool_use" and isinstance(block.get("input"), dict):
            slots.append(("tool input", lambda t, b=block: b["input"].__setitem__("planted", t)))
        elif kind == "tool_result" and isinstance(block.get("content"), str):
            slots.append(("tool result", lambda t, b=block: b.__setitem__("content", b["content"] + "\n" + t)))
    return slots


def plant(source: Path, target: Path, planted: list[Planted]) -> dict[str, Planted]:
    """`source` copied to `target` with each secret added to a different message; returns uuid -> secret.

    The messages are spread over the file and over the kinds of place (text, tool input, tool result).
    """
    lines = [json.loads(raw) for raw in source.read_bytes().splitlines() if raw.strip()]
    slots = [(line, where, add) for line in lines for where, add in _text_slots(line)]
    by_where: dict[str, list[Any]] = {}
    for slot in slots:
        by_where.setdefault(slot[1], []).append(slot)
    order = ["text", "tool input", "tool result"]
    placed: dict[str, Planted] = {}
    used: set[int] = set()
    for i, secret in enumerate(planted):
        choices = by_where.get(order[i % len(order)]) or slots
        line, _, add = next(s for s in choices[(i * 7) % len(choices) :] + choices if id(s[0]) not in used)
        used.add(id(line))
        add(secret.text)
        placed[str(line.get("uuid") or uuid.uuid4())] = secret
    target.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return placed
