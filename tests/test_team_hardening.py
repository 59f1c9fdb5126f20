"""A team's PostgreSQL store holds against its own members (issue 36), in raw SQL as they would try it.

Each test is one finding of the security review, run as bob (granted, with a read share and a write
share of alice's sessions) or as a role never granted or revoked, on a store whose tables belong to
an owner role and on one whose tables belong to the superuser. What alice holds is checked as the
superuser before and after.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest

from sessionstore import SessionStore
from tests.conftest import PG_URL
from tests.support.cli import run_cli
from tests.support.pgadmin import create_role, drop_role
from tests.support.teamstore import SECRET, SPILLED, WORD, Team, team_store

pytestmark = [
    pytest.mark.pg,
    pytest.mark.skipif(not PG_URL, reason="PostgreSQL tests need SESSIONSTORE_TEST_PG_URL (.ci/run sets it)"),
]

#: The review's exploit (finding 1): a temporary view shadows an unqualified name of the search function.
EXPLOIT = (
    "CREATE FUNCTION pg_temp.esc() RETURNS TABLE(session_id varchar, owner varchar, grantee varchar, "
    "read_only boolean) LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'alter table public.messages disable row level "
    "security'; RETURN; END $$",
    "CREATE TEMP VIEW session_shares AS SELECT * FROM pg_temp.esc()",
    "GRANT SELECT ON pg_temp.session_shares TO PUBLIC",
)


@pytest.fixture(scope="module", params=["owner-role", "superuser"])
def team(request: pytest.FixtureRequest) -> Iterator[Team]:
    with team_store(PG_URL or "", superuser_owned=request.param == "superuser") as made:
        yield made


def _alice_rows(team: Team) -> list[Any]:
    """Alice's transcript and session rows, as the superuser sees them."""
    with team.raw(None) as conn:
        return [
            *conn.execute("SELECT m::text FROM messages m WHERE owner = %s ORDER BY 1", (team.alice,)).fetchall(),
            *conn.execute("SELECT s::text FROM sessions s WHERE owner = %s ORDER BY 1", (team.alice,)).fetchall(),
        ]


