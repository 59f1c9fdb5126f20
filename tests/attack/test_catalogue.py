"""The attacker suite: every object of a team store's schema, read from pg_catalog, attacked by every kind of role.

Two stores, one whose tables belong to an owner role and one whose tables belong to the superuser
(`db upgrade` as `postgres`). Role profiles: a role never granted, a granted role, a revoked role, a role
with a read share and one with a write share of alice's sessions (tests/support/teamstore.py). Alice has
an unshared session holding a secret, a word and a spilled blob, and an import lock on a file named after
the word: none of it may be seen, changed, named or waited on. Every table, view, sequence and function comes from the catalogue, so a new one is
attacked without editing this file. Each attempt runs in its own transaction, rolled back.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest

from sessionstore import SessionStore
from sessionstore.interchange.importing import import_file
from tests.attack.conftest import record
from tests.conftest import PG_URL
from tests.support.teamstore import WORD, Team, team_store

pytestmark = [
    pytest.mark.pg,
    pytest.mark.skipif(not PG_URL, reason="PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)"),
]

#: profile -> (the role it connects as, the session of alice's it holds a share of, if any)
PROFILES = {
    "never-granted": ("carol", None),
    "granted": ("bob", None),
    "revoked": ("dave", None),
    "read-share": ("bob", "read_shared"),
    "write-share": ("bob", "write_shared"),
}
#: Profiles that may use the store at all.
USERS = ("granted", "read-share", "write-share")
#: The record: rows only their owner updates or deletes (docs/teams.md, "Sharing"), shared or not.
RECORD = ("messages", "compactions", "source_lines", "imports", "import_files", "session_forks")
#: Dummy values by type, for an INSERT that fills every required column: numbers no row of alice's holds, so a
#: claiming INSERT meets no unique key of hers and only a policy, a grant or a trigger can refuse it.
_DUMMY = {
    "character varying": "'x'",
    "text": "'x'",
    "integer": "987654321",
    "bigint": "987654321",
    "smallint": "9876",
    "double precision": "0",
    "real": "0",
    "boolean": "false",
    "bytea": "'\\x00'::bytea",
    "tsvector": "''::tsvector",
    "jsonb": "'{}'::jsonb",
    "json": "'{}'::json",
}
_WORDS = re.compile(r"\b[a-z_][a-z0-9_]*\b")


@dataclass
class Function:
    signature: str
    name: str
    args: list[str]
    trigger: bool
    definer: bool
    config: str
    source: str


@dataclass
class Catalogue:
    tables: dict[str, list[tuple[str, str, bool, bool]]]  # name -> (column, type, not null, has default)
    views: list[str]
    sequences: list[str]
    functions: list[Function]

    def objects(self) -> list[str]:
        return (
            [f"table:{t}" for t in self.tables]
            + [f"view:{v}" for v in self.views]
            + [f"sequence:{s}" for s in self.sequences]
            + [f"function:{f.name}" for f in self.functions]
        )


@pytest.fixture(scope="module", params=["owner-role", "superuser"])
def team(request: pytest.FixtureRequest) -> Iterator[Team]:
    with team_store(PG_URL or "", superuser_owned=request.param == "superuser") as made:
        yield made


@pytest.fixture(scope="module")
def catalogue(team: Team) -> Catalogue:
    """Every table, view, sequence and function of the store's schema, as pg_catalog lists them."""
    with team.raw(None) as conn:
        relations = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace "
            "AND c.relkind IN ('r', 'p', 'v', 'm', 'S') ORDER BY 1"
        ).fetchall()
        tables: dict[str, list[tuple[str, str, bool, bool]]] = {}
        for name, kind in relations:
            if kind in ("r", "p"):
                tables[name] = [
                    (r[0], r[1], bool(r[2]), bool(r[3]))
                    for r in conn.execute(
                        "SELECT a.attname, format_type(a.atttypid, NULL), a.attnotnull, "
                        "a.atthasdef OR a.attidentity <> '' FROM pg_attribute a WHERE a.attrelid = %s::regclass "
                        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                        (f"public.{name}",),
                    ).fetchall()
                ]
        functions = [
            Function(r[0], r[1], [str(t) for t in r[2]], r[3] == "trigger", bool(r[4]), r[5] or "", r[6] or "")
            for r in conn.execute(
                "SELECT p.oid::regprocedure::text, p.proname, ARRAY(SELECT format_type(t, NULL) FROM "
                "unnest(p.proargtypes) t), format_type(p.prorettype, NULL), p.prosecdef, "
                "array_to_string(p.proconfig, ','), p.prosrc FROM pg_proc p WHERE p.pronamespace = "
                "'public'::regnamespace AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid "
                "AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e') ORDER BY 1"
            ).fetchall()
        ]
    found = Catalogue(
        tables,
        [r[0] for r in relations if r[1] in ("v", "m")],
        [r[0] for r in relations if r[1] == "S"],
        functions,
    )
    assert {"sessions", "messages", "blobs", "session_shares"} <= set(found.tables)
    assert any(f.name == "sessionstore_search_window" for f in found.functions)
    return found


