"""Credentials kept by accident: find them in stored messages and redact them from exports.

Transcripts hold whatever tools printed, keys an `env` call dumped included. Detection uses the
regular-expression plugins of the maintained `detect-secrets` package (AWS, GitHub, GitLab, Slack,
Stripe, JWTs, private keys, ...) plus rules for documented formats it lacks: Anthropic keys,
OpenAI project and service keys, GitHub fine-grained tokens, whole PEM private-key blocks and URL
passwords (an unencoded `@` included). Its entropy and keyword plugins are left out: on real
transcripts they flag hashes, ids and every `password = ...` in source code (see the README's
false-positive figure). A finding never carries the secret: only its kind and a masked preview.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from typing import IO, TYPE_CHECKING, Any, Iterator

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from sessionstore.credentials import URL_USERINFO

if TYPE_CHECKING:
    from sessionstore.storage.session import Session
    from sessionstore.storage.store import SessionStore

#: detect-secrets plugins used, each with the kind its findings are named by.
PLUGINS: tuple[tuple[RegexBasedDetector, str], ...] = (
    (AWSKeyDetector(), "aws-access-key"),
    (AzureStorageKeyDetector(), "azure-storage-key"),
    (DiscordBotTokenDetector(), "discord-bot-token"),
    (GitHubTokenDetector(), "github-token"),
    (GitLabTokenDetector(), "gitlab-token"),
    (JwtTokenDetector(), "jwt"),
    (MailchimpDetector(), "mailchimp-key"),
    (NpmDetector(), "npm-token"),
    (OpenAIDetector(), "openai-api-key"),
    (PypiTokenDetector(), "pypi-token"),
    (SendGridDetector(), "sendgrid-key"),
    (SlackDetector(), "slack-token"),
    (SquareOAuthDetector(), "square-oauth-secret"),
    (StripeDetector(), "stripe-key"),
    (TelegramBotTokenDetector(), "telegram-bot-token"),
    (TwilioKeyDetector(), "twilio-key"),
)

#: Documented formats detect-secrets does not know (or only partly).
RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"sk-ant-[a-z]+\d*-[A-Za-z0-9_\-]{20,}"), "anthropic-api-key"),
    (re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}"), "openai-api-key"),
    (re.compile(r"github_pat_[A-Za-z0-9_]{40,}"), "github-token"),
)

#: A PEM private key, header to footer; newlines real or JSON-escaped (`\n`). Without a footer
#: (a cut output) the base64 body after the header is taken.
_PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----(?:.*?-----END \1PRIVATE KEY\2-----"
    r"|(?:[A-Za-z0-9+/=\s]|\\[nr])*)",
    re.DOTALL,
)
#: Characters around a regex match that are delimiters, not part of the secret.
_DELIMITERS = " \t\r\n\"'=:"
#: The characters of a JWT's signature, which detect-secrets' pattern leaves out (it is lazy).
_JWT_TAIL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.+/="
#: Longest text a secret spans; the export filter keeps this much back between writes.
HOLD_CHARS = 16_384


@dataclass(frozen=True, slots=True)
class Secret:
    """Where one secret is in a text, and its kind; the value is the caller's text[start:end]."""

    kind: str
    start: int
    end: int


def find_secrets(text: str) -> list[Secret]:
    """Every secret in `text`, in order, none overlapping (the longer of two overlapping wins)."""
    found: list[Secret] = []
    if "PRIVATE KEY" in text:
        found += [Secret("private-key", m.start(), m.end()) for m in _PEM.finditer(text)]
    for match in URL_USERINFO.finditer(text):
        if match.group("password"):
            found.append(Secret("url-password", match.start("password"), match.end("password")))
    for pattern, kind in RULES:
        found += [Secret(kind, m.start(), m.end()) for m in pattern.finditer(text)]
    for plugin, kind in PLUGINS:
        for regex in plugin.denylist:
            for match in regex.finditer(text):
                secret = _span(match, kind)
                if secret is not None:
                    found.append(secret)
    return _without_overlaps(found)


def _span(match: re.Match[str], kind: str) -> Secret | None:
    """The secret a plugin's match holds: a long capture group, else the match less delimiters."""
    start, end = match.span()
    if match.lastindex and len(match.group(match.lastindex) or "") >= 8:
        start, end = match.span(match.lastindex)
    value = match.string[start:end]
    start += len(value) - len(value.lstrip(_DELIMITERS))
    end -= len(value) - len(value.rstrip(_DELIMITERS))
    if end - start < 8:
        return None
    if kind == "jwt":
        end += len(match.string[end:]) - len(match.string[end:].lstrip(_JWT_TAIL))
        if not JwtTokenDetector.is_formally_valid(match.string[start:end]):
            return None
    return Secret(kind, start, end)


def _without_overlaps(found: list[Secret]) -> list[Secret]:
    kept: list[Secret] = []
    for secret in sorted(found, key=lambda s: (s.start, s.start - s.end)):
        if kept and secret.start < kept[-1].end:
            continue
        kept.append(secret)
    return kept


def placeholder(kind: str) -> str:
    """What a redacted secret becomes."""
    return f"[REDACTED:{kind}]"


def redact(text: str) -> tuple[str, int]:
    """`text` with every secret replaced by its typed placeholder, and how many were replaced."""
    secrets = find_secrets(text)
    if not secrets:
        return text, 0
    parts, last = [], 0
    for secret in secrets:
        parts += [text[last : secret.start], placeholder(secret.kind)]
        last = secret.end
    parts.append(text[last:])
    return "".join(parts), len(secrets)


