"""A local HTTP server that speaks enough of the Anthropic Messages API for the real SDK.

Tests point `anthropic.Anthropic(base_url=api.base_url)` at it, so the SDK's own
request building, retries, SSE parsing and error mapping all run for real.
Replies are scripted: a queue of `Reply` objects (text, tool_use blocks or an
error status), then an optional responder callable, then a default. Every
request is recorded (body and headers) for assertions.

    api = start_fake_api(max_prompt_tokens=50_000)
    api.overload(2)                                   # two 529s first
    api.script(Reply.tool_use("Read", {"path": "a.py"}), "All done.")
    ...
    api.close()
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlsplit

import pytest

from tests.support.validity import check_messages

_tool_ids = itertools.count(1)
_message_ids = itertools.count(1)
_response_ids = itertools.count(1)


def estimate_tokens(value: Any) -> int:
    """Characters of the JSON form divided by four: the server's token estimate."""
    return max(1, len(json.dumps(value, ensure_ascii=False)) // 4)


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """The estimate of a request's prompt: system, messages and tools, as JSON."""
    prompt = {key: body[key] for key in ("system", "messages", "tools") if key in body}
    return estimate_tokens(prompt)


def new_tool_id() -> str:
    """A fresh tool_use id shaped like the API's."""
    return f"toolu_fake_{next(_tool_ids):06d}"


@dataclass(frozen=True)
class Reply:
    """One scripted answer: assistant content blocks, or an HTTP error."""

    content: tuple[dict[str, Any], ...] = ()
    stop_reason: str | None = None
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: `usage.iterations` of the answer (the server's compaction and sampling steps), when it has any.
    iterations: tuple[dict[str, Any], ...] = ()
    #: `context_management` of the answer (the edits the server applied), when it applied any.
    context_management: dict[str, Any] | None = None
    #: Top-level usage instead of the estimates (an on-demand compaction samples nothing: zeros).
    usage: dict[str, int] | None = None

    @property
    def is_error(self) -> bool:
        """True for a scripted HTTP error."""
        return self.status >= 400

    @property
    def final_stop_reason(self) -> str:
        """The stop reason sent: the scripted one, else tool_use or end_turn by content."""
        if self.stop_reason:
            return self.stop_reason
        has_tool_use = any(block.get("type") == "tool_use" for block in self.content)
        return "tool_use" if has_tool_use else "end_turn"

    def with_server_work(
        self,
        *,
        before: Sequence[dict[str, Any]] = (),
        iterations: Sequence[dict[str, Any]] = (),
        context_management: dict[str, Any] | None = None,
        stop_reason: str | None = None,
    ) -> Reply:
        """This reply with blocks the server put first (a compaction), its iterations and its edits report."""
        return Reply(
            content=(*before, *self.content),
            stop_reason=stop_reason or self.stop_reason,
            iterations=tuple(iterations),
            context_management=context_management,
        )

    @classmethod
    def text(cls, text: str, *, stop_reason: str | None = None) -> Reply:
        """A plain text answer."""
        return cls(content=({"type": "text", "text": text},), stop_reason=stop_reason)

    @classmethod
    def tool_use(cls, name: str, input: dict[str, Any], id: str | None = None, *, text: str | None = None) -> Reply:
        """One tool call, optionally preceded by a text block; the id is generated when omitted."""
        return cls.tool_uses([(name, input, id)], text=text)

    @classmethod
    def tool_uses(
        cls,
        calls: Sequence[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str | None]],
        *,
        text: str | None = None,
    ) -> Reply:
        """Several parallel tool calls `(name, input[, id])`, optionally after a text block."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for call in calls:
            name, tool_input = call[0], call[1]
            tool_id = call[2] if len(call) > 2 and call[2] else new_tool_id()
            blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        return cls(content=tuple(blocks))

    @classmethod
    def blocks(cls, blocks: Sequence[dict[str, Any]], *, stop_reason: str | None = None) -> Reply:
        """Any content blocks as given (text, tool_use, thinking, redacted_thinking...)."""
        return cls(content=tuple(blocks), stop_reason=stop_reason)

    @classmethod
    def error(cls, status: int, error_type: str, message: str, headers: dict[str, str] | None = None) -> Reply:
        """An API error response with the API's JSON error shape."""
        return cls(status=status, error_type=error_type, error_message=message, headers=headers or {})

    @classmethod
    def overloaded(cls) -> Reply:
        """The API's 529 overloaded_error (the SDK retries it)."""
        return cls.error(529, "overloaded_error", "Overloaded")

    @classmethod
    def prompt_too_long(cls, actual: int, maximum: int) -> Reply:
        """The API's 400 for a prompt over the model's window."""
        return cls.error(400, "invalid_request_error", f"prompt is too long: {actual} tokens > {maximum} maximum")


Responder = Callable[["RecordedRequest"], "Reply | str | None"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, as parsed."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    index: int

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's `messages`."""
        return list(self.body.get("messages", []))

    @property
    def system(self) -> Any:
        """The request's `system` parameter (None when absent)."""
        return self.body.get("system")

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        """The request's `tools` (None when absent)."""
        return self.body.get("tools")

    @property
    def stream(self) -> bool:
        """True when the SDK asked for server-sent events."""
        return bool(self.body.get("stream"))

    @property
    def estimated_tokens(self) -> int:
        """The server's prompt-token estimate for this request."""
        return estimate_prompt_tokens(self.body)


class FakeAPI:
    """The scripted server: start with `start_fake_api`, stop with `close`."""

    def __init__(
        self,
        *,
        max_prompt_tokens: int | None = None,
        responder: Responder | None = None,
        default: Reply | str | None = None,
        validate: bool = True,
        retry_after_ms: int | None = 1,
        stream_chunk_chars: int = 16,
        summarize: Callable[[list[dict[str, Any]], str | None], str] | None = None,
    ) -> None:
        self.max_prompt_tokens = max_prompt_tokens
        #: Writes the summary of a compaction from (the messages compacted, the instructions).
        self.summarize = summarize or default_summary
        #: How many of the next compactions fail (a block with null content).
        self.failing_compactions = 0
        #: While set, on-demand compaction requests wait for it to be set before answering (background tests).
        self.compaction_gate: threading.Event | None = None
        #: Set when an on-demand compaction request has arrived (what a test waits on, never a sleep).
        self.compaction_arrived = threading.Event()
        #: Block types this server has returned (it accepts them back even when the checker does not know them).
        self.returned_types: set[str] = set()
        self.responder = responder
        self.default = default
        self.validate = validate
        self.retry_after_ms = retry_after_ms
        self.stream_chunk_chars = stream_chunk_chars
        self._lock = threading.Lock()
        self._queue: list[Reply] = []
        self._requests: list[RecordedRequest] = []
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-anthropic-api",
            daemon=True,
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        """The URL to pass as the SDK's `base_url`."""
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """Only the `POST /v1/messages` requests."""
        return [r for r in self.requests if r.path == "/v1/messages"]

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._queue)

    def script(self, *replies: Reply | str) -> FakeAPI:
        """Queue replies, answered in order (a string is a text reply)."""
        with self._lock:
            self._queue.extend(_as_reply(r) for r in replies)
        return self

    def overload(self, times: int = 1, status: int = 529) -> FakeAPI:
        """Queue `times` overloaded errors (before anything scripted later)."""
        reply = Reply.error(status, "overloaded_error", "Overloaded")
        return self.script(*([reply] * times))

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAPI:
        """Use as `with start_fake_api() as api:`."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the server when the block ends."""
        self.close()

    def record(self, method: str, path: str, headers: dict[str, str], body: dict[str, Any]) -> RecordedRequest:
        """Store a received request and return it."""
        with self._lock:
            request = RecordedRequest(method, path, headers, body, len(self._requests))
            self._requests.append(request)
            return request

    def _next_reply(self, request: RecordedRequest) -> Reply:
        """The queued reply, else the responder's, else the default, else a 400."""
        with self._lock:
            queued = self._queue.pop(0) if self._queue else None
        if queued is not None:
            return queued
        if self.responder is not None:
            answer = self.responder(request)
            if answer is not None:
                return _as_reply(answer)
        if self.default is not None:
            return _as_reply(self.default)
        return Reply.error(400, "invalid_request_error", f"fake api: no scripted reply for request #{request.index}")

    def answer_messages(self, request: RecordedRequest) -> Reply:
        """What `POST /v1/messages` answers: validation and window errors first, then the script.

        The server's own work comes around the script: an on-demand compaction (`compaction`
        parameter) answers with the compaction block alone; a `compact_20260112` edit whose trigger
        the prompt reaches puts a compaction block before the scripted reply (or alone, paused);
        `clear_tool_uses_20250919` / `clear_thinking_20251015` edits report what they cleared.
        The window counts only what follows the last compaction block, as the API reads it.
        """
        if self.validate:
            # A block type this server returned itself is one it takes back (a future type, round-tripped).
            own = [f"unknown block type {t!r}" for t in self.returned_types]
            problems = [p for p in check_messages(request.messages) if not any(p.endswith(o) for o in own)]
            if problems:
                return Reply.error(400, "invalid_request_error", "; ".join(problems))
        tokens = request.estimated_tokens
        if self.max_prompt_tokens is not None and tokens > self.max_prompt_tokens:
            return Reply.prompt_too_long(tokens, self.max_prompt_tokens)
        reply = self._server_answer(request, tokens)
        with self._lock:
            self.returned_types.update(str(b.get("type")) for b in reply.content)
        return reply

    def _server_answer(self, request: RecordedRequest, tokens: int) -> Reply:
        """The answer once the request is valid: the server's compaction and edits around the script."""
        config = request.body.get("compaction")
        if isinstance(config, dict):
            return self._compact_on_demand(request, config)
        edits = (request.body.get("context_management") or {}).get("edits") or []
        report = _applied_edits(request, edits)
        compact = next((e for e in edits if e.get("type") == "compact_20260112"), None)
        threshold = _trigger_tokens(compact) if compact is not None else None
        if compact is not None and threshold is not None and tokens >= threshold:
            block, iteration = self._compaction(request, compact.get("instructions"))
            if compact.get("pause_after_compaction"):
                return Reply(
                    content=(block,), stop_reason="compaction", iterations=(iteration,), context_management=report
                )
            reply = self._next_reply(request)
            if reply.is_error:
                return reply
            sampled = _iteration("message", estimate_tokens(block) + 8, estimate_tokens(list(reply.content)))
            return reply.with_server_work(before=(block,), iterations=(iteration, sampled), context_management=report)
        reply = self._next_reply(request)
        if report is not None and not reply.is_error:
            return reply.with_server_work(context_management=report)
        return reply

    def _compact_on_demand(self, request: RecordedRequest, config: dict[str, Any]) -> Reply:
        """The on-demand answer: the compaction block alone, stop_reason "compaction", its iteration billed."""
        self.compaction_arrived.set()
        gate = self.compaction_gate
        if gate is not None and not gate.wait(timeout=60):
            return Reply.error(504, "timeout_error", "fake api: the held compaction was never released")
        instructions = config.get("instructions")
        block, iteration = self._compaction(request, instructions if isinstance(instructions, str) else None)
        return Reply(
            content=(block,),
            stop_reason="compaction",
            iterations=(iteration,),
            usage={"input_tokens": 0, "output_tokens": 0},
        )

    def _compaction(self, request: RecordedRequest, instructions: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """A signed compaction block of what the request sent (null content when set to fail), and its iteration."""
        with self._lock:
            failing = self.failing_compactions > 0
            self.failing_compactions -= 1 if failing else 0
        messages = effective_messages(request.messages)
        summary = None if failing else self.summarize(messages, instructions)
        n = next(_message_ids)
        block: dict[str, Any] = {
            "type": "compaction",
            "content": summary,
            "encrypted_content": f"ZmFrZS1lbmM{n:06d}",
            "signature": f"ZmFrZS1zaWc{n:06d}",
        }
        return block, _iteration("compaction", request.estimated_tokens, estimate_tokens(summary or ""))

    def error_headers(self, reply: Reply) -> dict[str, str]:
        """Headers for an error: the scripted ones plus a short retry-after-ms."""
        headers = {"retry-after-ms": str(self.retry_after_ms)} if self.retry_after_ms is not None else {}
        headers.update(reply.headers)
        return headers


def _as_reply(value: Reply | str) -> Reply:
    """A string becomes a text reply; a Reply stays as is."""
    return Reply.text(value) if isinstance(value, str) else value


def message_json(reply: Reply, request: RecordedRequest) -> dict[str, Any]:
    """The full Message object of a non-streamed answer."""
    usage: dict[str, Any] = (
        dict(reply.usage)
        if reply.usage is not None
        else {
            "input_tokens": request.estimated_tokens,
            "output_tokens": estimate_tokens(list(reply.content)),
        }
    )
    if reply.iterations:
        usage["iterations"] = [dict(i) for i in reply.iterations]
    message: dict[str, Any] = {
        "id": f"msg_fake_{next(_message_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": request.body.get("model", "fake-model"),
        "content": [dict(b) for b in reply.content],
        "stop_reason": reply.final_stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    if reply.context_management is not None:
        message["context_management"] = reply.context_management
    return message


def default_summary(messages: list[dict[str, Any]], instructions: str | None) -> str:
    """A deterministic summary: how many messages, then the words of every text they hold (the tests
    search for a summarized word in it)."""
    words: list[str] = []
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if block.get("type") == "text":
                words.append(block.get("text", ""))
            elif block.get("type") == "compaction" and isinstance(block.get("content"), str):
                words.append(block["content"])
    lead = f"Summary of {len(messages)} messages" + (f" ({instructions})" if instructions else "")
    return f"{lead}: {' | '.join(words)[:2000]}"


def effective_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the API reads of a request: from the last message holding a compaction block with a summary on."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index].get("content")
        if isinstance(content, list) and any(
            b.get("type") == "compaction" and isinstance(b.get("content"), str) for b in content
        ):
            return messages[index:]
    return messages


def _iteration(kind: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """One `usage.iterations` entry."""
    return {
        "type": kind,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def _trigger_tokens(edit: dict[str, Any]) -> int | None:
    """The input-token trigger of a compact edit (the API's default 150,000 when absent)."""
    trigger = edit.get("trigger")
    if isinstance(trigger, dict) and isinstance(trigger.get("value"), int):
        return int(trigger["value"])
    return 150_000


def _applied_edits(request: RecordedRequest, edits: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The `context_management` report of the clearing edits: every tool result but the last `keep` (3), and the
    thinking of every assistant turn but the last, cleared and counted."""
    applied = []
    messages = effective_messages(request.messages)
    for edit in edits:
        if edit.get("type") == "clear_tool_uses_20250919":
            keep = (edit.get("keep") or {}).get("value", 3)
            results = [
                b
                for m in messages
                if isinstance(m.get("content"), list)
                for b in m["content"]
                if b.get("type") == "tool_result"
            ]
            cleared = results[: max(0, len(results) - keep)]
            if cleared:
                applied.append(
                    {
                        "type": "clear_tool_uses_20250919",
                        "cleared_tool_uses": len(cleared),
                        "cleared_input_tokens": sum(estimate_tokens(b) for b in cleared),
                    }
                )
        elif edit.get("type") == "clear_thinking_20251015":
            turns = [
                m
                for m in messages[:-1]
                if m.get("role") == "assistant"
                and isinstance(m.get("content"), list)
                and any(b.get("type") == "thinking" for b in m["content"])
            ]
            if turns:
                applied.append(
                    {
                        "type": "clear_thinking_20251015",
                        "cleared_thinking_turns": len(turns),
                        "cleared_input_tokens": sum(estimate_tokens(m["content"]) for m in turns),
                    }
                )
    return {"applied_edits": applied} if applied else None


def _chunks(text: str, size: int) -> list[str]:
    """`text` cut in pieces of `size` characters (at least one piece)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _block_start(block: dict[str, Any]) -> dict[str, Any]:
    """The content_block_start payload: the block with its streamed part emptied."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": ""}
    if kind in ("tool_use", "server_tool_use"):
        return {"type": kind, "id": block["id"], "name": block["name"], "input": {}}
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if kind == "compaction":
        return dict(block, content=None, encrypted_content=None)
    return dict(block)


def _block_deltas(block: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """The content_block_delta payloads that rebuild `block` on the SDK side."""
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text_delta", "text": c} for c in _chunks(block["text"], size)]
    if kind in ("tool_use", "server_tool_use"):
        raw = json.dumps(block.get("input", {}))
        return [{"type": "input_json_delta", "partial_json": c} for c in _chunks(raw, size)]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"], size)]
        return deltas + [{"type": "signature_delta", "signature": block.get("signature", "sig")}]
    if kind == "compaction":
        return [
            {
                "type": "compaction_delta",
                "content": block.get("content"),
                "encrypted_content": block.get("encrypted_content"),
            }
        ]
    return []


def stream_events(reply: Reply, request: RecordedRequest, chunk_chars: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed answer, in the API's order."""
    message = message_json(reply, request)
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}
    start.pop("context_management", None)
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(reply.content):
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": _block_start(block)},
        )
        for delta in _block_deltas(block, chunk_chars):
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    if "iterations" in message["usage"]:
        delta["usage"]["iterations"] = message["usage"]["iterations"]
    if "context_management" in message:
        delta["context_management"] = message["context_management"]
    yield "message_delta", delta
    yield "message_stop", {"type": "message_stop"}


class _Server(ThreadingHTTPServer):
    """The HTTP server, bound to a free local port, knowing its FakeAPI."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, api: FakeAPI) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake_api = api

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hang up mid-response; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Routes requests to the owning FakeAPI; HTTP/1.1 with keep-alive."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    @property
    def api(self) -> FakeAPI:
        """The FakeAPI this server belongs to."""
        assert isinstance(self.server, _Server)
        return self.server.fake_api

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_POST(self) -> None:
        """Record the request, then answer by path."""
        raw = self._read_body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_error(Reply.error(400, "invalid_request_error", "request body is not valid JSON"))
            return
        path = urlsplit(self.path).path
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = self.api.record("POST", path, headers, body if isinstance(body, dict) else {})
        if path == "/v1/messages":
            self._answer_messages(request)
        elif path == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": request.estimated_tokens})
        else:
            self._send_error(Reply.error(404, "not_found_error", f"no route for {path}"))

    def _read_body(self) -> bytes:
        """The request body, by Content-Length or chunked transfer encoding."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        """Decode a chunked request body."""
        data = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return bytes(data)
            data += self.rfile.read(size)
            self.rfile.readline()

    def _answer_messages(self, request: RecordedRequest) -> None:
        """Send the scripted reply as JSON, as SSE, or as an error."""
        reply = self.api.answer_messages(request)
        if reply.is_error:
            self._send_error(reply)
        elif request.stream:
            self._send_stream(reply, request)
        else:
            self._send_json(200, message_json(reply, request))

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        """One JSON response with a Content-Length."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_fake_{next(_response_ids):06d}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, reply: Reply) -> None:
        """The API's error body: {"type": "error", "error": {"type", "message"}}."""
        payload = {
            "type": "error",
            "error": {"type": reply.error_type or "api_error", "message": reply.error_message or "error"},
        }
        self._send_json(reply.status, payload, self.api.error_headers(reply))

    def _send_stream(self, reply: Reply, request: RecordedRequest) -> None:
        """Server-sent events, one chunk of the chunked body per event."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", f"req_fake_{next(_response_ids):06d}")
        self.end_headers()
        for event, data in stream_events(reply, request, self.api.stream_chunk_chars):
            self._write_chunk(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self._write_chunk(b"")

    def _write_chunk(self, data: bytes) -> None:
        """One chunk of a chunked body (empty data ends the body)."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def start_fake_api(
    *,
    max_prompt_tokens: int | None = None,
    responder: Responder | None = None,
    default: Reply | str | None = None,
    validate: bool = True,
    retry_after_ms: int | None = 1,
) -> FakeAPI:
    """Start a server on 127.0.0.1 (a free port) in a background thread."""
    return FakeAPI(
        max_prompt_tokens=max_prompt_tokens,
        responder=responder,
        default=default,
        validate=validate,
        retry_after_ms=retry_after_ms,
    )


@pytest.fixture
def fake_api() -> Iterator[FakeAPI]:
    """A running FakeAPI for one test, closed afterwards."""
    api = start_fake_api()
    try:
        yield api
    finally:
        api.close()