def _seen(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """The first row of `sql`, or the refusal's class when the database refused it (transaction rolled back)."""
    try:
        with conn.transaction():
            return conn.execute(sql, params).fetchone()
    except psycopg.Error as exc:
        return type(exc).__name__


# ------------------------------------------------------------------ finding 1


def test_a_temporary_view_cannot_make_the_search_function_run_sql_as_the_owner(team: Team) -> None:
    """As bob (granted): the issue's exploit, to the letter; alice's rows stay hidden."""
    who = "bob"
    role = team.bob
    with team.raw(role, autocommit=False) as conn:
        with conn.cursor() as cur:
            for statement in EXPLOIT:
                cur.execute(statement)
            try:
                cur.execute("SELECT count(*) FROM sessionstore_search_window(array[%s],5,5,null,null,null)", (WORD,))
                seen = cur.execute(
                    "SELECT count(*) FROM messages WHERE session_id = %s", (team.secret_session,)
                ).fetchone()
            except psycopg.Error:
                seen = None  # refused: nothing ran as the owner
        conn.rollback()
    assert seen in (None, (0,)), f"{who} read alice's messages after shadowing session_shares"
    assert team.admin_one("SELECT relrowsecurity FROM pg_class WHERE oid = 'public.messages'::regclass") == (True,)


@pytest.mark.parametrize("who", ["bob", "carol", "dave"])
def test_no_role_runs_its_own_sql_as_another_through_the_search_function(team: Team, who: str) -> None:
    """Granted, never granted, revoked: a shadowing view whose function reports the role it ran as never runs
    as anyone but the caller."""
    role = getattr(team, who)
    with team.raw(role, autocommit=False) as conn:
        conn.execute(
            "CREATE FUNCTION pg_temp.esc() RETURNS TABLE(session_id varchar, owner varchar, grantee varchar, "
            "read_only boolean) LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'ran as %', current_user; END $$"
        )
        conn.execute("CREATE TEMP VIEW session_shares AS SELECT * FROM pg_temp.esc()")
        conn.execute("GRANT SELECT ON pg_temp.session_shares TO PUBLIC")
        try:
            conn.execute("SELECT count(*) FROM sessionstore_search_window(array[%s],5,5,null,null,null)", (WORD,))
            outcome = "returned"
        except psycopg.Error as exc:
            outcome = str(exc)
        conn.rollback()
    assert f"ran as {team.owner}" not in outcome, outcome


def test_the_store_functions_run_as_their_caller_or_with_a_fixed_path_and_no_public_execute(team: Team) -> None:
    """Every function of the store's schema: SECURITY INVOKER, or a fixed search_path ending in pg_temp;
    EXECUTE not granted to PUBLIC."""
    with team.raw(None) as conn:
        rows = conn.execute(
            "SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ','), ''), "
            "has_function_privilege('public', p.oid, 'EXECUTE') FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' "
            "AND p.proname LIKE 'sessionstore%'"
        ).fetchall()
    assert rows
    for name, definer, config, public in rows:
        assert not public, f"{name}: EXECUTE is granted to PUBLIC"
        if definer:
            assert "search_path=pg_catalog, public, pg_temp" in config, (name, config)


def test_a_role_never_granted_cannot_run_the_search_function(team: Team) -> None:
    with team.raw(team.carol) as conn:
        refused = _seen(conn, "SELECT count(*) FROM sessionstore_search_window(array['x'],5,5,null,null,null)")
    assert refused == "InsufficientPrivilege"


def test_the_search_function_returns_only_what_the_caller_may_read(team: Team) -> None:
    """Called directly, as bob: none of alice's unshared keys, whoever owns the tables."""
    with team.raw(team.bob) as conn:
        keys = conn.execute(
            "SELECT session_id FROM sessionstore_search_window(array[%s], null, null, null, null, null)", (WORD,)
        ).fetchall()
    assert keys == []


# ------------------------------------------------------------------ finding 2


def test_a_write_share_does_not_expose_the_owner_s_other_blobs(team: Team) -> None:
    """Bob names alice's blob (hash learnt elsewhere) in a replacement of the session he may write: still unreadable."""
    with team.raw(team.bob, autocommit=False) as conn:
        conn.execute("SELECT set_config('sessionstore.owner', %s, true)", (team.alice,))
        planted = _seen(
            conn,
            "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
            "created_at) VALUES (%s, 'toolu_planted', 'spilled', 'p', %s, 1, 0) RETURNING 1",
            (team.write_shared, team.blob),
        )
        stolen = _seen(conn, "SELECT data FROM blobs WHERE sha256 = %s", (team.blob,))
        conn.rollback()
    assert stolen is None or stolen == "InsufficientPrivilege", f"bob read the blob (planted: {planted})"


def test_a_write_share_cannot_plant_a_blob_under_the_owner_s_key(team: Team) -> None:
    """A blob written into alice's key by a share must hold what its key says (no poisoning her later spills)."""
    with team.raw(team.bob, autocommit=False) as conn:
        conn.execute("SELECT set_config('sessionstore.owner', %s, true)", (team.alice,))
        planted = _seen(
            conn,
            "INSERT INTO blobs (sha256, size, compression, data, created_at) VALUES (%s, 3, 'none', 'bad', 0) "
            "RETURNING 1",
            ("0" * 64,),
        )
        conn.rollback()
    assert planted == "InsufficientPrivilege"


def test_the_owner_and_a_read_share_still_read_spills(team: Team) -> None:
    from sessionstore.storage.codecs.blobs import get_blob

    with SessionStore.open(team.url(team.alice)) as store:
        assert get_blob(store.db, team.blob) == SPILLED


def test_a_share_writer_s_own_spill_is_readable_by_it_the_owner_and_a_reader(team: Team) -> None:
    """What a write share spills into the shared session (its bytes checked against their key) stays readable."""
    from sessionstore.storage.codecs.blobs import get_blob, put_blob

    data = b"bob's tool output " * 500
    with SessionStore.open(team.url(team.bob)) as store:

        def spill(db: Any) -> str:
            sha = put_blob(db, data)
            db.execute(
                "INSERT INTO replacements (session_id, tool_use_id, kind, replacement, blob_sha256, original_size, "
                "created_at) VALUES (:s, :t, 'spilled', 'preview', :sha, :n, 0)",
                {"s": team.write_shared, "t": f"toolu_bob_{team.superuser_owned}", "sha": sha, "n": len(data)},
            ).close()
            return sha

        sha = store.db.run_write(spill, session_id=team.write_shared)
        assert get_blob(store.db, sha) == data
    with SessionStore.open(team.url(team.alice)) as store:
        assert get_blob(store.db, sha) == data


def test_db_upgrade_as_a_superuser_says_what_that_means(team: Team, capsys: pytest.CaptureFixture[str]) -> None:
    shown = run_cli(capsys, "db", "upgrade", "--db", team.url(None))
    assert shown.code == 0 and "database at" in shown.out
    if team.superuser_owned:
        assert len(shown.err.splitlines()) == 1 and "row-level security does not bind" in shown.err
        assert "sessionstore db upgrade" in shown.err
    else:
        assert "superuser" not in shown.err


# ------------------------------------------------------------------ finding 3


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE messages SET content_json = '\"rewritten\"' WHERE session_id = %s",
        "DELETE FROM messages WHERE session_id = %s",
        "UPDATE sessions SET title = 'rewritten' WHERE id = %s",
        "UPDATE sessions SET cwd = '/elsewhere' WHERE id = %s",
        "DELETE FROM compactions WHERE session_id = %s",
    ],
)
def test_a_write_share_cannot_rewrite_history(team: Team, statement: str) -> None:
    before = _alice_rows(team)
    with team.raw(team.bob) as conn:
        done = _seen(conn, statement + " RETURNING 1", (team.write_shared,))
    assert done is None or done == "InsufficientPrivilege", done
    assert _alice_rows(team) == before