def _markers(team: Team) -> list[str]:
    """LIKE patterns for anything of alice's unshared sessions: their ids, her blob's key, her word."""
    sessions = [team.secret_session, *team.extra.get("sessions", [])]
    return [*(f"%{s}%" for s in sessions), f"%{team.blob}%", f"%{WORD}%"]


def _try(conn: Any, sql: str, params: Any = ()) -> Any:
    """The rows `sql` returns, or the refusal's SQLSTATE class name; always rolled back."""
    try:
        with conn.transaction(force_rollback=True):
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else cur.rowcount
    except psycopg.Error as exc:
        return type(exc).__name__


def _refused_or_empty(outcome: Any) -> bool:
    return isinstance(outcome, str) or outcome in ([], 0, [(0,)], [(None,)])


def _connect(team: Team, profile: str) -> Any:
    return team.raw(getattr(team, PROFILES[profile][0]))


# ------------------------------------------------------------------ rows


@pytest.mark.parametrize("profile", list(PROFILES))
def test_no_role_reads_a_row_of_an_unshared_session(team: Team, catalogue: Catalogue, profile: str) -> None:
    """SELECT on every table and view: no row mentioning alice's unshared session, blob or word."""
    leaks = {}
    with _connect(team, profile) as conn:
        for name in [*catalogue.tables, *catalogue.views]:
            seen = _try(conn, f"SELECT count(*) FROM public.{name} x WHERE x::text LIKE ANY(%s)", (_markers(team),))
            if not _refused_or_empty(seen):
                leaks[name] = seen
            blob = _try(conn, f"SELECT count(*) FROM public.{name} x WHERE x::text LIKE %s", (f"%{team.blob}%",))
            if not _refused_or_empty(blob):
                leaks[f"{name} (blob)"] = blob
    record(_store(team), profile, [f"table:{t}" for t in catalogue.tables] + [f"view:{v}" for v in catalogue.views])
    assert leaks == {}


def test_alice_has_a_row_in_every_table_under_row_level_security(team: Team, catalogue: Catalogue) -> None:
    """The attacks above prove a policy only where alice has a row to leak: every table under row-level
    security holds one of her unshared sessions' (a new table's row comes with the feature that writes it)."""
    with team.raw(None) as conn:
        secured = [
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' "
                "AND relrowsecurity ORDER BY 1"
            ).fetchall()
        ]
        empty = [
            name
            for name in secured
            if conn.execute(
                f"SELECT count(*) FROM public.{name} x WHERE x::text LIKE ANY(%s)", (_markers(team),)
            ).fetchone()[0]
            == 0
        ]
    assert secured and set(secured) <= set(catalogue.tables)
    assert empty == [], f"tables where alice has no row: {empty}"


