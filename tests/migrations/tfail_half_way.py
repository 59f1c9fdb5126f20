"""Test only: a revision on top of the shipped head that changes schema and rows, then fails half-way.

Loaded through an extra Alembic version location by tests/test_migration_rollback.py,
never shipped (it is not under migrations/versions).
"""

from alembic import op
from alembic.script import ScriptDirectory
import sqlalchemy as sa

from sessionstore.storage.engine.migrate import MIGRATIONS_DIR

revision = "tfail_half_way"
down_revision = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
branch_labels = None
depends_on = None


class HalfWay(RuntimeError):
    """Raised after the revision has changed tables and rows."""


def upgrade() -> None:
    op.add_column("sessions", sa.Column("t_extra", sa.String(20), nullable=True))
    op.execute("UPDATE sessions SET title = 'rewritten', t_extra = 'x'")
    op.execute("DELETE FROM view_entries")
    op.drop_table("session_memory")
    op.create_table("t_half", sa.Column("id", sa.Integer, primary_key=True))
    op.execute("INSERT INTO t_half (id) VALUES (1)")
    raise HalfWay("the test revision fails half-way, after changing tables and rows")


def downgrade() -> None:
    pass
