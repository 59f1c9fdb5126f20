"""`make demo`: build a session from a realistic tool-using conversation and show it.

Runs on the embedded SQLite default, in a store under --dir, through the CLI
a user would type (each step is printed before it runs).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "sessionstore" / "fixtures" / "demo_conversation.jsonl"


def run(*args: str, db: str, capture: bool = False) -> str:
    """Run one `sessionstore` command the way a user would, echoing it first."""
    cmd = [sys.executable, "-m", "sessionstore", *args, "--db", db]
    print(f"\n$ sessionstore {' '.join(shlex.quote(a) for a in args)}", flush=True)
    result = subprocess.run(cmd, check=True, text=True, capture_output=capture)
    if capture:
        print(result.stdout, end="")
        return result.stdout
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="demo-output", help="where the demo store and exports go")
    args = parser.parse_args()
    out = Path(args.dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    db = f"sqlite:///{out / 'sessions.db'}"

    session = run(
        "new",
        "--title",
        "textstats: fix failing test",
        "--model",
        "claude-sonnet-4-6",
        "--context-window",
        "200000",
        db=db,
        capture=True,
    ).strip()
    run("append", session, str(FIXTURE), db=db)
    run("sessions", db=db)
    run("view", session, db=db)
    run("compact", session, "--instructions", "Keep the commit plan.", db=db)
    run("view", session, db=db)
    run("history", session, db=db)
    run("history", session, "--boundary", "1", "--summary", db=db)
    markdown = out / "transcript.md"
    html = out / "transcript.html"
    run("export", session, "--format", "markdown", "-o", str(markdown), db=db)
    run("export", session, "--format", "html", "-o", str(html), db=db)
    run("stats", session, db=db)
    print(f"\nThe demo store is {out / 'sessions.db'}; the exports are {markdown} and {html}.")
    print(f"Try: sessionstore history {session[:8]} --boundary 1 --db {db}")
    print(f"Then browse it all full screen: sessionstore browse --db {db}")


if __name__ == "__main__":
    main()
