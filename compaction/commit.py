"""Turning a finished summary into one view rewrite: boundary, summary, kept run, attachments.

Every compaction kind ends here, so the shape of the new view, the boundary's
metadata and the `compactions` row are decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from sessionstore.storage.read.history import boundary_count
from sessionstore.storage.write.rewrite import Add, CompactionRecord, Keep, RewriteResult, commit_rewrite
from sessionstore.storage.records.state import ViewSnapshot
from sessionstore.storage.write.session import Session
from sessionstore.storage.codecs.tokens import estimate_content
from sessionstore.storage.core.types import ViewEntry
from sessionstore.storage.records.validate import NewMessage

from sessionstore.storage.engine.config import Config
from sessionstore.storage.read.recall import era_of
from sessionstore.storage.codecs.tokens import estimate_text

from .errors import CompactionWouldNotShrink
from .facts import METADATA_KEY as FACTS_KEY
from .messages import boundary_message, summary_message
from .pinning import PinPlan, pins_block
from .prompt import summary_message_text
from .summarize import GatedSummary, SummaryBudget

Layout = Literal["suffix", "prefix"]


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """What a committed compaction did."""

    kind: str
    trigger: str
    boundary_uuid: str
    summary_uuid: str
    pre_tokens: int
    post_tokens: int
    messages_summarized: int
    kept: int
    attachments: int
    truncated: bool
    view_version: int
    summarizer: str
    first_kept_uuid: str | None = None
    last_kept_uuid: str | None = None
    pivot_uuid: str | None = None
    pivot_note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__slots__}


def commit_compaction(
    session: Session,
    snapshot: ViewSnapshot,
    *,
    summarized: Sequence[ViewEntry],
    kept: Sequence[ViewEntry],
    summary_text: str,
    truncated: bool,
    kind: str,
    trigger: str,
    layout: Layout,
    summarizer: str,
    custom_instructions: str | None = None,
    attachments: Sequence[NewMessage] = (),
    gated: GatedSummary | None = None,
    recall_note: bool = False,
    pins: PinPlan | None = None,
) -> CompactionOutcome:
    """Write the compaction as one rewrite; refuses one that would not shrink the view.

    A summary plus what is kept can outweigh a small view; then nothing is
    written and `CompactionWouldNotShrink` says so (a manual caller reports it,
    the pipeline skips).

    layout "suffix": [boundary, summary, kept..., attachments] (kept = newest messages);
    layout "prefix": [boundary, kept..., summary, attachments] (kept = oldest; cache survives).
    `gated` carries the facts gate's findings: the facts go into the summary's metadata (so a later
    gate carries them forward), the report into the compaction record. With `recall_note` the
    summary ends with a line naming the recall tool and this boundary's number.
    """
    boundary_uuid = _new_uuid()
    if recall_note:
        summary_text = f"{summary_text.rstrip()}\n\n{recall_line(boundary_count(session) + 1)}"
    gate = gated.report.to_dict() if gated is not None and gated.report is not None else None
    summary = summary_message(summary_text, truncated=truncated, summarizer=summarizer, parent_uuid=boundary_uuid)
    summary.metadata["summary_tokens"] = estimate_text(str(summary.content))
    if pins is not None and pins.carried:
        summary.content = f"{summary.content}\n\n{pins_block(pins.carried)}"
        summary.metadata["pinned"] = [p.uuid for p in pins.carried]
    if gated is not None and gated.facts is not None:
        summary.metadata[FACTS_KEY] = gated.facts.to_dict()
    segment = _preserved_segment(kept, layout, boundary_uuid, summary.uuid)
    kept_tokens = sum(e.tokens for e in kept)
    added_tokens = estimate_content(summary.content) + sum(estimate_content(a.content) for a in attachments)
    boundary = boundary_message(
        trigger=trigger,
        kind=kind,
        pre_tokens=snapshot.view_tokens,
        post_tokens=kept_tokens + added_tokens,
        messages_summarized=len(summarized),
        preserved_segment=segment,
        custom_instructions=custom_instructions,
        summarizer=summarizer,
        extra={"truncated": truncated, **({"facts_gate": gate} if gate else {})},
    )
    boundary.uuid = boundary_uuid
    projected = kept_tokens + added_tokens + estimate_content(boundary.content)
    if projected >= snapshot.view_tokens:
        raise CompactionWouldNotShrink(snapshot.view_tokens, projected)
    keep = [Keep(e.seq) for e in kept]
    tail = [Add(a) for a in attachments]
    plan: list[Keep | Add]
    if layout == "suffix":
        plan = [Add(boundary), Add(summary), *keep, *tail]
    else:
        plan = [Add(boundary), *keep, Add(summary), *tail]
    record = CompactionRecord(
        kind=kind,
        trigger=trigger,
        boundary_uuid=boundary_uuid,
        summary_uuid=summary.uuid,
        summarized_seqs=[e.seq for e in summarized],
        head_uuid=segment["head_uuid"] if segment else None,
        anchor_uuid=segment["anchor_uuid"] if segment else None,
        tail_uuid=segment["tail_uuid"] if segment else None,
        custom_instructions=custom_instructions,
        summarizer=summarizer,
        metadata={"truncated": truncated, **({"facts_gate": gate} if gate else {})},
        pins=list(pins.new) if pins is not None else [],
        pins_budget=pins.budget if pins is not None else 0,
    )
    result: RewriteResult = commit_rewrite(
        session,
        base_version=snapshot.view_version,
        snapshot_last_seq=snapshot.last_seq,
        plan=plan,
        compaction=record,
    )
    return CompactionOutcome(
        kind=kind,
        trigger=trigger,
        boundary_uuid=boundary_uuid,
        summary_uuid=summary.uuid,
        pre_tokens=result.pre_tokens,
        post_tokens=result.post_tokens,
        messages_summarized=len(summarized),
        kept=len(kept),
        attachments=len(attachments),
        truncated=truncated,
        view_version=result.view_version,
        summarizer=summarizer,
        first_kept_uuid=kept[0].uuid if kept else None,
        last_kept_uuid=kept[-1].uuid if kept else None,
    )


def summary_budget(session: Session, config: Config, pins: PinPlan | None = None) -> SummaryBudget:
    """The budget the gated text gets: `summary_max_tokens` less the summary message's lead and recall line.

    So the whole summary message, pinned messages aside, stays within `summary_max_tokens`.
    """
    reserve = estimate_text(summary_message_text("", truncated=True)) + 8
    if config.recall_note:
        reserve += estimate_text(recall_line(10**9))
    limit = max(64, config.summary_budget(session.context_window) - reserve)
    carried = pins_block(pins.carried) if pins is not None else ""
    return SummaryBudget(limit, lambda seq: era_of(session, seq), carried)


def recall_line(index: int) -> str:
    """The line that ends a summary when the agent has the recall tool."""
    return (
        f"The exact transcript before this summary is kept: call the recall tool with boundary={index} "
        "(and a query or around_uuid) to read any detail this summary left out."
    )


def _preserved_segment(
    kept: Sequence[ViewEntry], layout: Layout, boundary_uuid: str, summary_uuid: str
) -> dict[str, str | None] | None:
    """head/tail = first/last kept; anchor = what sits right before the kept run in the new view."""
    if not kept:
        return None
    anchor = summary_uuid if layout == "suffix" else boundary_uuid
    return {"head_uuid": kept[0].uuid, "anchor_uuid": anchor, "tail_uuid": kept[-1].uuid}


def _new_uuid() -> str:
    import uuid

    return str(uuid.uuid4())
