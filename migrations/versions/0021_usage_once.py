"""Each API response counted once across sessions: forks, continuations and copies share their responses.

A fork (and a local continuation, which is a fork) copies its view's messages with their response
ids and usage; a Claude Code resume writes a session's lines again under a new session id. Counted
per session, each copy was spend that never happened. From this revision a response is known across
sessions by its *identity* (`usage_responses.identity`: the API response id; an id an importer mints
per line, or the message uuid of a response without an id, with the timestamp of its first piece, so
that two unrelated Codex rollouts stay apart), indexed; one row per identity is `counted` (summed in
`usage_rollup`), every other copy is recorded uncounted and takes over when that session is deleted.

The usage tables are derived data: the upgrade empties them, and the next usage report counts every
session again (the oldest session first, so a response stays with the session that recorded it).

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DERIVED = ("usage_rollup", "usage_responses", "usage_marks", "usage_state")


def upgrade() -> None:
    for table in DERIVED:
        op.execute(f"DELETE FROM {table}")
    with op.batch_alter_table("usage_responses") as batch:
        batch.add_column(sa.Column("identity", sa.String(length=250), nullable=False, server_default=""))
        batch.add_column(sa.Column("counted", sa.Boolean(), nullable=False, server_default=sa.text("true")))
    op.create_index("ix_usage_responses_identity", "usage_responses", ["identity"], unique=False)


def downgrade() -> None:
    for table in DERIVED:
        op.execute(f"DELETE FROM {table}")
    op.drop_index("ix_usage_responses_identity", table_name="usage_responses")
    with op.batch_alter_table("usage_responses") as batch:
        batch.drop_column("counted")
        batch.drop_column("identity")
