"""Mutation testing of the row-level security policies: `make mutate-policies` (PostgreSQL; not part of `make test`).

scripts/mutate.py mutates Python tokens; the ownership promises live in SQL, in the policies the revisions
create. Each mutant here makes one clause of one policy permissive (`USING (true)` or `WITH CHECK (true)`,
the break a careless revision makes) in the attacker suite's team store (tests/support/teamstore.py reads
SESSIONSTORE_TEST_POLICY_BREAK), and runs the attacker suite and the ownership tests: a mutant none of them
kills is a survivor, to be explained or given a test. The policies are read from a store migrated to head,
so a policy added by a new revision is mutated without editing this file.

    SESSIONSTORE_TEST_PG_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test python scripts/mutate_policies.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutate"
RESULTS = WORK / "policies.jsonl"
#: The tests a policy mutant must fail: the attacker suite on the owner-role store, then the ownership journeys.
TESTS = ["tests/attack/test_catalogue.py", "tests/test_ownership.py"]


@contextmanager
def store_at_head(base: str) -> Iterator[str]:
    """A new database holding a store migrated to head (the first open migrates it); yields its name."""
    sys.path.insert(0, str(ROOT))
    from sessionstore import SessionStore
    from tests.support.pgadmin import fresh_database, url_for

    with fresh_database(base) as name:
        SessionStore.open(url_for(base, database=name)).close()
        yield name


def _admin(base: str, name: str) -> Any:
    """A superuser connection to the database `name`."""
    import psycopg

    from tests.support.pgadmin import admin_url, url_for

    return psycopg.connect(url_for(admin_url(base), database=name))


def policy_clauses(base: str) -> list[tuple[str, str, str]]:
    """(table, policy, using|check) for every clause of every policy of a store migrated to head."""
    with store_at_head(base) as name, _admin(base, name) as conn:
        rows = conn.execute(
            "SELECT tablename, policyname, qual IS NOT NULL, with_check IS NOT NULL FROM pg_policies "
            "WHERE schemaname = 'public' ORDER BY 1, 2"
        ).fetchall()
    clauses = []
    for table, policy, using, check in rows:
        clauses += [(table, policy, "using")] if using else []
        clauses += [(table, policy, "check")] if check else []
    return clauses


def granted_privileges(base: str) -> tuple[dict[str, str], dict[str, set[str]]]:
    """(policy -> its command, table -> the commands `db grant` gives a member) on a store migrated to head.

    A survivor whose command no member may run at all is guarded by the grants before its policy is asked.
    """
    from sessionstore import SessionStore
    from sessionstore.storage.team.ownership import grant
    from tests.support.pgadmin import create_role, drop_role, url_for

    member = create_role(base, "t24mp")
    try:
        with store_at_head(base) as name:
            with SessionStore.open(url_for(base, database=name)) as store:
                grant(store, member)
            with _admin(base, name) as conn:
                rows = conn.execute("SELECT policyname, cmd, tablename FROM pg_policies WHERE schemaname = 'public'")
                policies = rows.fetchall()
                allowed = {
                    str(table): {
                        verb
                        for verb in ("SELECT", "INSERT", "UPDATE", "DELETE")
                        if (  # a column's privilege counts: members UPDATE two columns of replacements
                            conn.execute(
                                f"SELECT {'has_table_privilege' if verb == 'DELETE' else 'has_any_column_privilege'}"
                                "(%s, %s, %s)",
                                (member, table, verb),
                            ).fetchone()
                            or [0]
                        )[0]
                    }
                    for table in {r[2] for r in policies}
                }
    finally:
        drop_role(base, member)
    return {str(r[0]): str(r[1]) for r in policies}, allowed


def run(clause: tuple[str, str, str], timeout: float) -> dict[str, object]:
    """The tests with one clause made `true`: killed when any fails (first failure stops the run)."""
    env = {**os.environ, "SESSIONSTORE_TEST_POLICY_BREAK": ":".join(clause), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider", *TESTS]
    cmd += ["-k", "not superuser"]  # the attacker suite's second store has the same policies
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        outcome = "survived" if done.returncode == 0 else "killed"
    except subprocess.TimeoutExpired:
        failed, outcome = [], "killed (timeout)"
    table, policy, which = clause
    return {
        "table": table,
        "policy": policy,
        "clause": which,
        "outcome": outcome,
        "by": failed[:1],
        "seconds": round(time.monotonic() - start, 1),
    }


def report(rows: list[dict[str, object]], commands: dict[str, str], allowed: dict[str, set[str]]) -> str:
    """Score and survivors, as markdown; a survivor says whether the grants already refuse its command."""
    killed = sum(str(r["outcome"]).startswith("killed") for r in rows)
    out = [f"{len(rows)} policy clauses made `true` one at a time: {killed} killed, {len(rows) - killed} survived.\n"]
    for r in rows:
        if r["outcome"] != "survived":
            continue
        table, policy = str(r["table"]), str(r["policy"])
        command = commands.get(policy, "?")
        verbs = {"ALL": {"SELECT", "INSERT", "UPDATE", "DELETE"}}.get(command, {command})
        held = verbs & allowed.get(table, set())
        why = f"members may {', '.join(sorted(held))} it" if held else f"no member may {command} it (the grants refuse)"
        out.append(f"- survived: `{table}` policy `{policy}` (FOR {command}), its {r['clause']} clause: {why}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run every policy clause's mutant (or those not yet in build/mutate/policies.jsonl, with --resume)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a run counts as killed")
    parser.add_argument("--resume", action="store_true", help="skip the clauses policies.jsonl already records")
    parser.add_argument("--retry-survivors", action="store_true", help="with --resume: run the survivors again")
    parser.add_argument("--report-only", action="store_true", help="write the report from policies.jsonl")
    args = parser.parse_args(argv)
    base = os.environ.get("SESSIONSTORE_TEST_PG_URL")
    if not base:
        parser.error("needs SESSIONSTORE_TEST_PG_URL (a PostgreSQL server the tests may create databases on)")
    WORK.mkdir(parents=True, exist_ok=True)
    done: dict[tuple[str, str, str], dict[str, object]] = {}
    if (args.resume or args.report_only) and RESULTS.exists():
        for line in RESULTS.read_text().splitlines():
            row = json.loads(line)
            clause = (str(row["table"]), str(row["policy"]), str(row["clause"]))
            if args.retry_survivors and row["outcome"] == "survived":
                done.pop(clause, None)  # the last line of a clause is its outcome: a retry's, when there was one
            else:
                done[clause] = row
    elif RESULTS.exists():
        RESULTS.unlink()
    clauses = policy_clauses(base)
    todo = [] if args.report_only else [c for c in clauses if c not in done]

    def one(clause: tuple[str, str, str]) -> None:
        row = run(clause, args.timeout)
        done[clause] = row
        with RESULTS.open("a") as out:
            out.write(json.dumps(row) + "\n")
        print(f"[{len(done)}/{len(clauses)}] {clause[0]}.{clause[1]} {clause[2]}: {row['outcome']}", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, todo))
    commands, allowed = granted_privileges(base)
    text = report([done[c] for c in clauses if c in done], commands, allowed)
    (WORK / "policies.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