def mask(value: str) -> str:
    """A preview that tells a secret apart without showing it: a short prefix of long values and the length."""
    if value.startswith("-----BEGIN"):
        head = value.split("-----", 2)
        return f"-----{head[1]}-----… ({len(value)} chars)" if len(head) > 2 else f"… ({len(value)} chars)"
    keep = min(4, len(value) // 6) if len(value) >= 16 else 0
    return f"{value[:keep]}… ({len(value)} chars)"


# ------------------------------------------------------------------ stored messages


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One secret found in a stored message: where it is and what kind, never the value."""

    session: str
    seq: int
    uuid: str
    role: str
    where: str
    kind: str
    preview: str

    def to_dict(self) -> dict[str, Any]:
        """The `secrets --json` shape of a finding."""
        return asdict(self)


_WHERE = {
    "text": "text",
    "thinking": "thinking",
    "tool_use": "tool input",
    "server_tool_use": "tool input",
    "mcp_tool_use": "tool input",
    "tool_result": "tool result",
}


def scan_session(session: "Session") -> list[SecretFinding]:
    """Every secret in the session's messages (text, tool inputs and results) and spilled originals."""
    from sessionstore.storage.spill import list_spills, spill_original

    findings: list[SecretFinding] = []
    seen: set[tuple[int, str, str]] = set()
    results: dict[str, tuple[int, str, str]] = {}
    for message in session.transcript():
        for where, text, block in _texts(message.content):
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                results[block["tool_use_id"]] = (message.seq, message.uuid, message.role)
            findings += _findings(session.id, (message.seq, message.uuid, message.role), where, text, seen)
    for spill in list_spills(session):
        owner = results.get(spill.tool_use_id)
        if owner is not None:
            text = spill_original(session, spill.tool_use_id).decode("utf-8", "replace")
            findings += _findings(session.id, owner, "spill", text, seen)
    return findings


def scan_store(store: "SessionStore", session: str | None = None) -> list[SecretFinding]:
    """The findings of one session (id, source id or prefix), or of every session."""
    if session is not None:
        return scan_session(store.get(session))
    findings: list[SecretFinding] = []
    offset = 0
    while page := store.list(limit=500, offset=offset):
        for row in page:
            findings += scan_session(store.get(row["id"]))
        offset += len(page)
    return findings


def _findings(
    session_id: str, owner: tuple[int, str, str], where: str, text: str, seen: set[tuple[int, str, str]]
) -> list[SecretFinding]:
    """The findings in one text, less those already found in the same message (a spill repeats its result)."""
    out = []
    for secret in find_secrets(text):
        value = text[secret.start : secret.end]
        key = (owner[0], secret.kind, hashlib.sha256(value.encode("utf-8", "replace")).hexdigest())
        if key in seen:
            continue
        seen.add(key)
        out.append(SecretFinding(session_id, owner[0], owner[1], owner[2], where, secret.kind, mask(value)))
    return out


def _texts(content: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, text, block) for every string of a message's content."""
    if isinstance(content, str):
        yield "text", content, {}
        return
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            where = _WHERE.get(str(block.get("type")), str(block.get("type")))
            for text in _strings(block):
                yield where, text, block


def _strings(value: Any) -> Iterator[str]:
    """Every string value inside a JSON value (keys and ids of the envelope included; they are short)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# ------------------------------------------------------------------ exports


class SecretFilter:
    """A write-through stream that finds (and with `redact`, replaces) secrets in what passes.

    Writers of every export format call only `write`. Text is released up to its last newline,
    except that a private-key block still open is held until its end (at most HOLD_CHARS past
    its start), so no secret is cut between two writes. `binary` streams carry UTF-8 bytes; bytes
    that are not UTF-8 pass through unchanged. `found` counts secrets seen.
    """

    def __init__(self, out: IO[Any], *, redact: bool, binary: bool = False) -> None:
        self.out = out
        self.redact = redact
        self.binary = binary
        self.found = 0
        self._pending = ""

    def write(self, data: Any) -> int:
        """Take `data` (str, or bytes when binary); release what no later write can extend."""
        self._pending += data.decode("utf-8", "surrogateescape") if self.binary else data
        cut = self._safe_cut()
        if cut:
            self._release(self._pending[:cut])
            self._pending = self._pending[cut:]
        return len(data)

    def flush(self) -> None:
        """Release everything held and flush the stream under it."""
        if self._pending:
            self._release(self._pending)
            self._pending = ""
        self.out.flush()

    def _safe_cut(self) -> int:
        """How much of the pending text can go: up to the last newline outside an open key block."""
        text = self._pending
        cut = text.rfind("\n") + 1
        opened = text.rfind("-----BEGIN ", 0, cut)
        if (
            opened != -1
            and "PRIVATE KEY" in text[opened : opened + 80]
            and text.find("-----END ", opened, cut) == -1
            and len(text) - opened < HOLD_CHARS
        ):
            cut = opened
        return cut

    def _release(self, text: str) -> None:
        if self.redact:
            text, count = redact(text)
        else:
            count = len(find_secrets(text))
        self.found += count
        self.out.write(text.encode("utf-8", "surrogateescape") if self.binary else text)
