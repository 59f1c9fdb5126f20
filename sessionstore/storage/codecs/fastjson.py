"""JSON decoding and encoding for hot loops: the json module's results, with less work per call.

An import decodes every line of a transcript and encodes several values per
message. `loads_line` parses a line with jiter (a dependency of the anthropic
SDK), about a third faster than json.loads, and hands anything jiter refuses
(invalid JSON, lone surrogates, deep nesting) to json.loads, which decodes it
or raises its usual error. `JSONEncoder.encode` (so `json.dumps`) builds a
new C encoder on every call; `encoder` builds one once (`rows.dumps` is
`compact_dumps`). `loads_stored` decodes the compact JSON the store holds,
calling the json module's C scanner directly (the resume and export paths).
"""

from __future__ import annotations

import json
import json.encoder
from typing import Any, Callable

from jiter import from_json

from .textpack import StoredJsonCorrupt, TextCorrupt, unpack_bytes


def loads_line(data: bytes) -> Any:
    """`json.loads(data.decode("utf-8"))` for one line of JSON Lines, `data` being valid UTF-8.

    For what jiter accepts both give the same value (same numbers, NaN and
    Infinity, the last of duplicate keys); the rest goes to json.loads.
    """
    try:
        return from_json(data)
    except ValueError:
        return json.loads(data.decode("utf-8"))


def encoder(item_separator: str, key_separator: str) -> Callable[[Any], str]:
    """`json.JSONEncoder(ensure_ascii=False, separators=...).encode`, its C encoder built once.

    For JSON data (no cycles: the circular-reference check is left out). Falls
    back to the plain `encode` where the C encoder is missing.
    """
    plain = json.JSONEncoder(ensure_ascii=False, separators=(item_separator, key_separator))
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    encode = make(
        None, plain.default, json.encoder.encode_basestring, None, key_separator, item_separator, False, False, True
    )
    return lambda value: "".join(encode(value, 0))


#: What `rows.dumps` writes (compact, non-ASCII kept).
compact_dumps = encoder(",", ":")

#: What `json.dumps(value, ensure_ascii=False)` writes.
spaced_dumps = encoder(", ", ": ")


#: The C scanner json.loads ends in; called directly it skips loads' per-call checks.
_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__; typeshed omits it


def loads_stored(text: str | bytes) -> Any:
    """Decode JSON this package stored (compact, no padding): about 30% faster than json.loads per row.

    A packed message text (a BLOB on SQLite: sessionstore.storage.codecs.textpack) is unpacked to its UTF-8 bytes and
    parsed from them by jiter, which is faster than making a str first and costs a resume little over a text
    column; what jiter refuses takes the str path below. Anything the scanner does not consume whole goes
    through json.loads, which decodes it or raises StoredJsonCorrupt (a ValueError: a row damaged outside
    sessionstore).
    """
    if text.__class__ is bytes:
        raw = unpack_bytes(text)
        try:
            return from_json(raw)
        except ValueError:
            text = _text(raw)
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError):
        return _slow_loads(text)
    if end != len(text):
        return _slow_loads(text)
    return value


def _slow_loads(text: str | bytes) -> Any:
    """json.loads, its JSONDecodeError as StoredJsonCorrupt."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoredJsonCorrupt(f"its stored JSON does not parse (at character {exc.pos})") from exc


def is_stored_json(text: str | bytes | None) -> bool:
    """True when a stored value (packed or not) decodes as JSON: what an export may splice into a line as is."""
    if text is None:
        return True
    try:
        loads_stored(text)
    except (TextCorrupt, RecursionError):
        return False
    return True


def _text(raw: bytes) -> str:
    """An unpacked text as str; raises TextCorrupt when its bytes are not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TextCorrupt(f"a stored message text does not decode: {exc}") from exc
