"""What runs before each model call: the layers of DESIGN.md, cheapest first.

`Pipeline.prepare(session)` runs the tool-result budget, snip, microcompact
and context collapse, then hands the token count to `autocompact`, and
returns the `messages` to send with a per-layer report.

Cost: the pipeline keeps, per session, what it has already looked at (the
view version and how many entries, plus each layer's small state). When the
view only grew since the last call, each layer looks at the new entries (and
the still-open last user message or round) only, and the token count is the
last API usage plus the estimates stored after it. So a call where no layer
acts reads the session row, copies the cached entry list and builds the API
messages: about the cost of `session.active_view()`. Any rewrite (ours or
anyone's) changes the view version, and the next call rebuilds the state
once.

Layers 1-3 commit together as one rewrite (blobs, replacement decisions and
view in one transaction); each collapse fold is a rewrite of its own. A dry
run computes the same decisions on an in-memory copy and commits nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sessionstore.storage.engine.config import Config
from sessionstore.storage.core.errors import RewriteConflict
from sessionstore.storage.write.replacements import load_replacements, load_replacements_for
from sessionstore.storage.records.state import ViewSnapshot
from sessionstore.storage.write.session import Session
from sessionstore.storage.store import SessionStore
from sessionstore.storage.core.types import StoredMessage
from sessionstore.storage.records.view import to_api_messages

from sessionstore.storage.write.memory import load_memory

from .budget import apply_budget
from .circuit import compact_failures, record_compact_failure
from .commit import CompactionOutcome
from .errors import CompactionWouldNotShrink, InvalidQuerySource
from .full import compact_full
from .server import THRESHOLD_BETA, ServerCompactor
from .session_memory import compact_with_memory, maybe_update_memory
from .summarizers.base import SummarizerError
from .summarizers.extractive import ExtractiveSummarizer
from .collapse import fold_once
from .errors import ContextFull
from .microcompact import CONTEXT_MANAGEMENT_BETA, MicroState, apply_microcompact, observe
from .persisted import load_state as load_saved_state
from .persisted import save_if_due
from .pipeline_state import PipelineState
from .pressure import Thresholds, count_tokens, last_usage_index
from .snip import apply_snip
from .working import LayerReport, WorkingView, blocks, commit_working

#: How many sessions' incremental state one pipeline keeps.
STATE_CACHE_SIZE = 128
#: Collapse folds one call may commit before it stops and reports.
MAX_COLLAPSE_COMMITS = 4
#: Fresh attempts after another writer's rewrite won the race.
CONFLICT_RETRIES = 2
#: Query sources that are a compaction's own model call (auto-compact never recurses).
COMPACTION_SOURCES = frozenset({"compact", "session_memory"})
#: Every query source `prepare` knows: the main loop, a compaction's own call, or `agent:NAME` (a subagent).
QUERY_SOURCES = ("main", *sorted(COMPACTION_SOURCES))
SUBAGENT_PREFIX = "agent:"


def check_query_source(value: str) -> str:
    """`value` when it names a known caller; raises InvalidQuerySource otherwise."""
    if value in QUERY_SOURCES:
        return value
    if isinstance(value, str) and value.startswith(SUBAGENT_PREFIX) and value[len(SUBAGENT_PREFIX) :].strip():
        return value
    raise InvalidQuerySource(
        f"unknown query source {value!r}: use {', '.join(QUERY_SOURCES)} or {SUBAGENT_PREFIX}NAME for a subagent"
    )


LAYERS = ("budget", "snip", "microcompact", "collapse", "autocompact")


@dataclass(slots=True)
class Prepared:
    """What to send and why: messages, optional server-side context management, the report."""

    messages: list[dict[str, Any]]
    context_management: dict[str, Any] | None
    report: dict[str, LayerReport]
    tokens: int
    warning: bool
    above_threshold: bool
    view_version: int
    dry_run: bool = False
    thresholds: Thresholds | None = None
    #: Beta headers the request needs beyond context management (the API's threshold compaction).
    extra_betas: list[str] = field(default_factory=list)

    @property
    def tokens_until_autocompact(self) -> int | None:
        """Tokens left before the auto-compact threshold (0 at or above it)."""
        if self.thresholds is None:
            return None
        return max(0, self.thresholds.autocompact_threshold - self.tokens)

    @property
    def context_left_percent(self) -> int | None:
        """What the warning means: the share of the context left before auto-compact, in percent."""
        if self.thresholds is None or self.thresholds.autocompact_threshold <= 0:
            return None
        left = self.thresholds.autocompact_threshold - self.tokens
        return max(0, round(100 * left / self.thresholds.autocompact_threshold))

    @property
    def betas(self) -> list[str]:
        """The `anthropic-beta` values the request needs (context management in server mode)."""
        return ([CONTEXT_MANAGEMENT_BETA] if self.context_management else []) + self.extra_betas

    @property
    def acted(self) -> bool:
        """True when any layer changed the view."""
        return any(r.acted for r in self.report.values())

    def to_dict(self, *, include_messages: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tokens": self.tokens,
            "warning": self.warning,
            "above_threshold": self.above_threshold,
            "thresholds": self.thresholds.to_dict() if self.thresholds is not None else None,
            "tokens_until_autocompact": self.tokens_until_autocompact,
            "context_left_percent": self.context_left_percent,
            "view_version": self.view_version,
            "dry_run": self.dry_run,
            "context_management": self.context_management,
            "report": {name: r.to_dict() for name, r in self.report.items()},
        }
        if include_messages:
            out["messages"] = self.messages
        return out


@dataclass(slots=True)
class _Call:
    """The inputs of one prepare call."""

    session: Session
    now: datetime
    query_source: str
    dry_run: bool
    thresholds: Thresholds


class Pipeline:
    """The layers before each model call, for every session of one store."""

    def __init__(
        self,
        store: SessionStore,
        summarizer: Any = None,
        config: Config | None = None,
        *,
        compactor: ServerCompactor | None = None,
    ):
        """`compactor`: compact through the Messages API (on-demand, background or threshold; see
        `compaction.server`), falling back to our own compaction when the API gives no summary."""
        self.store = store
        self.summarizer = summarizer
        self.config = config or store.config
        self.compactor = compactor
        self._states: OrderedDict[str, PipelineState] = OrderedDict()

    def prepare(
        self,
        session: Session,
        *,
        now: datetime | float | None = None,
        query_source: str = "main",
        dry_run: bool = False,
    ) -> Prepared:
        """Run the layers and return what to send; raises ContextFull past the collapse limit.

        `query_source` is checked first (`InvalidQuerySource`): an unknown one would
        silently change which layers run.
        """
        check_query_source(query_source)
        if not dry_run:
            session.before_local_write()
        call = _Call(
            session,
            _as_datetime(now),
            check_query_source(query_source),
            dry_run,
            Thresholds.for_window(session.context_window, self.config),
        )
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                return self._prepare_once(call)
            except RewriteConflict:
                self._states.pop(session.id, None)
                if attempt == CONFLICT_RETRIES:
                    raise
        raise AssertionError("unreachable")

    def forget(self, session_id: str) -> None:
        """Drop what the pipeline remembers about a session (the next call rebuilds it)."""
        self._states.pop(session_id, None)

    # ------------------------------------------------------------------ steps

    def _prepare_once(self, call: _Call) -> Prepared:
        """One pass over the layers on one snapshot (raises RewriteConflict if another writer won)."""
        snapshot = call.session.snapshot()
        state = self._state(call, snapshot)
        work = WorkingView(snapshot)
        report: dict[str, LayerReport] = {}
        context_management = self._cheap_layers(call, state, work, report)
        committed = False
        if work.changed and not call.dry_run:
            work = self._commit(call, state, work)
            committed = True
        elif not call.dry_run:
            state.scanned = len(work.entries)
        usage_index = last_usage_index(work.entries) if committed or work.structure_changed else state.usage_index
        work, usage_index = self._collapse(call, work, usage_index, report)
        tokens = count_tokens(work.entries, usage_index, work.tokens)
        self._check_block(call, tokens, report)
        report["autocompact"] = LayerReport(
            "autocompact",
            tokens_before=tokens,
            tokens_after=tokens,
            details={"query_source": call.query_source, "dry_run": call.dry_run},
        )
        self._update_memory(call, state, work, tokens)
        if self._background(call, tokens, report):
            self._states.pop(call.session.id, None)
            work = WorkingView(call.session.snapshot())
            tokens = count_tokens(work.entries, last_usage_index(work.entries), work.tokens)
            report["autocompact"].tokens_before = report["autocompact"].tokens_after = tokens
        outcome = self.autocompact(call.session, tokens, report)
        details = report["autocompact"].details
        if outcome is not None:
            self._states.pop(call.session.id, None)
            work = WorkingView(call.session.snapshot())
            tokens = count_tokens(work.entries, last_usage_index(work.entries), work.tokens)
            report["autocompact"].tokens_after = tokens
        if not call.dry_run and self._states.get(call.session.id) is state:
            save_if_due(call.session, state, self.config)
        messages = to_api_messages(work.entries)
        extra_betas: list[str] = []
        if self.compactor is not None and self.compactor.mode == "threshold":
            edit = self.compactor.threshold_edit(call.thresholds.autocompact_threshold)
            context_management = {"edits": [*(context_management or {}).get("edits", []), edit]}
            extra_betas.append(THRESHOLD_BETA)
        return Prepared(
            messages,
            context_management,
            report,
            tokens,
            details["warning"],
            details["above_threshold"],
            work.snapshot.view_version,
            call.dry_run,
            call.thresholds,
            extra_betas,
        )

    def _background(self, call: _Call, tokens: int, report: dict[str, LayerReport]) -> bool:
        """Background mode: swap in a compaction that came back, or send one from `background_at` of the
        threshold on; True when a swap changed the view. A swap the view moved under is refused and reported."""
        compactor = self.compactor
        if compactor is None or compactor.mode != "background" or call.dry_run or call.query_source != "main":
            return False
        details = report["autocompact"].details
        try:
            swapped = compactor.finish(call.session)
        except Exception as exc:  # a rewrite since the request, no summary, or the API's error
            details["server_background"] = f"refused: {exc}"
            return False
        if swapped is not None:
            details["server_background"] = f"swapped in at seq {swapped.seq}"
            report["autocompact"].acted = True
            return True
        threshold = call.thresholds.autocompact_threshold
        if tokens >= compactor.background_at * threshold and compactor.start(call.session):
            details["server_background"] = "request sent"
        return False

    def _update_memory(self, call: _Call, state: PipelineState, work: WorkingView, tokens: int) -> None:
        """Keep the session notes current (10,000 tokens, then every 5,000 and 3 tool calls).

        Costs nothing below the first threshold or until 5,000 more tokens arrived since the last write.
        """
        config = self.config
        if call.dry_run or call.query_source != "main" or tokens < config.memory_init_tokens:
            return
        if state.memory_tokens is not None and tokens - state.memory_tokens < config.memory_update_tokens:
            return
        written = maybe_update_memory(call.session, work.entries, tokens, config)
        memory = written or load_memory(call.session)
        state.memory_tokens = memory.tokens_at_update if memory is not None else None

    def _commit(self, call: _Call, state: PipelineState, work: WorkingView) -> WorkingView:
        """Commit layers 1-3 and continue on the new view.

        When the layers only replaced contents and appended markers, every
        position the state refers to is unchanged, so the state carries over
        to the new version; after removals it is rebuilt on the next call.
        """
        result = commit_working(call.session, work)
        if work.reordered:
            self._states.pop(call.session.id, None)
        else:
            state.view_version = result.view_version
            state.scanned = len(work.entries)
        return WorkingView(call.session.snapshot())

    def _state(self, call: _Call, snapshot: ViewSnapshot) -> PipelineState:
        """The session's remembered state when still valid for this snapshot, else the one saved in the
        store for this version (a restart resumes from it), else a fresh one."""
        state = None if call.dry_run else self._states.get(call.session.id)
        if state is None or state.view_version != snapshot.view_version or state.scanned > len(snapshot.entries):
            state = load_saved_state(call.session, snapshot.view_version, len(snapshot.entries), self.config)
            if state is None:
                state = PipelineState(snapshot.view_version)
                state.budget.decisions = load_replacements(call.session.db, call.session.id)
            else:  # the budget looks at results from its resume point on: their decisions are all it needs
                ids = [
                    str(b.get("tool_use_id"))
                    for e in snapshot.entries[state.budget.resume :]
                    if e.role == "user"
                    for b in blocks(e)
                    if b.get("type") == "tool_result"
                ]
                state.budget.decisions = load_replacements_for(call.session.db, call.session.id, ids)
            if not call.dry_run:
                self._remember(call.session.id, state)
        else:
            self._states.move_to_end(call.session.id)
        state.usage_index = last_usage_index(snapshot.entries, state.scanned, state.usage_index)
        return state

    def _remember(self, session_id: str, state: PipelineState) -> None:
        self._states[session_id] = state
        while len(self._states) > STATE_CACHE_SIZE:
            self._states.popitem(last=False)

    def _cheap_layers(
        self, call: _Call, state: PipelineState, work: WorkingView, report: dict[str, LayerReport]
    ) -> dict[str, Any] | None:
        """Budget, snip and microcompact on the working view (nothing written yet)."""
        config = self.config
        report["budget"] = apply_budget(work, state.budget, config)
        if config.snip_enabled:
            report["snip"] = apply_snip(work, state.snip, state.usage_index, call.now)
        else:
            report["snip"] = LayerReport(
                "snip", tokens_before=work.tokens, tokens_after=work.tokens, details={"skipped": "disabled"}
            )
        usage_index = state.usage_index
        if work.structure_changed:
            state.micro = MicroState()
            usage_index = last_usage_index(work.entries)
        observe(state.micro, work.entries, frozenset(config.compactable_tools))
        report["microcompact"], context_management = apply_microcompact(
            work,
            state.micro,
            config,
            now=call.now,
            query_source=call.query_source,
            usage_index=usage_index,
            thresholds=call.thresholds,
        )
        return context_management

    def _collapse(
        self, call: _Call, work: WorkingView, usage_index: int | None, report: dict[str, LayerReport]
    ) -> tuple[WorkingView, int | None]:
        """Fold the oldest rounds while the count is past the start level; one rewrite per fold."""
        config = self.config
        limits = call.thresholds
        layer = LayerReport(
            "collapse",
            tokens_before=work.tokens,
            tokens_after=work.tokens,
            details={
                "enabled": config.collapse_enabled,
                "start_at": limits.collapse_start,
                "block_at": limits.collapse_block,
            },
        )
        report["collapse"] = layer
        if not config.collapse_enabled or call.query_source in COMPACTION_SOURCES:
            return work, usage_index
        folds = []
        for _ in range(MAX_COLLAPSE_COMMITS):
            tokens = count_tokens(work.entries, usage_index, work.tokens)
            if tokens < limits.collapse_start:
                break
            info = fold_once(work, tokens, limits.collapse_start, usage_index, call.now)
            if info is None:
                break
            folds.append(info.to_dict())
            if not call.dry_run:
                commit_working(call.session, work)
                self._states.pop(call.session.id, None)
                work = WorkingView(call.session.snapshot())
            usage_index = last_usage_index(work.entries)
        layer.acted = bool(folds)
        layer.items = len(folds)
        layer.tokens_after = work.tokens
        layer.details["commits"] = folds
        return work, usage_index

    def _check_block(self, call: _Call, tokens: int, report: dict[str, LayerReport]) -> None:
        """Past the collapse blocking level nothing else can help: raise (report it in a dry run)."""
        layer = report["collapse"]
        if not layer.details["enabled"] or tokens < call.thresholds.collapse_block:
            return
        layer.details["blocked"] = True
        if not call.dry_run:
            raise ContextFull(tokens, call.thresholds.collapse_block)

    def autocompact(
        self, session: Session, tokens: int, report: dict[str, LayerReport]
    ) -> CompactionOutcome | StoredMessage | None:
        """Layer 5: above the threshold, compact (session memory first, then full).

        Effective window = context window - min(max output tokens, 20,000);
        threshold = effective - 13,000; warning at effective - 20,000. Off while
        context collapse is on, never from a compaction's own call, and, after
        3 consecutive failures (counted on the session row, so restarts keep
        them), skipped until a success or a manual compaction resets the count.
        """
        config = self.config
        limits = Thresholds.for_window(session.context_window, config)
        layer = report["autocompact"]
        above = tokens >= limits.autocompact_threshold
        enabled = config.auto_compact_enabled and not config.collapse_enabled
        layer.details.update(
            {
                **limits.to_dict(),
                "tokens": tokens,
                "warning": tokens >= limits.warning_at,
                "above_threshold": above,
                "enabled": enabled,
                "suppressed_by_collapse": config.collapse_enabled,
            }
        )
        if not (enabled and above) or layer.details.get("query_source") in COMPACTION_SOURCES:
            return None
        failures = compact_failures(session)
        layer.details["consecutive_failures"] = failures
        if failures >= config.max_consecutive_failures:
            layer.details["skipped"] = f"circuit breaker open after {failures} consecutive failures"
            return None
        if layer.details.get("dry_run"):
            layer.details["would_compact"] = True
            return None
        return self._compact(session, "auto", limits.autocompact_threshold, layer)

    def _compact(
        self, session: Session, trigger: str, threshold: int, layer: LayerReport
    ) -> CompactionOutcome | StoredMessage | None:
        """Through the API when a compactor is set; else (or when the API gives no summary) session-memory
        compaction, else full; a failure is counted, not raised."""
        if self.compactor is not None and self.compactor.mode == "threshold":
            layer.details["skipped"] = "the API compacts at its threshold (compact_20260112 edit)"
            return None
        if self.compactor is not None:
            try:
                if self.compactor.mode == "background" and self.compactor.in_flight(session):
                    stored = self.compactor.finish(session, wait=True, timeout=self.compactor.timeout)
                else:
                    stored = self.compactor.compact(session, trigger=trigger)
            except Exception as exc:  # refused, timed out, no summary, or the view moved: fall back, recorded
                layer.details["server_fallback"] = reason = f"{type(exc).__name__}: {exc}"
                session.append(fallback_notice(reason))
            else:
                if stored is not None:
                    layer.acted = True
                    layer.details["compaction"] = {"kind": "api", "summary_seq": stored.seq, "uuid": stored.uuid}
                    return stored
        try:
            outcome = compact_with_memory(session, trigger=trigger, config=self.config, threshold=threshold)
            if outcome is None:
                outcome = compact_full(
                    session, self.summarizer or ExtractiveSummarizer(), trigger=trigger, config=self.config
                )
        except CompactionWouldNotShrink as exc:
            layer.details["skipped"] = str(exc)
            return None
        except (SummarizerError, RewriteConflict) as exc:
            layer.details["failed"] = str(exc)
            layer.details["consecutive_failures"] = record_compact_failure(session)
            return None
        layer.acted = True
        layer.items = outcome.messages_summarized
        layer.details["compaction"] = outcome.to_dict()
        return outcome

    def recover_from_prompt_too_long(self, session: Session, error: BaseException) -> Prepared:
        """After the API answered prompt-too-long: compact now (trigger reactive) and prepare again.

        Meant to be used once per failed call; raises the summarizer's error if compaction fails.
        """
        self._states.pop(session.id, None)
        outcome = compact_with_memory(session, trigger="reactive", config=self.config)
        if outcome is None:
            compact_full(session, self.summarizer or ExtractiveSummarizer(), trigger="reactive", config=self.config)
        return self.prepare(session)


#: The subtype of the system notice recorded when the API's compaction failed and ours ran instead.
FALLBACK_SUBTYPE = "compaction_fallback"


def fallback_notice(reason: str) -> dict[str, Any]:
    """The system message (stored, never sent) that records why the API's compaction gave way to ours."""
    return {
        "role": "system",
        "subtype": FALLBACK_SUBTYPE,
        "content": f"The API's compaction failed ({reason[:300]}); the pipeline compacted with its own summarizer.",
        "metadata": {"reason": reason[:2000]},
    }


def _as_datetime(now: datetime | float | None) -> datetime:
    """An aware datetime from None (now), an epoch number or a datetime (naive = UTC)."""
    if now is None:
        return datetime.now(timezone.utc)
    if isinstance(now, (int, float)):
        return datetime.fromtimestamp(now, timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)
