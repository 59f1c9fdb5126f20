"""Alembic environment: one transaction for the whole upgrade, on the caller's connection when given."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from sessionstore.storage.config import default_db_url
from sessionstore.storage.db import make_engine
from sessionstore.storage.models import Base, include_name

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
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(735501)")
            )  # MIGRATION_LOCK in sessionstore.storage.migrate
        context.run_migrations()


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
