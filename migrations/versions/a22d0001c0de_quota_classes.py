"""quota classes: named limits on the running runs of their tasks, across tasks and tenants

Revision ID: a22d0001c0de
Revises: a22b0001c0de
Create Date: 2026-12-01 21:45:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a22d0001c0de'
down_revision = 'a22b0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('quota_classes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('max_running', sa.Integer(), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.CheckConstraint('max_running >= 1', name=op.f('ck_quota_classes_max_running_positive')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_quota_classes')),
    sa.UniqueConstraint('name', name=op.f('uq_quota_classes_name'))
    )
    # A plain nullable column: SQLite adds it without copying the tasks table.
    op.add_column('tasks', sa.Column('quota_class', sa.String(length=64), nullable=True))
    op.create_index(op.f('ix_tasks_quota_class'), 'tasks', ['quota_class'], unique=False)


def downgrade():
    op.drop_index(op.f('ix_tasks_quota_class'), table_name='tasks')
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('quota_class')
    op.drop_table('quota_classes')
