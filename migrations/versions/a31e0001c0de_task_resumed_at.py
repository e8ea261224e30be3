"""tasks.resumed_at: the firings a paused task skipped are neither caught up nor counted missed once it resumes

Revision ID: a31e0001c0de
Revises: a27e0001c0de
Create Date: 2026-12-04 20:40:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a31e0001c0de'
down_revision = 'a27e0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('resumed_at', sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('resumed_at')
