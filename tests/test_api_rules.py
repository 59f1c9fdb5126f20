"""The door refuses what the Messages API refuses (issue 16, item 4).

Each refused message gets a typed `InvalidContent` from the API and exit 2 with
one line from the CLI, and nothing is written. The same messages are judged
by the independent checker in tests/support/validity.py, so the two readings
of the API's rules agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionstore import InvalidContent, SessionStore
from sessionstore.storage.records.validate import normalize
from tests.support.cli import run_cli
from tests.support.validity import check_messages

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
PDF = "JVBERi0xLjQK"


def _image(**source: Any) -> dict[str, Any]:
    return {"type": "image", "source": source}


def _result(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": list(blocks)}]}


# (name, message appended after a pending tool_use t1, words the error must contain)
BAD: list[tuple[str, dict[str, Any], str]] = [
    ("whitespace assistant string", {"role": "assistant", "content": "   "}, "whitespace"),
    ("whitespace user string", {"role": "user", "content": " \n\t"}, "whitespace"),
    ("whitespace text block", {"role": "assistant", "content": [{"type": "text", "text": "   "}]}, "whitespace"),
    ("empty text block", {"role": "user", "content": [{"type": "text", "text": ""}]}, "whitespace"),
    (
        "tool_use input string",
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t9", "name": "Bash", "input": "ls -la"}]},
        "input must be an object",
    ),
    (
        "tool_use input missing",
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t9", "name": "Bash"}]},
        "input must be an object",
    ),
    ("image without source", {"role": "user", "content": [{"type": "image"}]}, "source"),
    (
        "image text/plain",
        {"role": "user", "content": [_image(type="base64", media_type="text/plain", data=PNG)]},
        "media_type 'text/plain'",
    ),
    (
        "image invalid base64",
        {"role": "user", "content": [_image(type="base64", media_type="image/png", data="not base64!")]},
        "not valid base64",
    ),
    (
        "image base64 bad padding",
        {"role": "user", "content": [_image(type="base64", media_type="image/png", data="AAA")]},
        "not valid base64",
    ),
    ("image unknown source type", {"role": "user", "content": [_image(type="path", path="/x.png")]}, "'path'"),
    ("image url without url", {"role": "user", "content": [_image(type="url")]}, "'url'"),
    (
        "document pdf wrong media",
        {
            "role": "user",
            "content": [{"type": "document", "source": {"type": "base64", "media_type": "image/png", "data": PDF}}],
        },
        "application/pdf",
    ),
    ("document without source", {"role": "user", "content": [{"type": "document"}]}, "source"),
    ("tool_result whitespace text", _result({"type": "text", "text": "  "}), "whitespace"),
    ("tool_result with tool_use", _result({"type": "tool_use", "id": "x", "name": "y", "input": {}}), "'tool_use'"),
    ("tool_result bad image", _result(_image(type="base64", media_type="image/bmp", data=PNG)), "image/bmp"),
    (
        "tool_use in user message",
        {"role": "user", "content": [{"type": "tool_use", "id": "t9", "name": "Bash", "input": {}}]},
        "assistant message",
    ),
    (
        "thinking in user message",
        {"role": "user", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
        "assistant message",
    ),
    (
        "thinking without signature",
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]},
        "'signature'",
    ),
    (
        "search_result without source",
        {
            "role": "user",
            "content": [{"type": "search_result", "title": "t", "content": [{"type": "text", "text": "x"}]}],
        },
        "'source'",
    ),
]

GOOD: list[tuple[str, dict[str, Any]]] = [
    (
        "png",
        {
            "role": "user",
            "content": [
                _image(type="base64", media_type="image/png", data=PNG),
                {"type": "text", "text": "what is this?"},
            ],
        },
    ),
    ("image url", {"role": "user", "content": [_image(type="url", url="https://example.com/a.png")]}),
    ("image file", {"role": "user", "content": [_image(type="file", file_id="file_011")]}),
    (
        "pdf",
        {
            "role": "user",
            "content": [
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}}
            ],
        },
    ),
    (
        "text document",
        {
            "role": "user",
            "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "notes"}}],
        },
    ),
    (
        "tool_result with image",
        _result({"type": "text", "text": "screenshot:"}, _image(type="base64", media_type="image/gif", data=PNG)),
    ),
    (
        "thinking",
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "", "signature": "EsQC"}, {"type": "text", "text": "ok"}],
        },
    ),
]


def _seed(store: SessionStore):
    s = store.create_session()
    s.append({"role": "user", "content": "start"})
    s.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "listing"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}},
            ],
        }
    )
    return s


def _snapshot(s) -> tuple[Any, ...]:
    state = s.refresh_state()
    return (state.last_seq, state.view_tokens, state.tail, [m.content for m in s.transcript()])


def _request(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The seeded view plus `message`, as the API would receive it."""
    seed = [
        {"role": "user", "content": "start"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "listing"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}},
            ],
        },
    ]
    if message["role"] == "assistant" or not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in message["content"]
    ):
        seed.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]})
        if message["role"] == "user":
            seed.append({"role": "assistant", "content": "next?"})
    return [*seed, message]


@pytest.mark.parametrize("name,message,words", BAD, ids=[b[0] for b in BAD])
def test_api_refuses_what_the_messages_api_refuses(
    store: SessionStore, name: str, message: dict[str, Any], words: str
) -> None:
    s = _seed(store)
    before = _snapshot(s)
    with pytest.raises(InvalidContent) as info:
        s.append(message)
    assert words in str(info.value)
    assert _snapshot(s) == before


@pytest.mark.parametrize("name,message,words", BAD, ids=[b[0] for b in BAD])
def test_the_independent_checker_agrees_on_refusals(name: str, message: dict[str, Any], words: str) -> None:
    assert check_messages(_request(message)), f"{name}: the checker accepts what the door refuses"


@pytest.mark.parametrize("name,message", GOOD, ids=[g[0] for g in GOOD])
def test_what_the_api_accepts_is_let_in(store: SessionStore, name: str, message: dict[str, Any]) -> None:
    s = _seed(store)
    if message["role"] == "assistant" or "tool_result" not in json.dumps(message):
        s.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]})
        if message["role"] == "user":
            s.append({"role": "assistant", "content": "next?"})
    s.append(message)
    assert s.active_view()[-1]["content"] == message["content"]
    assert check_messages(_request(message)) == []


@pytest.mark.parametrize(
    "name,message,words",
    [
        b
        for b in BAD
        if b[0]
        in (
            "whitespace assistant string",
            "tool_use input string",
            "image without source",
            "image text/plain",
            "image invalid base64",
        )
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_cli_refuses_with_exit_2_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sqlite_url: str, name: str, message: Any, words: str
) -> None:
    with SessionStore.open(sqlite_url) as st:
        s = _seed(st)
        before = _snapshot(s)
    path = tmp_path / "msg.json"
    path.write_text(json.dumps(message))
    result = run_cli(capsys, "append", s.id, str(path), "--db", sqlite_url)
    assert result.code == 2
    assert result.err.startswith("error: ") and words in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    with SessionStore.open(sqlite_url) as st:
        assert _snapshot(st.get(s.id)) == before


def test_importers_keep_the_source_record() -> None:
    """An import records what the tool wrote (its view repair keeps refused pieces out of the view)."""
    blank = {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}]}
    with pytest.raises(InvalidContent):
        normalize(blank)
    assert normalize(blank, sendable=False).content == blank["content"]


def test_system_messages_are_not_sent_so_not_held_to_the_api_rules() -> None:
    assert normalize({"role": "system", "content": "  "}).content == "  "
