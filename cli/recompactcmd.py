"""`history S --boundary K --recompact STRATEGY`: the same span summarized again, gated, diffed; nothing written."""

from __future__ import annotations

from typing import Optional

from .common import UsageError, echo, open_store, print_json


def show_recompaction(db: Optional[str], session: str, boundary: int, strategy: str, json_out: bool) -> None:
    """Print the new summary, its facts-gate report and a unified diff against the recorded summary."""
    from sessionstore.agent.evaluation import RECOMPACT_STRATEGIES, recompact
    from sessionstore.compaction.engine import make_summarizer

    if strategy not in RECOMPACT_STRATEGIES:
        raise UsageError(f"cannot recompact with {strategy!r}: use {', '.join(RECOMPACT_STRATEGIES)}")
    summarizer = make_summarizer(strategy) if strategy in ("extractive", "anthropic") else None
    with open_store(db, read_only=True) as store:
        result = recompact(
            store.get(session),
            boundary,
            strategy,
            summarizer=summarizer,
            budget=store.config.user_messages_budget_tokens,
        )
    if json_out:
        print_json(result.to_dict())
        return
    gate = result.gate
    added = ", ".join(f"{n} {kind}" for kind, n in gate["missing"].items() if n) or "nothing"
    echo(f"# boundary {boundary} summarized again with {strategy}; the facts gate added {added}\n")
    echo(result.summary)
    echo("\n# diff against the recorded summary\n")
    echo(result.diff or "(identical)")
