"""Import files: every path a session's source was read from, with how much of that path is in.

One source session (a Claude Code session id, a Codex rollout id) can reach the store through
several files: the original, a backup restored elsewhere, a synced copy that grew further.
`imports` keeps one row per session (the source stream: how much of it is stored, and the file
that last fed it); `import_files` keeps one row per (source, path) with that file's own offsets,
so a lagging copy is recognised as such without being read again, and a longer copy extends the
same session. Existing `imports` rows are copied as their file's row.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from typing import Sequence

import sqlalchemy as sa
from alembic import op

BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "import_files",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("session_id", sa.String(length=36), nullable=False),
        sa.Column("bytes_done", BigInt, nullable=False),
        sa.Column("lines_done", BigInt, nullable=False),
        sa.Column("prefix_sha256", sa.String(length=64), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name=op.f("fk_import_files_session_id_sessions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("source", "path", name=op.f("pk_import_files")),
    )
    op.create_index("ix_import_files_session_id", "import_files", ["session_id"])
    op.create_index("ix_import_files_path", "import_files", ["path"])
    op.execute(
        "INSERT INTO import_files (source, path, session_id, bytes_done, lines_done, prefix_sha256, updated_at) "
        "SELECT source, path, session_id, bytes_done, lines_done, prefix_sha256, updated_at FROM imports"
    )


def downgrade() -> None:
    op.drop_index("ix_import_files_path", table_name="import_files")
    op.drop_index("ix_import_files_session_id", table_name="import_files")
    op.drop_table("import_files")
