"""The LLM summarizer: one streamed Messages-API call through the real anthropic SDK.

The request is the conversation itself (images and documents reduced to
placeholders, re-injected attachments left out, thinking blocks dropped)
followed by the compaction prompt as the last user message, with no tools.
API errors become `PromptTooLong` (the request is over the window, so the
caller drops old rounds and retries) or `SummarizerError`, whose text never
carries the API key.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Sequence

import anthropic

from sessionstore.compaction.prompt import compact_prompt, strip_analysis
from sessionstore.compaction.summarizers.base import (
    PromptTooLong,
    SummarizerError,
    SummarizerUnavailable,
    SummaryResult,
)
from sessionstore.credentials import hide_credentials
from sessionstore.storage.core.types import Content, ViewEntry
from sessionstore.storage.records.view import as_blocks, to_api_messages

DEFAULT_MODEL = "claude-sonnet-4-6"
MODEL_ENV = "SESSIONSTORE_SUMMARY_MODEL"

SYSTEM_PROMPT = "You are a helpful AI assistant tasked with summarizing conversations."
OMITTED_START = "[The earliest part of this conversation was omitted.]"

#: Blocks the summary request does without: reasoning is not needed to summarize,
#: and replaying it would need valid signatures for the summary model.
_DROPPED_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_PLACEHOLDERS = {"image": "[image]", "document": "[document]"}

_TOO_LONG = "prompt is too long"
_COUNTS = re.compile(r"(\d[\d,]*)\s*tokens?\s*>\s*(\d[\d,]*)")


class AnthropicSummarizer:
    """Summarizer backed by the Anthropic Messages API (streaming)."""

    name = "anthropic"

    def __init__(
        self,
        model: str | None = None,
        *,
        max_output_tokens: int = 20_000,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        self.model = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
        self.max_output_tokens = max_output_tokens
        self._api_key = api_key
        self._base_url = base_url
        self._max_retries = max_retries
        self._timeout = timeout
        self._client = client

    @property
    def client(self) -> anthropic.Anthropic:
        """The SDK client, built on first use (api key and base URL default to the SDK's env)."""
        if self._client is None:
            self._client = self._build_client()
        return self._client

    def _build_client(self) -> anthropic.Anthropic:
        """A new SDK client from the constructor settings."""
        options: dict[str, Any] = {"max_retries": self._max_retries}
        if self._api_key is not None:
            options["api_key"] = self._api_key
        if self._base_url is not None:
            options["base_url"] = self._base_url
        if self._timeout is not None:
            options["timeout"] = self._timeout
        try:
            client = anthropic.Anthropic(**options)
        except anthropic.AnthropicError as err:
            raise SummarizerError(self._redact(f"cannot create the Anthropic client: {err}")) from None
        if not (client.api_key or client.auth_token or getattr(client, "credentials", None)):
            raise SummarizerError("no Anthropic credentials: set ANTHROPIC_API_KEY or pass api_key")
        return client

    def build_request(
        self,
        entries: Sequence[ViewEntry],
        *,
        custom_instructions: str | None = None,
        truncated: bool = False,
    ) -> dict[str, Any]:
        """The keyword arguments of the summary call (exposed so tests and tools can inspect it).

        Raises SummarizerError when no entry would be sent (nothing to summarize).
        """
        messages = request_messages(entries, compact_prompt(custom_instructions, truncated=truncated))
        return {
            "model": self.model,
            "max_tokens": self.max_output_tokens,
            "system": SYSTEM_PROMPT,
            "messages": messages,
        }

    def summarize(
        self,
        entries: Sequence[ViewEntry],
        *,
        custom_instructions: str | None = None,
        truncated: bool = False,
    ) -> SummaryResult:
        """Stream a summary of `entries`; raise PromptTooLong or SummarizerError on failure."""
        request = self.build_request(entries, custom_instructions=custom_instructions, truncated=truncated)
        try:
            with self.client.messages.stream(**request) as stream:
                final = stream.get_final_message()
        except anthropic.APIStatusError as err:
            raise self._status_error(err) from None
        except anthropic.APIConnectionError as err:
            raise SummarizerUnavailable(self._redact(f"summary request failed: {err.message}")) from None
        except anthropic.AnthropicError as err:
            raise SummarizerUnavailable(self._redact(f"summary request failed: {err}")) from None
        return self._result(final)

    def _result(self, final: Any) -> SummaryResult:
        """The SummaryResult of a finished message; an empty or refused answer is an error."""
        raw = "".join(block.text for block in final.content if block.type == "text")
        if final.stop_reason == "refusal":
            raise SummarizerUnavailable("the model refused to write the summary")
        text = strip_analysis(raw)
        if not text:
            reason = f" (stop reason: {final.stop_reason})" if final.stop_reason else ""
            raise SummarizerUnavailable(f"the model returned an empty summary{reason}")
        usage = final.usage
        return SummaryResult(text=text, raw=raw, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)

    def _status_error(self, err: anthropic.APIStatusError) -> SummarizerError:
        """PromptTooLong for the API's too-long 400, else a SummarizerError naming status and type."""
        detail = self._redact(err.api_message or str(err))
        if isinstance(err, anthropic.BadRequestError) and _TOO_LONG in detail.lower():
            actual, maximum = parse_token_counts(detail)
            return PromptTooLong(f"summary request too long: {detail}", actual, maximum)
        kind = f" {err.type}" if err.type else ""
        request_id = f" (request id {err.request_id})" if err.request_id else ""
        return SummarizerUnavailable(f"summary request failed: HTTP {err.status_code}{kind}: {detail}{request_id}")

    def _redact(self, text: str) -> str:
        """`text` with every credential this summarizer knows (and anything key-shaped) removed."""
        secrets = [self._api_key]
        if self._client is not None:
            secrets += [self._client.api_key, self._client.auth_token]
        return hide_credentials(text, secrets)


def parse_token_counts(message: str) -> tuple[int | None, int | None]:
    """(actual, maximum) from `... N tokens > M maximum`, (None, None) when not stated."""
    match = _COUNTS.search(message)
    if not match:
        return None, None
    return int(match.group(1).replace(",", "")), int(match.group(2).replace(",", ""))


def _strip_block(block: dict[str, Any]) -> dict[str, Any] | None:
    """One block as the summary request sends it: placeholders for media, None to drop."""
    kind = block.get("type")
    if kind in _DROPPED_BLOCKS:
        return None
    if kind in _PLACEHOLDERS:
        return {"type": "text", "text": _PLACEHOLDERS[kind]}
    if kind == "tool_result" and isinstance(block.get("content"), list):
        inner = [_strip_block(b) for b in block["content"]]
        return dict(block, content=[b for b in inner if b is not None])
    return block


def _strip_content(content: Content) -> Content:
    """Content with media replaced and reasoning blocks dropped (strings unchanged)."""
    if isinstance(content, str):
        return content
    stripped = [_strip_block(b) for b in content]
    return [b for b in stripped if b is not None]


def _is_reinjected(entry: ViewEntry) -> bool:
    """True for an attachment that compaction re-attaches anyway (no need to summarize it)."""
    return entry.type == "attachment" and bool(entry.message.metadata.get("reinjected"))


def summary_entries(entries: Sequence[ViewEntry]) -> list[ViewEntry]:
    """The sent entries as the summary request sees them; entries left empty are dropped."""
    out = []
    for entry in entries:
        if not entry.message.is_sent or _is_reinjected(entry):
            continue
        content = _strip_content(entry.content)
        if as_blocks(content):
            out.append(dataclasses.replace(entry, content=content))
    return out


def _without_pending_tool_use(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool_use blocks of a final assistant message (no result follows them)."""
    if not messages or messages[-1]["role"] != "assistant":
        return messages
    kept = [b for b in as_blocks(messages[-1]["content"]) if b.get("type") != "tool_use"]
    if not kept:
        return messages[:-1]
    return messages[:-1] + [{"role": "assistant", "content": kept}]


def _with_prompt(messages: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """Append the compaction prompt as the last user message (merged into a trailing one)."""
    prompt_block = {"type": "text", "text": prompt}
    if messages and messages[-1]["role"] == "user":
        merged = as_blocks(messages[-1]["content"]) + [prompt_block]
        return messages[:-1] + [{"role": "user", "content": merged}]
    return messages + [{"role": "user", "content": [prompt_block]}]


def _with_user_start(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Put a short user note first when the conversation (cut to fit) opens with the assistant."""
    if messages and messages[0]["role"] == "assistant":
        return [{"role": "user", "content": OMITTED_START}] + messages
    return messages


def request_messages(entries: Sequence[ViewEntry], prompt: str) -> list[dict[str, Any]]:
    """The `messages` of the summary request: the conversation, then `prompt`."""
    messages = to_api_messages(summary_entries(entries))
    if not messages:
        raise SummarizerError("nothing to summarize: no user or assistant messages to send")
    messages = _with_user_start(_without_pending_tool_use(messages))
    return _with_prompt(messages, prompt)
