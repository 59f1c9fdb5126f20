"""Test-only PostgreSQL administration: brand-new databases and real login roles, dropped afterwards.

Superusers bypass row-level security, so ownership is only proven with ordinary roles; a schema
of the shared test database is not a new database (pg_trgm is already there), so the fresh
upgrade is only proven on a database created for the test.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Any, Iterator

from sqlalchemy.engine import make_url


def admin_url(base: str) -> str:
    """The psycopg (libpq) form of the superuser URL the tests were given."""
    return base.replace("postgresql+psycopg://", "postgresql://").split("?")[0]


def url_for(base: str, *, database: str | None = None, user: str | None = None) -> str:
    """`base` (a sessionstore URL) with another database and/or user (trust auth: no password)."""
    parsed = make_url(base.split("?")[0])
    if database:
        parsed = parsed.set(database=database)
    if user:
        parsed = parsed.set(username=user, password=None)
    return parsed.render_as_string(hide_password=False)


def _admin(base: str, database: str | None = None) -> Any:
    import psycopg

    return psycopg.connect(url_for(admin_url(base), database=database), autocommit=True)


@contextmanager
def fresh_database(base: str, *, with_trgm: bool = False) -> Iterator[str]:
    """A new, empty database (from template0, so without pg_trgm unless asked); yields its name."""
    name = "t24_" + uuid.uuid4().hex[:12]
    with _admin(base) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        if with_trgm:
            with _admin(base, name) as conn:
                conn.execute("CREATE EXTENSION pg_trgm")
        yield name
    finally:
        with _admin(base) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_role(base: str, prefix: str = "t24r") -> str:
    """A new ordinary LOGIN role (no superuser, no BYPASSRLS); the caller drops it with drop_role."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with _admin(base) as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN NOSUPERUSER NOBYPASSRLS')
    return name


def drop_role(base: str, role: str, databases: tuple[str, ...] = ()) -> None:
    """Drop `role` after dropping what it owns in each of `databases`."""
    for database in databases:
        with _admin(base, database) as conn:
            conn.execute(f'DROP OWNED BY "{role}" CASCADE')
    with _admin(base) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def admin_execute(base: str, database: str, *statements: str) -> None:
    """Run statements as the superuser in `database` (autocommit)."""
    with _admin(base, database) as conn:
        for statement in statements:
            conn.execute(statement)


def catalogue(base: str, database: str) -> dict[str, Any]:
    """What a database holds, as the superuser sees it: extensions, relations, columns, indexes,
    constraints, policies, triggers, functions, and every row of every table (as text)."""
    with _admin(base, database) as conn:
        def rows(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.execute(sql).fetchall()]

        user_ns = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'"
        out: dict[str, Any] = {
            "extensions": rows("SELECT extname FROM pg_extension ORDER BY 1"),
            "relations": rows(f"SELECT n.nspname, c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity "
                              f"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {user_ns} "
                              "ORDER BY 1, 2"),
            "columns": rows("SELECT table_name, column_name, data_type, is_nullable, column_default "
                            "FROM information_schema.columns WHERE table_schema NOT IN "
                            "('pg_catalog', 'information_schema') ORDER BY 1, 2"),
            "indexes": rows("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname NOT IN "
                            "('pg_catalog', 'information_schema') ORDER BY 1"),
            "constraints": rows(f"SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                                f"JOIN pg_namespace n ON n.oid = c.connamespace WHERE {user_ns} ORDER BY 1, 2"),
            "policies": rows("SELECT tablename, policyname, cmd, qual, with_check FROM pg_policies ORDER BY 1, 2"),
            "triggers": rows("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1"),
            "functions": rows(f"SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                              f"WHERE {user_ns} ORDER BY 1"),
        }
        tables = rows(f"SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                      f"WHERE c.relkind = 'r' AND {user_ns} ORDER BY 1, 2")
        out["rows"] = {f"{s}.{t}": rows(f'SELECT x::text FROM "{s}"."{t}" x ORDER BY 1') for s, t in tables}
    return out
