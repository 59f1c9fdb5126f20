"""A team store for two people on a brand-new PostgreSQL database: an owner role set it up and granted roles A and B.

Row-level security binds ordinary roles only (a superuser bypasses it), so the ownership tests need real
LOGIN roles on a store the way the README sets one up: the owner runs `db upgrade`, then `db grant` per person.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, NamedTuple

import psycopg

from sessionstore.cli.app import main

from .pgadmin import admin_url, create_role, drop_role, fresh_database, url_for
from .teamstore import break_policy


class GrantedStore(NamedTuple):
    """The store's database, the role owning its tables, and the two granted roles."""

    database: str
    owner: str
    a: str
    b: str


@contextmanager
def granted_store(base: str, prefix: str) -> Iterator[GrantedStore]:
    """A new database owned by a new owner role that ran `db upgrade` and granted new roles A and B.

    Roles are named `prefix` + own/a/b and a uuid suffix; the database and the roles are dropped afterwards.
    """
    owner, a, b = create_role(base, f"{prefix}own"), create_role(base, f"{prefix}a"), create_role(base, f"{prefix}b")
    try:
        with fresh_database(base) as name:
            with psycopg.connect(url_for(admin_url(base), database=name), autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{name}" OWNER TO "{owner}"')
                conn.execute(f'ALTER SCHEMA public OWNER TO "{owner}"')
            as_owner = url_for(base, database=name, user=owner)
            for args in (["db", "upgrade"], ["db", "grant", a], ["db", "grant", b]):
                try:
                    main([*args, "--db", as_owner])
                except SystemExit as exc:
                    assert exc.code in (0, None), args
            break_policy(base, name)
            yield GrantedStore(name, owner, a, b)
    finally:
        for role in (a, b, owner):
            drop_role(base, role)
