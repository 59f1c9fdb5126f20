"""Import lookups: an index on imports.source_key (a source tool's session id names a session)
and one on imports.path (`watch` finds a file's offsets by its path on every change).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 14:30:00
"""
from __future__ import annotations

from typing import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_imports_source_key", "imports", ["source_key"], unique=False)
    op.create_index("ix_imports_path", "imports", ["path"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_imports_path", table_name="imports")
    op.drop_index("ix_imports_source_key", table_name="imports")
