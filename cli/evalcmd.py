"""`eval`: score compaction strategies on your own recorded sessions; nothing is written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import box
from rich.table import Table

from .common import DbOption, JsonOption, UsageError, console, err_console, open_store, print_json

if TYPE_CHECKING:
    from sessionstore.compaction.summarizers.base import Summarizer
    from sessionstore.storage.store import SessionStore


def register(app: typer.Typer) -> None:
    """Add this module's command to the app."""
    app.command("eval")(eval_cmd)


def eval_cmd(
    sessions: Annotated[Optional[list[str]], typer.Argument(help="Session ids (or unique prefixes).")] = None,
    all_sessions: Annotated[bool, typer.Option("--all", help="Every session in the store.")] = False,
    strategy: Annotated[
        Optional[list[str]],
        typer.Option(
            "--strategy",
            "-s",
            help="extractive, gated, anthropic, recorded, mask, user-only (repeat; default: all but "
            "anthropic, which calls the real API only when asked).",
        ),
    ] = None,
    model: Annotated[Optional[str], typer.Option(help="Model of the anthropic strategy.")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Score compaction strategies on recorded boundaries: tokens after/before and facts kept.

    Examples:

      sessionstore eval --all

      sessionstore eval SESSION --strategy extractive --strategy anthropic --json
    """
    from sessionstore.agent.evaluation import DEFAULT_STRATEGIES, STRATEGIES, evaluate, medians

    chosen = list(dict.fromkeys(strategy or DEFAULT_STRATEGIES))
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown:
        raise UsageError(f"unknown strategy {unknown[0]!r}: use {', '.join(STRATEGIES)}")
    if bool(sessions) == all_sessions:
        raise UsageError("give one or more sessions, or --all")
    with open_store(db) as store:
        targets = (
            [store.get(r["id"]) for r in _every_session(store)]
            if all_sessions
            else [store.get(s) for s in sessions or []]
        )
        results = evaluate(
            targets,
            chosen,
            _summarizers(chosen, model),
            budget=store.config.user_messages_budget_tokens,
            progress=None if json_out else (lambda what: err_console.print(f"eval {what}")),
        )
    summary = medians(results, chosen)
    if json_out:
        print_json({"strategies": chosen, "spans": [r.to_dict() for r in results], "median": summary})
        return
    _print_table(summary)
    for name in chosen:
        if not summary.get(name, {}).get("spans"):
            why = (
                " (only boundaries imported from Claude Code or Codex, or made by the API, have one)"
                if name == "recorded"
                else ""
            )
            err_console.print(f"note: {name} scored no span{why}")


def _every_session(store: SessionStore) -> list[dict[str, Any]]:
    """Every session row, page by page."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = store.list(limit=500, offset=offset)
        out += page
        if len(page) < 500:
            return out
        offset += 500


def _summarizers(chosen: list[str], model: Optional[str]) -> dict[str, Summarizer]:
    from sessionstore.compaction.engine import make_summarizer

    found = {}
    if "extractive" in chosen:
        found["extractive"] = make_summarizer("extractive")
    if "anthropic" in chosen:
        found["anthropic"] = make_summarizer("anthropic", model=model)
    return found


def _print_table(summary: dict[str, Any]) -> None:
    from sessionstore.compaction.facts import FACT_KINDS

    table = Table(
        title="compaction strategies, medians over all spans: ratio = tokens after/before; "
        "per fact kind, the share kept verbatim (gated: or by a recall reference)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    # Two-line headers, no vertical rules and no edges: the nine columns fit 80 columns whole.
    heads = {"user_messages": "users", "paths": "paths", "failures": "failures", "open_items": "open\nitems"}
    for col in ("strategy", "spans", "ratio", "tokens", *(heads.get(kind, kind) for kind in FACT_KINDS), "users\nlost"):
        table.add_column(col, justify="right", no_wrap=True)
    for name, row in summary.items():
        shares = ["–" if v is None else f"{v:.0%}" for v in row["retention"].values()]
        lost = row.get("lost_user_messages")
        table.add_row(
            name,
            str(row["spans"]),
            f"{row['ratio']:.3f}",
            f"{row['tokens']:,}",
            *shares,
            "–" if lost is None else str(lost),
        )
    console.print(table)
