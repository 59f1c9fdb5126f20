"""Credentials hidden from the lines the product prints about failures (API errors, URLs).

One function for every such line: an API error body may echo the key (`Bearer sk-ant-...`),
a base or database URL may carry `user:password@` (with the password's `@` left unencoded).
`hide_credentials` removes the credentials it is told about, anything key-shaped, bearer tokens
and URL passwords; what remains still says what went wrong.
"""

from __future__ import annotations

import re
from typing import Iterable

HIDDEN = "[redacted]"

#: `scheme://user:password@host`: the password runs to the LAST `@` before the host, so an
#: unencoded `@` in it is hidden too; the user name is kept (it tells which account failed). Quotes,
#: angle brackets and backslashes end it: they cannot stand unencoded in a URL, and they end a
#: JSON or HTML string around one.
URL_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:\"'<>\\]*)"
    r":(?P<password>[^\s/?#\"'<>\\]*)@"
)
#: Anthropic keys and tokens (sk-ant-api03-..., sk-ant-oat01-...).
_KEY_SHAPE = re.compile(r"sk-ant-[A-Za-z0-9_\-]+")
#: `Authorization: Bearer TOKEN` as servers echo it.
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}")


def hide_url_credentials(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` shown as `***`."""
    return URL_USERINFO.sub(lambda m: f"{m.group('head')}:***@", text)


def hide_credentials(text: str, known: Iterable[str | None] = ()) -> str:
    """`text` without the `known` secrets, key-shaped strings, bearer tokens and URL passwords."""
    for secret in known:
        if secret:
            text = text.replace(secret, HIDDEN)
    text = _KEY_SHAPE.sub(HIDDEN, text)
    text = _BEARER.sub(lambda m: m.group(1) + HIDDEN, text)
    return hide_url_credentials(text)