@pytest.mark.parametrize("profile", list(PROFILES))
def test_no_role_changes_an_unshared_session(team: Team, catalogue: Catalogue, profile: str) -> None:
    """UPDATE, DELETE, TRUNCATE and an INSERT claiming alice's session, on every table: refused or no row."""
    done = {}
    with _connect(team, profile) as conn:
        for name, columns in catalogue.tables.items():
            first = columns[0][0]
            where = "x::text LIKE ANY(%s)"
            for verb, sql in (
                ("update", f'UPDATE public.{name} x SET "{first}" = x."{first}" WHERE {where}'),
                ("delete", f"DELETE FROM public.{name} x WHERE {where}"),
            ):
                outcome = _try(conn, sql, (_markers(team),))
                if not _refused_or_empty(outcome):
                    done[f"{verb} {name}"] = outcome
            # A DELETE with no WHERE reads no column, so no read policy filters it: only the delete policy stands
            # between it and rows the role cannot see. It may remove no more rows than the role can see.
            visible = _try(conn, f"SELECT count(*) FROM public.{name}")
            removed = _try(conn, f"DELETE FROM public.{name}")
            if isinstance(removed, int) and isinstance(visible, list) and removed > visible[0][0]:
                done[f"delete everything in {name}"] = f"{removed} rows, {visible[0][0]} visible"
            # Row by row, naming no column (the k-th row a temporary sequence counts), so no read policy filters
            # it and no row a foreign key holds on to stops the rest: no more rows removed than the role can see,
            # nor taken (moved to the role and its own session) by an UPDATE that names no column either.
            names = {c[0] for c in columns}
            if isinstance(visible, list):
                for verb, sql in (
                    ("delete row by row", f"DELETE FROM public.{name} WHERE"),
                    ("take row by row", _taking_update(team, name, names)),
                    *(("change row by row", change) for change in _changing_updates(conn, name, columns)),
                ):
                    changed = _row_by_row(conn, sql) if sql else 0
                    if changed > visible[0][0]:
                        done[f"{verb} in {name}"] = f"{changed} rows, {visible[0][0]} visible"
            handed = _handing_update(conn, team, name, columns)
            if handed:
                done[f"hand a row of its own in {name} to alice"] = handed
            truncated = _try(conn, f"TRUNCATE public.{name} CASCADE")
            if not isinstance(truncated, str):
                done[f"truncate {name}"] = truncated
            # Into each of her unshared sessions: a row keyed by session alone (her pipeline state, her notes)
            # collides with hers in the secret session, and only a policy, grant or trigger may refuse it.
            for session in [team.secret_session, *team.extra.get("sessions", [])]:
                inserted = _try(conn, _claiming_insert(team, name, columns, session=session))
                if not isinstance(inserted, str):
                    done[f"insert {name}"] = inserted
    record(_store(team), profile, [f"table:{t}" for t in catalogue.tables])
    assert done == {}


def _row_by_row(conn: Any, sql: str, first: str = "", mine: str = "") -> int:
    """`sql` (ending in WHERE) on the k-th row it scans, for k = 1, 2, ... until there is none: the rows it
    changed in all (each attempt, after `first` if given, rolled back; a refused one, by a key or a check,
    skipped). With `mine` (a count of the role's rows), the rows it made no longer the role's."""
    try:
        conn.execute("CREATE TEMP SEQUENCE IF NOT EXISTS attack_row")
    except psycopg.Error:
        return 0
    changed = 0
    for k in range(1, 1000):
        try:
            with conn.transaction(force_rollback=True):
                if first:
                    conn.execute(first)
                conn.execute("SELECT setval('pg_temp.attack_row', 1, false)")
                before = conn.execute(mine).fetchone()[0] if mine else 0
                count = conn.execute(f"{sql} nextval('pg_temp.attack_row') = {k}").rowcount
                if mine and count:  # rows that stopped being the role's (not a row it updated to what it was)
                    count = before - conn.execute(mine).fetchone()[0]
                scanned = conn.execute("SELECT last_value FROM pg_temp.attack_row").fetchone()[0]
        except psycopg.errors.InsufficientPrivilege as exc:
            if "row-level security" not in str(exc):  # no grant for it: no later row fares better
                return changed
            continue
        except psycopg.Error:
            continue
        if count == 0 and scanned < k:  # fewer than k rows (a policy may filter rows after counting them)
            return changed
        changed += count
    return changed


def _changing_updates(conn: Any, name: str, columns: list[tuple[str, str, bool, bool]]) -> list[str]:
    """UPDATEs naming no column (so only the update policy filters them) that set one column to a constant: one per
    column no key holds and a role might change (its owner, writer and session left to the taking attacks)."""
    keyed = {
        r[0]
        for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisunique",
            (f"public.{name}",),
        )
    }
    return [
        f'UPDATE public.{name} SET "{column}" = {_DUMMY[kind]} WHERE'
        for column, kind, _, _ in columns
        if column not in keyed and column not in ("owner", "writer", "session_id") and kind in _DUMMY
    ]


