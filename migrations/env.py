"""Alembic environment: one transaction for the whole upgrade, on the caller's connection when given."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from sessionstore.storage.engine.config import default_db_url
from sessionstore.storage.engine.db import make_engine
from sessionstore.storage.engine.models import Base, include_name

config = context.config
target_metadata = Base.metadata


def _configure_and_run(connection: Connection) -> None:
    """Run migrations inside one transaction; PostgreSQL takes an advisory lock first."""
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=include_name,
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        if connection.dialect.name != "postgresql":
            context.run_migrations()
            return
        connection.execute(
            text("SELECT pg_advisory_xact_lock(735501)")
        )  # MIGRATION_LOCK in sessionstore.storage.engine.migrate
        forced = _unforce_row_security(connection)
        context.run_migrations()
        for table in forced:
            connection.execute(text(f'ALTER TABLE IF EXISTS "{table}" FORCE ROW LEVEL SECURITY'))


def _unforce_row_security(connection) -> list[str]:
    """Lift FORCE ROW LEVEL SECURITY for the migration's transaction, so the owning role's data
    migrations see every owner's rows; the caller forces it again before the commit."""
    forced = [
        row[0]
        for row in connection.execute(
            text(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
                "AND c.relkind = 'r' AND c.relforcerowsecurity"
            )
        )
    ]
    for table in forced:
        connection.execute(text(f'ALTER TABLE "{table}" NO FORCE ROW LEVEL SECURITY'))
    return forced


def run_migrations_offline() -> None:
    """Emit SQL for a URL without connecting (`alembic upgrade --sql`)."""
    url = config.get_main_option("sqlalchemy.url") or default_db_url()
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Use the connection handed in by sessionstore, else connect to the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or default_db_url()
    engine = make_engine(url)
    with engine.connect() as conn:
        _configure_and_run(conn)
        conn.commit()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
