"""Credentials kept by accident: find them in stored sessions and redact them from exports.

Transcripts hold whatever tools printed, keys an `env` call dumped included. Detection uses the
regular-expression plugins of the maintained `detect-secrets` package (AWS, GitHub, GitLab, Slack,
Stripe, JWTs, private keys, ...) plus rules for documented formats it lacks: Anthropic keys,
OpenAI project and service keys, GitHub fine-grained tokens, whole PEM private-key blocks and URL
passwords (an unencoded `@` included). Its entropy and keyword plugins are left out: on real
transcripts they flag hashes, ids and every `password = ...` in source code (see the README's
false-positive figure). A finding never carries the secret: only its kind and a masked preview.
`secrets` (scan_store) and every export (Redactor) read the same stored values with the same
detector, before any format quotes or escapes them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator

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
    from sessionstore.storage.write.session import Session
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
#: What `placeholder` writes: a URL password already redacted is no secret.
_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
#: Characters around a regex match that are delimiters, not part of the secret.
_DELIMITERS = " \t\r\n\"'=:"
#: The characters of a JWT's signature, which detect-secrets' pattern leaves out (it is lazy).
_JWT_TAIL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.+/="


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
        if match.group("password") and not _PLACEHOLDER.fullmatch(match.group("password")):
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


# ------------------------------------------------------------------ JSON values


def find_keyed(text: str, key: str | None = None) -> list[Secret]:
    """The secrets of a string, read as `key="text"` when it is a dict entry's value.

    Some formats are named only by their key (`"AWS_SECRET_ACCESS_KEY": "..."` in a tool
    input's `env`): the value alone is 40 plain characters. Spans are the value's own.
    """
    if key is None:
        return find_secrets(text)
    head = f'{key}="'
    found = []
    for secret in find_secrets(f'{head}{text}"'):
        start, end = max(secret.start - len(head), 0), min(secret.end - len(head), len(text))
        if end - start >= 8:
            found.append(Secret(secret.kind, start, end))
    return found


def strings(value: Any, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    """(key, string) for every string inside a JSON value, the key of the dict entry holding it (else None)."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from strings(item, str(name))
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, key)


class Redactor:
    """The detector `secrets` uses, applied to what an export writes: counts the secrets met, replaces them with `redact`.

    Every export format hands its stored values (content, titles, cwd, metadata, whole JSON
    lines) to `value`, `text` or `json_line` before serializing them, so quoting and escaping
    cannot hide a secret from it. `known` values (what `secrets` lists for the session: see
    `for_session`) are replaced wherever they occur, even with no key around them. `found` is
    the number of distinct secrets met.
    """

    def __init__(self, *, redact: bool, known: dict[str, str] | None = None) -> None:
        self.redact = redact
        self.known = dict(known or {})
        self._known_re = (
            re.compile("|".join(re.escape(v) for v in sorted(self.known, key=len, reverse=True)))
            if self.known
            else None
        )
        self._seen: set[str] = set()
        self._met = 0

    @classmethod
    def for_session(cls, session: "Session", *, redact: bool) -> "Redactor":
        """A redactor that knows every secret `secrets` lists for `session` (read once more when redacting)."""
        known = {hit.value: hit.kind for hit in session_hits(session)} if redact else {}
        return cls(redact=redact, known=known)

    @property
    def found(self) -> int:
        """How many distinct secrets the values handed over held."""
        return len(self._seen)

    def text(self, text: str, key: str | None = None) -> str:
        """`text` (a dict entry's value when `key` is given) with its secrets replaced (with `redact`) and counted."""
        secrets = find_keyed(text, key)
        if self._known_re is not None:
            secrets = _without_overlaps(
                secrets + [Secret(self.known[m.group()], m.start(), m.end()) for m in self._known_re.finditer(text)]
            )
        if not secrets:
            return text
        self._seen.update(text[s.start : s.end] for s in secrets)
        self._met += len(secrets)
        if not self.redact:
            return text
        parts, last = [], 0
        for secret in secrets:
            parts += [text[last : secret.start], placeholder(secret.kind)]
            last = secret.end
        parts.append(text[last:])
        return "".join(parts)

    def value(self, value: Any, key: str | None = None) -> Any:
        """A JSON value with every string inside it passed through `text`; without `redact`, the value itself."""
        if not self.redact:
            for name, text in strings(value, key):
                self.text(text, name)
            return value
        return self._redacted(value, key)

    def _redacted(self, value: Any, key: str | None) -> Any:
        """A copy of a JSON value with each string redacted (keys and structure as they were)."""
        if isinstance(value, str):
            return self.text(value, key)
        if isinstance(value, dict):
            return {name: self._redacted(item, str(name)) for name, item in value.items()}
        if isinstance(value, list):
            return [self._redacted(item, key) for item in value]
        return value

    def json_line(self, line: bytes) -> bytes:
        """One JSON line (bytes, newline kept) with its values redacted; kept byte for byte when it holds no secret."""
        try:
            data = json.loads(line)
        except ValueError:
            text = line.decode("utf-8", "surrogateescape")
            return self.text(text).encode("utf-8", "surrogateescape")
        before = self._met
        cleaned = self.value(data)
        if not self.redact or self._met == before:
            return line
        return json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