def _taking_update(team: Team, name: str, names: set[str]) -> str | None:
    """An UPDATE naming no column that makes a row the role's own, in its own session."""
    if "owner" not in names:
        return None
    moved = f", session_id = '{team.extra['bob_session']}'" if "session_id" in names else ""
    return f"UPDATE public.{name} SET owner = current_user{moved} WHERE"


def _handing_update(conn: Any, team: Team, name: str, columns: list[tuple[str, str, bool, bool]]) -> int:
    """A row the role inserts as its own (in its own session), then updates, naming no column (a read policy
    would check the new row), to be alice's, in her unshared session: how many rows it handed over."""
    names = {c[0] for c in columns}
    if "owner" not in names:
        return 0
    handed = 0
    for session in [team.secret_session, *team.extra.get("sessions", [])]:  # one may hold a row keyed like it
        moved = f", session_id = '{session}'" if "session_id" in names else ""  # no role UPDATEs a writer
        handed += _row_by_row(
            conn,
            f"UPDATE public.{name} SET owner = '{team.alice}'{moved} WHERE",
            first=_claiming_insert(team, name, columns, own=True),
            mine=f"SELECT count(*) FROM public.{name} WHERE owner = current_user",
        )
        if "session_id" not in names:
            break
    return handed


def _claiming_insert(
    team: Team, name: str, columns: list[tuple[str, str, bool, bool]], *, own: bool = False, session: str = ""
) -> str:
    """An INSERT filling every required column, naming alice's unshared session and alice as the owner (own:
    the role's own session, the role as the owner). A blob's key is one no row holds."""
    names, values = [], []
    session = team.extra.get("bob_session", "") if own else session or team.secret_session
    for column, kind, not_null, has_default in columns:
        if column == "session_id" or column == "id" and name == "sessions":
            value = f"'{session}'" if column == "session_id" else "gen_random_uuid()::text"
        elif column in ("owner", "writer"):
            if own:
                continue
            value = f"'{team.alice}'"
        elif column == "sha256":
            value = f"'{hashlib.sha256(b'planted by the attacker').hexdigest()}'"
        elif column == "blob_sha256":
            value = f"'{team.blob}'"
        elif column == "seq" and session in (team.extra.get("untouched"), team.extra.get("bob_session")):
            value = "1"  # the session's one message, which no derived row names yet: a foreign key holds, no key meets
        elif column == "key_id" and name == "agent_sdk_entries":  # entries into her Agent SDK key
            value = str(team.extra["sdk_key_id"])
        elif not_null and not has_default:
            value = _DUMMY.get(kind, "NULL")
        else:
            continue
        names.append(f'"{column}"')
        values.append(value)
    return f"INSERT INTO public.{name} ({', '.join(names)}) VALUES ({', '.join(values)})"


@pytest.mark.parametrize("profile", ["read-share", "write-share"])
def test_a_share_never_rewrites_the_record_of_the_shared_session(
    team: Team, catalogue: Catalogue, profile: str
) -> None:
    """On the session shared with it: no UPDATE or DELETE of the record, no change of the session's identity,
    nothing at all for a read share."""
    target = getattr(team, str(PROFILES[profile][1]))
    done = {}
    with _connect(team, profile) as conn:
        for name, columns in catalogue.tables.items():
            if "session_id" not in {c[0] for c in columns}:
                continue
            if profile == "write-share" and name not in RECORD:
                continue
            first = columns[0][0]
            for verb, sql in (
                ("update", f'UPDATE public.{name} x SET "{first}" = x."{first}" WHERE session_id = %s'),
                ("delete", f"DELETE FROM public.{name} WHERE session_id = %s"),
            ):
                outcome = _try(conn, sql, (target,))
                if not _refused_or_empty(outcome):
                    done[f"{verb} {name}"] = outcome
        for column in ("title", "cwd", "model", "host", "created_at", "metadata_json"):
            outcome = _try(
                conn,
                f"UPDATE public.sessions SET {column} = coalesce({column}, '') || 'x' WHERE id = %s"
                if column not in ("created_at",)
                else "UPDATE public.sessions SET created_at = created_at + 1 WHERE id = %s",
                (target,),
            )
            if not _refused_or_empty(outcome):
                done[f"update sessions.{column}"] = outcome
    record(_store(team), profile, [f"table:{t}" for t in catalogue.tables])
    assert done == {}


