"""The import's JSON helpers give exactly what the json module gives: same values, same errors, same text."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sessionstore.storage.codecs.fastjson import compact_dumps, loads_line, spaced_dumps
from sessionstore.storage.records.rows import dumps


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types, floats compared by bits (NaN equals NaN, -0.0 differs from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


LINES = [
    '{"type":"user","n":1}\n',
    '{"a":1.0,"b":-0.0,"c":-0,"d":1E5,"e":1e-7,"f":1e400,"g":-1e400,"h":5e-324,"i":0.30000000000000004}\n',
    '{"big":123456789012345678901234567890,"neg":-9223372036854775809}\n',
    '{"nan":NaN,"inf":Infinity,"ninf":-Infinity}\n',
    '{"a":1,"b":2,"a":3}\n',
    '{"esc":"\\u00e9\\/\\"\\\\\\n\\t","pair":"\\ud83d\\ude00","nul":"\\u0000"}\n',
    '{"lone":"\\ud800","other":"\\udc00x"}\n',
    '{"deep":' + "[" * 300 + "]" * 300 + "}\n",
    '  {"leading":"space"}\n',
    '{"trailing":"space"}  \r\n',
    '{"no":"terminator"}',
    '{"text":"caf\u00e9 \u4e2d\u6587 \U0001f600 \u2028"}\n',
    "[1,2,3]\n",
    '"just a string"\n',
]

BAD_LINES = [
    '{"type":"user",\n',
    '{"a":1} extra\n',
    '\ufeff{"bom":1}\n',
    '{"a":"raw\x01control"}\n',
    '{"a":01}\n',
    '{"a":1,}\n',
    '{"a":nan}\n',
    '{"a":"\\x"}\n',
    '{"a":1}\x0c\n',
]


@pytest.mark.parametrize("text", LINES)
def test_loads_line_gives_what_json_loads_gives(text: str) -> None:
    assert same(loads_line(text.encode("utf-8")), json.loads(text))


@pytest.mark.parametrize("text", BAD_LINES)
def test_loads_line_raises_what_json_loads_raises(text: str) -> None:
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        loads_line(text.encode("utf-8"))
    assert (got.value.msg, got.value.pos) == (expected.value.msg, expected.value.pos)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, ascii_only=st.booleans(), compact=st.booleans())
def test_loads_line_on_any_json(value: Any, ascii_only: bool, compact: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":") if compact else None)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate written raw: not a line an import would decode
        assume(False)
    assert same(loads_line(data), json.loads(text))


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES)
def test_encoders_write_what_json_writes(value: Any) -> None:
    assert compact_dumps(value) == dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert spaced_dumps(value) == json.dumps(value, ensure_ascii=False)
