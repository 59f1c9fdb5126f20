"""Bench helper: a PostgreSQL store owned by an ordinary role, so row-level security applies to it.

A superuser bypasses row-level security, so a bench run as the superuser the URL names would not
measure it. This creates a LOGIN role (no superuser, no BYPASSRLS) and a schema it owns, yields a
sessionstore URL connecting as that role into that schema, and drops both afterwards.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from sqlalchemy.engine import make_url


def libpq(url: str) -> str:
    """The psycopg (libpq) form of a sessionstore URL."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@contextmanager
def role_store(admin_url: str, *, forced: bool = True) -> Iterator[str]:
    """A URL to a new store in its own schema, as its own ordinary role.

    With `forced=False`, after the upgrade the tables stop forcing row-level security on their
    owner: the same schema, data and code, without the policies (the baseline of bench/rls.py).
    """
    import psycopg

    from sessionstore import SessionStore

    tag = os.urandom(5).hex()
    role, schema = f"bench_role_{tag}", f"bench_{tag}"
    with psycopg.connect(libpq(admin_url), autocommit=True) as conn:
        # pg_trgm, as an administrator creates it once per database: the role cannot, and search without it
        # would measure a store that reads its whole index table for every substring.
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
        except psycopg.Error as exc:
            print(f"bench: pg_trgm not created ({exc}); substring search will scan", file=sys.stderr)
        conn.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOBYPASSRLS')
        conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"')
    base = make_url(admin_url.split("?")[0]).set(username=role, password=None)
    url = f"{base.render_as_string(hide_password=False)}?options=-csearch_path%3D{schema}"
    try:
        SessionStore.open(url).close()
        if not forced:
            with psycopg.connect(libpq(url), autocommit=True) as conn:
                tables = [
                    r[0]
                    for r in conn.execute(
                        "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
                        "AND relkind = 'r' AND relforcerowsecurity"
                    )
                ]
                for table in tables:
                    conn.execute(f'ALTER TABLE "{table}" NO FORCE ROW LEVEL SECURITY')
        yield url
    finally:
        with psycopg.connect(libpq(admin_url), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP OWNED BY "{role}" CASCADE')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')
