"""Compaction through the Messages API: the server writes the summary, the store keeps the boundary.

`ServerCompactor` sits beside the extractive and Anthropic summarizers:
`Pipeline(store, compactor=ServerCompactor(client, model))`. Three modes:

* `on-demand` (default): at the auto-compact threshold, `prepare()` sends the
  view with `compaction={"type": "summarize", "instructions": ...}` and commits
  the signed block as a boundary (`sessionstore.storage.write.apicompaction`). When
  the API refuses, times out or returns no summary, our own compaction runs
  instead, recorded as a `compaction_fallback` system message and in the report
  (`details["server_fallback"]`).
* `background`: from `background_at` (a share of the threshold, below it) the
  request goes out on a thread while the conversation goes on; a later
  `prepare()` whose request has come back swaps it in under the view-version
  guard, exactly like a partial compaction `--up-to` the last message sent:
  every message appended since follows the block. A rewrite in between makes
  the swap refuse (nothing written, nothing lost) and the next call sends again.
* `threshold`: `prepare()` adds the `compact_20260112` edit to the request's
  `context_management` and our auto-compact stands aside; the reply's block is
  turned into a boundary when the reply is appended.

Pinned messages (standing rules) go into the instructions, in their own block,
so the server's summary carries them: the view after an API compaction is the
block alone, as the API wants it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

from sessionstore.storage.write.apicompaction import ServerCompactionFailed, commit_api_compaction
from sessionstore.storage.records.state import ViewSnapshot
from sessionstore.storage.write.session import Session
from sessionstore.storage.core.types import StoredMessage
from sessionstore.storage.records.view import to_api_messages

from .pinning import pins_block

#: The beta headers of on-demand and threshold compaction.
ON_DEMAND_BETA = "compact-2026-09-04"
THRESHOLD_BETA = "compact-2026-01-12"
Mode = Literal["on-demand", "background", "threshold"]
MODES: tuple[Mode, ...] = ("on-demand", "background", "threshold")


@dataclass(slots=True)
class _Job:
    """A background compaction request in flight: what was sent, and the reply or error when it is back."""

    sent: ViewSnapshot
    instructions: str | None
    thread: threading.Thread | None = None
    reply: Any = None
    error: BaseException | None = None

    @property
    def running(self) -> bool:
        """True while the request has not come back."""
        return self.thread is not None and self.thread.is_alive()


class ServerCompactor:
    """Asks the Messages API to compact a session's view and records the result as a boundary."""

    name = "api"

    def __init__(
        self,
        client: Any,
        model: str,
        *,
        mode: Mode = "on-demand",
        instructions: str | None = None,
        max_tokens: int = 4096,
        timeout: float | None = 120.0,
        background_at: float = 0.8,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.client = client
        self.model = model
        self.mode: Mode = mode
        self.instructions = instructions
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.background_at = background_at
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ requests

    def instructions_for(self, session: Session) -> str | None:
        """The caller's instructions plus the pinned messages, which the summary must carry verbatim."""
        pinned = pins_block(session.pins())
        parts = [
            p for p in (self.instructions, pinned and f"Carry these standing instructions verbatim:\n{pinned}") if p
        ]
        return "\n\n".join(parts) or None

    def request(self, messages: list[dict[str, Any]], instructions: str | None) -> Any:
        """One on-demand compaction request through the SDK; returns its reply (raises the SDK's errors)."""
        config: dict[str, Any] = {"type": "summarize"}
        if instructions:
            config["instructions"] = instructions
        return self.client.beta.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            messages=messages,
            compaction=config,
            betas=[ON_DEMAND_BETA],
            timeout=self.timeout,
        )

    def compact(self, session: Session, *, trigger: str = "auto") -> StoredMessage:
        """Compact the view now: request, then commit the boundary; raises ServerCompactionFailed or the SDK's error."""
        sent = session.snapshot()
        instructions = self.instructions_for(session)
        reply = self.request(to_api_messages(sent.entries), instructions)
        return commit_api_compaction(session, reply, sent=sent, trigger=trigger, instructions=instructions)

    # ------------------------------------------------------------ background

    def start(self, session: Session) -> bool:
        """Send the view's compaction request on a thread (False when one is already in flight for the session)."""
        with self._lock:
            if session.id in self._jobs:
                return False
            sent = session.snapshot()
            job = _Job(sent, self.instructions_for(session))
            job.thread = threading.Thread(
                target=self._run,
                args=(job, to_api_messages(sent.entries)),
                daemon=True,
                name=f"api-compaction-{session.id[:8]}",
            )
            self._jobs[session.id] = job
            job.thread.start()
        return True

    def _run(self, job: _Job, messages: list[dict[str, Any]]) -> None:
        """The thread's body: the request, its reply or its error kept on the job."""
        try:
            job.reply = self.request(messages, job.instructions)
        except BaseException as exc:  # kept for the swap to report, never lost in the thread
            job.error = exc

    def in_flight(self, session: Session) -> bool:
        """True while a background request for the session has not come back."""
        job = self._jobs.get(session.id)
        return job is not None and job.running

    def sent(self, session: Session) -> ViewSnapshot | None:
        """The view the session's background request sent (None when none is pending)."""
        job = self._jobs.get(session.id)
        return job.sent if job is not None else None

    def finish(self, session: Session, *, wait: bool = False, timeout: float | None = None) -> StoredMessage | None:
        """Swap a returned background compaction in (None while it is still in flight, or when none was sent).

        Raises the request's error, ServerCompactionFailed, or RewriteConflict when the view was rewritten
        since the request went out; the job is dropped in every case but "still in flight".
        """
        job = self._jobs.get(session.id)
        if job is None:
            return None
        if wait and job.thread is not None:
            job.thread.join(timeout)
        if job.running:
            return None
        with self._lock:
            self._jobs.pop(session.id, None)
        if job.error is not None:
            raise job.error
        return commit_api_compaction(
            session,
            job.reply,
            sent=job.sent,
            background=True,
            trigger="auto",
            instructions=job.instructions,
        )

    # ------------------------------------------------------------ threshold

    def threshold_edit(self, threshold: int) -> dict[str, Any]:
        """The `compact_20260112` edit `prepare()` adds in threshold mode."""
        edit: dict[str, Any] = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": threshold}}
        if self.instructions:
            edit["instructions"] = self.instructions
        return edit


__all__ = ["ON_DEMAND_BETA", "THRESHOLD_BETA", "ServerCompactor", "ServerCompactionFailed"]