def test_a_share_writer_changes_no_replacement_the_owner_wrote(team: Team) -> None:
    """A write share updates only the replacement decisions it wrote (`writer`, a column it may not set): the
    owner's, in the session shared with it, it reads but cannot rewrite under her name."""
    where = "WHERE session_id = %s AND tool_use_id = 'toolu_alices'"
    with _connect(team, "write-share") as conn:
        seen = _try(conn, f"SELECT writer FROM public.replacements {where}", (team.write_shared,))
        changed = _try(
            conn, f"UPDATE public.replacements SET replacement = 'bob was here' {where}", (team.write_shared,)
        )
    assert seen == [(team.alice,)]  # bob sees her row: what stops him is the policy, not an invisible row
    assert isinstance(changed, str), changed


# ------------------------------------------------------------------ blobs


@pytest.mark.parametrize("profile", list(PROFILES))
def test_no_role_reads_a_blob_by_its_hash(team: Team, profile: str) -> None:
    """By hash alone, and (a write share) through a replacement it plants in the session shared with it."""
    with _connect(team, profile) as conn:
        assert _refused_or_empty(_try(conn, "SELECT data FROM public.blobs WHERE sha256 = %s", (team.blob,)))
        target = PROFILES[profile][1]
        if target is not None:
            planted = (
                "WITH o AS (SELECT set_config('sessionstore.owner', %s, true)) INSERT INTO public.replacements "
                "(session_id, tool_use_id, kind, replacement, blob_sha256, original_size, created_at) "
                "SELECT %s, 'toolu_planted', 'spilled', 'p', %s, 1, 0 FROM o RETURNING "
                "(SELECT count(*) FROM public.blobs WHERE sha256 = %s)"
            )
            outcome = _try(conn, planted, (team.alice, getattr(team, target), team.blob, team.blob))
            assert _refused_or_empty(outcome), outcome
    record(_store(team), profile, ["table:blobs", "table:replacements"])


# ------------------------------------------------------------------ sequences


@pytest.mark.parametrize("profile", list(PROFILES))
def test_no_role_moves_or_reads_a_sequence(team: Team, catalogue: Catalogue, profile: str) -> None:
    moved = {}
    with _connect(team, profile) as conn:
        for name in catalogue.sequences:
            for verb, sql in (
                ("setval", f"SELECT setval('public.{name}', 1)"),
                ("setval-max", f"SELECT setval('public.{name}', 2147483647)"),
                ("last_value", f"SELECT last_value FROM public.{name}"),
            ):
                outcome = _try(conn, sql)
                if not isinstance(outcome, str):
                    moved[f"{verb} {name}"] = outcome
            taken = _try(conn, f"SELECT nextval('public.{name}')")
            if profile not in USERS and not isinstance(taken, str):
                moved[f"nextval {name}"] = taken
    record(_store(team), profile, [f"sequence:{s}" for s in catalogue.sequences])
    assert moved == {}


# ------------------------------------------------------------------ functions


def test_every_function_runs_as_its_caller_or_with_a_fixed_path(catalogue: Catalogue) -> None:
    for function in catalogue.functions:
        if function.definer:
            assert re.search(r"search_path=pg_catalog, \S+, pg_temp", function.config), function.signature


def _call(function: Function, team: Team) -> str:
    """A call of `function` with arguments of its types: the word of alice's unshared session, else NULL."""
    values = [f"ARRAY['{WORD}']::text[]" if kind == "text[]" else f"NULL::{kind}" for kind in function.args]
    return f"SELECT * FROM {function.name}({', '.join(values)})"


@pytest.mark.parametrize("profile", list(PROFILES))
def test_no_role_runs_a_function_it_was_not_given_nor_learns_through_one(
    team: Team, catalogue: Catalogue, profile: str
) -> None:
    found = {}
    with _connect(team, profile) as conn:
        for function in catalogue.functions:
            outcome = _try(conn, _call(function, team))
            if profile not in USERS:
                if not isinstance(outcome, str):
                    found[function.name] = outcome
            elif not isinstance(outcome, str) and _mentions_secret(team, outcome):
                found[function.name] = outcome
    record(_store(team), profile, [f"function:{f.name}" for f in catalogue.functions])
    assert found == {}


