"""A real agent loop on sessionstore: run a task, or resume a session after a crash.

    python examples/agent_loop.py --new --workdir ./project "Why does the build fail?"
    python examples/agent_loop.py --session 3f2a91c0            # resume where it stopped

The model, base URL and key come from ANTHROPIC_MODEL, ANTHROPIC_BASE_URL and
ANTHROPIC_API_KEY; the database from --db or SESSIONSTORE_DB_URL.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import anthropic

from sessionstore.compaction.engine import make_summarizer
from sessionstore.compaction.pipeline import Pipeline
from sessionstore.compaction.server import ServerCompactor
from sessionstore import SessionStore
from sessionstore.agent import DEFAULT_MODEL, Agent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--session", help="resume this session (id or unique prefix)")
    who.add_argument("--new", action="store_true", help="start a new session")
    parser.add_argument("--db", default=None, help="database URL (default: SESSIONSTORE_DB_URL or XDG SQLite)")
    parser.add_argument("--workdir", default=".", help="the tools' working directory")
    parser.add_argument("--context-window", type=int, default=200_000, help="for a new session")
    parser.add_argument("--model", default=os.environ.get("ANTHROPIC_MODEL", DEFAULT_MODEL))
    parser.add_argument(
        "--compaction",
        choices=("ours", "on-demand", "background", "threshold"),
        default="ours",
        help="who compacts: our pipeline (default) or the Messages API in one of its modes",
    )
    parser.add_argument("task", nargs="?", help="a request to add before running")
    args = parser.parse_args()

    with SessionStore.open(args.db) as store:
        if args.new:
            session = store.create_session(
                title=(args.task or "agent")[:60],
                model=args.model,
                context_window=args.context_window,
                cwd=str(Path(args.workdir).resolve()),
            )
            print(f"session {session.id}", flush=True)
        else:
            session = store.get(args.session)
        client = anthropic.Anthropic(max_retries=2)
        compactor = None if args.compaction == "ours" else ServerCompactor(client, args.model, mode=args.compaction)
        agent = Agent(
            session=session,
            pipeline=Pipeline(store, summarizer=make_summarizer(), compactor=compactor),
            client=client,
            workdir=Path(args.workdir),
            model=args.model,
            on_event=lambda kind, payload: print(f"[{kind}]", flush=True),
        )
        answer = agent.ask(args.task) if args.task else agent.resume()
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
