"""runs.wait_reason: why a pending run was last put off (capacity, window), in words for the run page

Revision ID: a17a0001c0de
Revises: a21a7e4c9d10
Create Date: 2026-12-10 10:00:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a17a0001c0de'
down_revision = 'a21a7e4c9d10'
branch_labels = None
depends_on = None


def upgrade():
    # A nullable column with no default: SQLite adds it in place, without copying the runs table.
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('wait_reason', sa.String(length=255), nullable=True))


def downgrade():
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('wait_reason')