def _mentions_secret(team: Team, rows: Any) -> bool:
    text = json.dumps(rows, default=str)
    return team.secret_session in text or team.blob in text


@pytest.mark.parametrize("profile", list(PROFILES))
def test_temporary_objects_shadow_no_name_a_function_uses(team: Team, catalogue: Catalogue, profile: str) -> None:
    """Every relation name of the schema and every word of every function's source, shadowed by a temporary
    view whose rows come from a function that reports who runs it: calling each function never runs it as
    anyone but the caller."""
    role = getattr(team, PROFILES[profile][0])
    names = set(catalogue.tables) | set(catalogue.views)
    for function in catalogue.functions:
        names |= set(_WORDS.findall(function.source.lower()))
    ran_as: dict[str, str] = {}
    with team.raw(role, autocommit=False) as conn:
        conn.execute(
            "CREATE FUNCTION pg_temp.whoami() RETURNS TABLE(session_id varchar, seq bigint, owner varchar, "
            "grantee varchar, read_only boolean, id bigint, body text, tsv tsvector) LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'ran as %', current_user; END $$"
        )
        shadowed = 0
        for name in sorted(names):
            try:
                with conn.transaction():
                    conn.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * FROM pg_temp.whoami()')
                    conn.execute(f'GRANT SELECT ON pg_temp."{name}" TO PUBLIC')
                shadowed += 1
            except psycopg.Error:
                pass
        for function in catalogue.functions:
            if function.trigger:
                continue
            outcome = _try(conn, _call(function, team))
            match = re.search(r"ran as (\S+)", str(outcome))
            if match and match.group(1) != role:
                ran_as[function.name] = match.group(1)
        conn.rollback()
    assert shadowed > len(catalogue.tables)
    record(_store(team), profile, [f"function:{f.name}" for f in catalogue.functions])
    assert ran_as == {}


# ------------------------------------------------------------------ locks and plans


def _lock_keys() -> list[int]:
    """Every advisory lock class the store's code names (`..._LOCK = N`), read from its source."""
    root = Path(__file__).resolve().parents[2] / "sessionstore"
    keys = set()
    for path in root.rglob("*.py"):
        keys |= {int(k) for k in re.findall(r"_LOCK\s*=\s*(\d{4,})", path.read_text())}
    return sorted(keys | {735502, 735527})  # and the classes earlier versions keyed by session


@pytest.mark.parametrize("profile", ["never-granted", "granted"])
def test_no_advisory_key_a_role_can_take_holds_the_owner(team: Team, profile: str) -> None:
    """The attacker holds every advisory key of the code, per class and per alice's session ids; alice's append,
    search and usage still run (a wait would end in lock_timeout)."""
    sessions = [team.secret_session, team.read_shared, team.write_shared]
    with _connect(team, profile) as conn:
        for key in _lock_keys():
            conn.execute("SELECT pg_advisory_lock(%s::bigint)", (key,))
            for sid in sessions:
                conn.execute("SELECT pg_advisory_lock(%s::int, hashtext(%s))", (key, sid))
        env = {**os.environ, "PGOPTIONS": "-c lock_timeout=3000"}
        message = Path(os.environ.get("TMPDIR", "/tmp")) / f"attack-{team.database}-{profile}.jsonl"
        message.write_text(json.dumps({"role": "user", "content": f"{WORD} once more"}) + "\n")
        try:
            for args in (
                ["append", team.secret_session, str(message)],
                ["search", WORD, "--json"],
                ["usage", "--json"],
            ):
                result = _cli(*args, "--db", team.url(team.alice), env=env)
                assert result.returncode == 0, (args, result.stderr)
        finally:
            message.unlink(missing_ok=True)
    record(_store(team), profile, ["lock:advisory keys"])