# ------------------------------------------------------------------ stored messages


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One secret found in a stored message or session field: where it is and what kind, never the value.

    A session's title and working directory are findings with seq 0 and no uuid or role.
    """

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


@dataclass(frozen=True, slots=True)
class _Hit:
    """One secret in a session: the message it is in (seq, uuid, role; 0, "", "" for a session field), where, kind, value."""

    owner: tuple[int, str, str]
    where: str
    kind: str
    value: str


_WHERE = {
    "text": "text",
    "thinking": "thinking",
    "tool_use": "tool input",
    "server_tool_use": "tool input",
    "mcp_tool_use": "tool input",
    "tool_result": "tool result",
}
_SESSION_FIELD = (0, "", "")


def scan_session(session: "Session") -> list[SecretFinding]:
    """Every secret in the session: its title and cwd, each message's text, tool inputs and results and
    metadata, and spilled originals; masked."""
    return [
        SecretFinding(session.id, *hit.owner, where=hit.where, kind=hit.kind, preview=mask(hit.value))
        for hit in session_hits(session)
    ]


def session_hits(session: "Session") -> Iterator[_Hit]:
    """The secrets of a session, with their values: what `secrets` lists and what `Redactor.for_session` knows.

    A message's secret is listed once per message (a spill repeats its result); a secret in
    metadata or a session field once per session (every line of a file repeats its cwd).
    """
    from sessionstore.storage.write.spill import list_spills, spill_original

    seen: set[tuple[int, str, str]] = set()
    for where, text in (("title", session.title), ("cwd", session.cwd)):
        if text:
            yield from _hits(_SESSION_FIELD, where, [(None, text)], seen)
    results: dict[str, tuple[int, str, str]] = {}
    for message in session.transcript():
        owner = (message.seq, message.uuid, message.role)
        for where, block in _blocks(message.content):
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                results[block["tool_use_id"]] = owner
            yield from _hits(owner, where, strings(block), seen)
        yield from _hits(owner, "metadata", strings(message.metadata), seen, once_per_session=True)
    for spill in list_spills(session):
        holder = results.get(spill.tool_use_id)
        if holder is not None:
            text = spill_original(session, spill.tool_use_id).decode("utf-8", "replace")
            yield from _hits(holder, "spill", [(None, text)], seen)


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


def _hits(
    owner: tuple[int, str, str],
    where: str,
    texts: Iterable[tuple[str | None, str]],
    seen: set[tuple[int, str, str]],
    *,
    once_per_session: bool = False,
) -> Iterator[_Hit]:
    """The secrets in (key, text) pairs, less those already found in the same message (or session)."""
    for key, text in texts:
        for secret in find_keyed(text, key):
            value = text[secret.start : secret.end]
            digest = hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()
            marks = [(owner[0], secret.kind, digest)]
            if once_per_session or owner is _SESSION_FIELD:
                marks.append((-1, secret.kind, digest))
            if any(mark in seen for mark in marks):
                continue
            seen.update(marks)
            yield _Hit(owner, where, secret.kind, value)


def _blocks(content: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, block) for every block of a message's content (a string content as one text block)."""
    if isinstance(content, str):
        yield "text", {"text": content}
        return
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            yield _WHERE.get(str(block.get("type")), str(block.get("type"))), block