def test_a_write_share_still_appends_and_compacts(team: Team) -> None:
    with SessionStore.open(team.url(team.bob)) as store:
        session = store.get(team.write_shared)
        session.append({"role": "user", "content": "appended by bob"})
        session.append({"role": "assistant", "content": [{"type": "text", "text": "fine"}]})
    with SessionStore.open(team.url(team.bob)) as store:
        texts = [m.content for m in store.get(team.write_shared).transcript()]
    assert "appended by bob" in texts


# ------------------------------------------------------------------ finding 4


@pytest.mark.parametrize("value", ["2147483647", "1"])
def test_a_person_cannot_move_a_sequence(team: Team, value: str) -> None:
    with team.raw(team.bob) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'S' AND n.nspname = 'public'"
            ).fetchall()
        ]
        assert names
        for name in names:
            assert _seen(conn, f"SELECT setval('public.{name}', {value})") == "InsufficientPrivilege", name
            assert _seen(conn, f"SELECT last_value FROM public.{name}") == "InsufficientPrivilege", name


# ------------------------------------------------------------------ finding 5


def test_grant_and_revoke_by_a_person_fail_in_one_line(team: Team, capsys: pytest.CaptureFixture[str]) -> None:
    outsider = create_role(PG_URL or "", "tmout")
    try:
        granted = run_cli(capsys, "db", "grant", outsider, "--db", team.url(team.bob))
        assert granted.code == 1 and granted.out == "", granted
        assert len(granted.err.splitlines()) == 1 and "Traceback" not in granted.err
        assert team.admin_one("SELECT has_table_privilege(%s, 'public.sessions', 'SELECT')", (outsider,)) == (False,)
        revoked = run_cli(capsys, "db", "revoke", team.alice, "--db", team.url(team.bob))
        assert revoked.code == 1 and revoked.out == "", revoked
        assert len(revoked.err.splitlines()) == 1 and "Traceback" not in revoked.err
        assert team.admin_one("SELECT has_table_privilege(%s, 'public.sessions', 'SELECT')", (team.alice,)) == (True,)
    finally:
        drop_role(PG_URL or "", outsider)


# ------------------------------------------------------------------ finding 7


def _cli(*args: str, env: dict[str, str] | None = None) -> Any:
    import subprocess

    exe = Path(sys.executable).parent / "sessionstore"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=120)


def test_a_revoked_role_gets_one_line(team: Team) -> None:
    for role in (team.dave, team.carol):
        result = _cli("sessions", "--db", team.url(role))
        assert result.returncode == 1, result
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
        assert "db grant" in result.stderr