@pytest.mark.parametrize("profile", ["never-granted", "granted"])
def test_no_lock_a_role_can_take_holds_the_owner_s_import(team: Team, profile: str, tmp_path: Path) -> None:
    """A file alice imported has grown. The attacker holds the advisory key importers of it once took, locks
    every row of import_locks it can and one of its own for the same file name, and tries to claim alice's;
    her `import` of the file still runs (a wait would end in lock_timeout), and none of her rows reached it."""
    source_id = str(uuid.uuid4())
    path = _claude_file(tmp_path / f"{source_id}.jsonl", source_id, 1)
    with SessionStore.open(team.url(team.alice)) as store:
        assert import_file(store, str(path), source="claude-code").status == "imported"
    _claude_file(path, source_id, 2)
    old_key = int.from_bytes(hashlib.sha256(f"claude-code\0{path.name}".encode()).digest()[:8], "big", signed=True)
    with _connect(team, profile) as conn:
        conn.execute("SELECT pg_advisory_lock(%s::bigint)", (old_key,))
        with conn.transaction(force_rollback=True):
            held = {
                "every row": _held(conn, "SELECT owner, name FROM public.import_locks FOR UPDATE"),
                "its own": _held(
                    conn,
                    "INSERT INTO public.import_locks (source, name) VALUES ('claude-code', %s) ON CONFLICT DO NOTHING",
                    (path.name,),
                ),
                "by name": _held(
                    conn, "SELECT owner FROM public.import_locks WHERE name = %s FOR UPDATE", (path.name,)
                ),
                "alice's": _held(
                    conn,
                    "INSERT INTO public.import_locks (owner, source, name) VALUES (%s, 'claude-code', %s)",
                    (team.alice, path.name),
                ),
            }
            env = {**os.environ, "PGOPTIONS": "-c lock_timeout=3000"}
            result = _cli("import", "claude-code", str(path), "--json", "--db", team.url(team.alice), env=env)
            assert result.returncode == 0, (held, result.stderr)
            assert [r["status"] for r in json.loads(result.stdout)["files"]] == ["grown"], result.stdout
    assert team.alice not in json.dumps(held), held
    assert isinstance(held["alice's"], str), held
    if profile == "granted":
        assert held["by name"] == [(team.bob,)], held
    record(_store(team), profile, ["lock:import_locks rows", "lock:a file's advisory key"])


def _held(conn: Any, sql: str, params: Any = ()) -> Any:
    """The rows `sql` returns (its locks kept till the enclosing transaction ends), or the refusal's SQLSTATE
    class name (rolled back to before it)."""
    try:
        with conn.transaction():
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else cur.rowcount
    except psycopg.Error as exc:
        return type(exc).__name__


def _claude_file(path: Path, source_id: str, turns: int) -> Path:
    """A Claude Code transcript of `turns` user and assistant lines (compact, as Claude Code writes them)."""
    lines: list[dict[str, Any]] = []
    for turn in range(turns):
        parent = lines[-1]["uuid"] if lines else None
        for kind, content in (("user", f"step {turn}"), ("assistant", [{"type": "text", "text": "ok"}])):
            lines.append(
                {
                    "type": kind,
                    "uuid": f"{source_id}-{kind}-{turn}",
                    "parentUuid": parent,
                    "sessionId": source_id,
                    "cwd": "/w",
                    "timestamp": f"2026-11-30T10:00:0{len(lines)}.000Z",
                    "message": {"role": kind, "content": content}
                    | ({"id": f"msg_{turn}", "model": "claude-sonnet-4-5"} if kind == "assistant" else {}),
                }
            )
            parent = lines[-1]["uuid"]
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


def _cli(*args: str, env: dict[str, str]) -> Any:
    import subprocess

    return subprocess.run(
        [str(Path(sys.executable).parent / "sessionstore"), *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize("profile", USERS)
def test_explain_shows_counts_never_rows(team: Team, catalogue: Catalogue, profile: str) -> None:
    """EXPLAIN ANALYZE as a member, on every table with a session column, filtered to alice's unshared session:
    no row comes back (what it may count is stated in docs/teams.md, pinned by tests/test_team_hardening.py)."""
    with _connect(team, profile) as conn:
        for name, columns in catalogue.tables.items():
            if "session_id" not in {c[0] for c in columns}:
                continue
            plan = _try(
                conn,
                f"EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM public.{name} WHERE session_id = %s",
                (team.secret_session,),
            )
            if isinstance(plan, str):
                continue
            assert plan[0][0][0]["Plan"]["Actual Rows"] == 0, name
    record(_store(team), profile, [f"plan:{t}" for t in catalogue.tables])


def _store(team: Team) -> str:
    return "superuser-owned" if team.superuser_owned else "owner-role-owned"
