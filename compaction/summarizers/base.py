"""The summarizer protocol: what full compaction asks of any summarizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

from sessionstore.storage.core.errors import SessionStoreError
from sessionstore.storage.core.types import ViewEntry


class SummarizerError(SessionStoreError):
    """A summarizer could not produce a summary (network, API, bad answer): a typed error callers can report."""


class SummarizerUnavailable(SummarizerError):
    """The summarizer was reached for and failed at run time (API unreachable, an error status, an empty or
    refused answer): trying again later may work, so the CLI exits 1, not 2 (a missing key stays a SummarizerError)."""


class PromptTooLong(SummarizerError):
    """The summary request itself exceeds the model's window.

    `actual` and `maximum` come from the API's message
    (`prompt is too long: N tokens > M maximum`) when it states them.
    """

    def __init__(self, message: str, actual: int | None = None, maximum: int | None = None):
        super().__init__(message)
        self.actual = actual
        self.maximum = maximum

    @property
    def gap(self) -> int | None:
        """How many tokens too many, when the error said so."""
        if self.actual is None or self.maximum is None:
            return None
        return max(self.actual - self.maximum, 0)


@dataclass(frozen=True, slots=True)
class SummaryResult:
    """A finished summary: `text` enters the view, `raw` is what the summarizer said."""

    text: str
    raw: str
    input_tokens: int | None = None
    output_tokens: int | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns the entries a compaction replaces into one summary."""

    name: str

    def summarize(
        self,
        entries: Sequence[ViewEntry],
        *,
        custom_instructions: str | None = None,
        truncated: bool = False,
    ) -> SummaryResult:
        """Summarize `entries`; `truncated` says the oldest rounds were dropped to fit.

        Raises `PromptTooLong` when the request is over the model's window and
        `SummarizerError` for any other failure.
        """
        ...