def test_no_lock_bob_can_take_holds_alice_s_search(team: Team) -> None:
    """Bob holds every advisory key the store ever used for alice's sessions; her search and usage still run
    (a lock wait would end in lock_timeout here)."""
    with SessionStore.open(team.url(team.alice)) as store:
        store.get(team.secret_session).append({"role": "user", "content": f"{WORD} again"})
    with team.raw(team.bob) as conn:
        for key in (735502, 735527):
            for sid in (team.secret_session, team.read_shared, team.write_shared):
                conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (key, sid))
        env = {**os.environ, "PGOPTIONS": "-c lock_timeout=3000"}
        found = _cli("search", WORD, "--json", "--db", team.url(team.alice), env=env)
        assert found.returncode == 0, found.stderr
        hits = json.loads(found.stdout)["hits"]
        secret = [h for h in hits if team.secret_session in h["open"]]
        assert any("again" in json.dumps(h) for h in secret), "the message appended just now is found"
        usage = _cli("usage", "--json", "--db", team.url(team.alice), env=env)
        assert usage.returncode == 0, usage.stderr


def test_bob_sees_nothing_of_alice_s_secret(team: Team) -> None:
    with SessionStore.open(team.url(team.bob)) as store:
        assert store.search(WORD) == []
        assert SECRET not in json.dumps(
            [m.content for s in store.list(limit=100) for m in store.get(s["id"]).transcript()]
        )


#: Rows of search_docs (table and TOAST: what costs, a text read and matched) this backend has read and not yet
#: reported (PostgreSQL keeps a backend's counts pending across transactions, so a call is measured as a difference).
_READ = (
    "SELECT sum(pg_stat_get_xact_tuples_fetched(r.oid) + pg_stat_get_xact_tuples_returned(r.oid)) FROM pg_class r "
    "WHERE r.oid IN (SELECT 'search_docs'::regclass UNION SELECT reltoastrelid FROM pg_class "
    "WHERE oid = 'search_docs'::regclass)"
)


def _rows_read(conn: Any, word: str) -> int:
    """Rows of search_docs bob's backend reads for one call of the search function."""
    with conn.transaction():
        (before,) = conn.execute(_READ).fetchone()
        conn.execute("SELECT count(*) FROM sessionstore_search_window(array[%s], 500, 20, null, null, null)", (word,))
        (after,) = conn.execute(_READ).fetchone()
    return int(after or 0) - int(before or 0)


def test_search_costs_what_the_caller_may_read_not_what_others_hold(team: Team) -> None:
    """With a word in 1,500 of alice's messages, bob's search reads about the rows he may read, whatever the
    word (it read every row of the index, and timing told him whether others' sessions hold a word)."""
    with SessionStore.open(team.url(team.alice)) as store:
        session = store.create_session(title="bulk")
        for i in range(1500):
            session.append({"role": "user", "content": f"message {i}: quokkafish " + "lorem ipsum dolor " * 30})
        assert store.search("quokkafish")
    with team.raw(None) as conn:
        conn.execute("ANALYZE")
    with team.raw(team.bob) as conn:
        (readable,) = conn.execute("SELECT count(*) FROM search_docs").fetchone()
        for word in ("quokkafish", "nothingxyzq", "quokka"):
            assert _rows_read(conn, word) <= 4 * readable + 50, word


# ------------------------------------------------------------ finding 6: what a member can learn, as docs/teams.md says

TEAMS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "teams.md"


def _docs_learns() -> str:
    """The teams page's bullet on what a member can learn of another's sessions."""
    text = TEAMS_PAGE.read_text()
    start = text.index("- **What another member can learn.**")
    end = text.index("\n- **", start + 5)
    return " ".join(text[start:end].split())


