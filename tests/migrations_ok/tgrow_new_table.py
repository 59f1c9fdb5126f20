"""Test only: a revision on top of the shipped head that adds a table and a row (and succeeds).

Loaded through an extra Alembic version location by tests/test_fault_points.py to kill
an upgrade of a filled database at each migration fault point; never shipped.
"""

from alembic import op
from alembic.script import ScriptDirectory
import sqlalchemy as sa

from sessionstore.storage.engine.migrate import MIGRATIONS_DIR

revision = "tgrow_new_table"
down_revision = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("t_grow", sa.Column("id", sa.Integer, primary_key=True))
    op.execute("INSERT INTO t_grow (id) VALUES (1)")


def downgrade() -> None:
    op.drop_table("t_grow")