def _removed_by_policy(conn: Any, sql: str, params: tuple[Any, ...]) -> int:
    """Rows a plan read and its filters removed (what EXPLAIN ANALYZE shows a member), over the whole plan."""
    conn.execute("SET enable_seqscan = off")
    (doc,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()

    def walk(node: dict[str, Any]) -> int:
        own = int(node.get("Rows Removed by Filter", 0)) * int(node.get("Actual Loops", 1))
        return own + sum(walk(child) for child in node.get("Plans", []))

    return walk(doc[0]["Plan"])


def test_the_docs_state_what_a_member_learns_and_it_holds(team: Team) -> None:
    """Each channel docs/teams.md names shows what it says (counts and existence), and none shows a row."""
    stated = _docs_learns()
    for channel in ("EXPLAIN", "duplicate key", "pg_stat_user_tables", "session ids", "host names", "import paths"):
        assert channel in stated, channel
    for hidden in ("message", "title", "spilled result", "search"):
        assert hidden in stated, hidden
    prefix = team.secret_session[:2]
    upper = prefix[0] + chr(ord(prefix[1]) + 1)
    with team.raw(team.bob) as conn:
        # EXPLAIN: a session id's existence, by prefix (rows a policy removed are counted; none is returned).
        rows = conn.execute("SELECT id FROM sessions WHERE id >= %s AND id < %s", (prefix, upper)).fetchall()
        assert team.secret_session not in {r[0] for r in rows}
        assert _removed_by_policy(conn, "SELECT id FROM sessions WHERE id >= %s AND id < %s", (prefix, upper)) >= 1
        # A duplicate key: the id exists.
        duplicate = _seen(
            conn,
            "INSERT INTO sessions (id, context_window, created_at, updated_at) VALUES (%s, 1, 0, 0) RETURNING 1",
            (team.secret_session,),
        )
        assert duplicate == "UniqueViolation"
        # Totals per table, for every role that can connect.
        (live,) = conn.execute(
            "SELECT n_live_tup + n_dead_tup + n_tup_ins FROM pg_stat_user_tables WHERE relname = 'messages'"
        ).fetchone()
        assert live is not None
        # Never the content: no message, title, spilled result or search hit of the unshared session.
        assert conn.execute(
            "SELECT count(*) FROM messages WHERE session_id = %s", (team.secret_session,)
        ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sessions WHERE title = %s", ("alice's keys",)).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM blobs WHERE sha256 = %s", (team.blob,)).fetchone() == (0,)
        assert _seen(conn, "SELECT last_value FROM compactions_id_seq") == "InsufficientPrivilege"


# ------------------------------------------------------------------ import locks (revision 0023)

#: What a member holds on import_locks: rows in and locked (UPDATE of `owner` alone, for SELECT ... FOR UPDATE).
IMPORT_LOCK_PRIVILEGES = {"SELECT": True, "INSERT": True, "UPDATE": False, "DELETE": False, "TRUNCATE": False}


def _import_lock_privileges(team: Team, role: str) -> dict[str, bool]:
    """`role`'s privileges on import_locks: per verb on the table, and UPDATE per column."""
    with team.raw(None) as conn:
        held = {
            verb: bool(
                conn.execute("SELECT has_table_privilege(%s, 'public.import_locks', %s)", (role, verb)).fetchone()[0]
            )
            for verb in IMPORT_LOCK_PRIVILEGES
        }
        for column in ("owner", "source", "name"):
            (held[f"UPDATE ({column})"],) = conn.execute(
                "SELECT has_column_privilege(%s, 'public.import_locks', %s, 'UPDATE')", (role, column)
            ).fetchone()
        (held["row security forced"],) = conn.execute(
            "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE oid = 'public.import_locks'::regclass"
        ).fetchone()
    return held


def test_a_member_locks_its_imports_and_nothing_more_granted_now_or_before_the_revision(team: Team) -> None:
    """`db grant` gives SELECT, INSERT and UPDATE of `owner` on import_locks, no DELETE, nothing to PUBLIC, a
    revoked or never granted role nothing; revision 0023 run on a store granted before it gives the same."""
    from sessionstore.storage.engine.db import make_engine
    from sessionstore.storage.engine.migrate import downgrade, upgrade

    member = {**IMPORT_LOCK_PRIVILEGES, "UPDATE (owner)": True, "UPDATE (source)": False, "UPDATE (name)": False}
    nothing = dict.fromkeys(member, False)
    expected = {
        team.bob: {**member, "row security forced": True},
        team.dave: {**nothing, "row security forced": True},
        team.carol: {**nothing, "row security forced": True},
        "public": {**nothing, "row security forced": True},
    }
    assert {role: _import_lock_privileges(team, role) for role in expected} == expected
    engine = make_engine(team.url(None if team.superuser_owned else team.owner))
    try:
        downgrade(engine, "0022")
        upgrade(engine, backup=False)
    finally:
        engine.dispose()
    assert {role: _import_lock_privileges(team, role) for role in expected} == expected
