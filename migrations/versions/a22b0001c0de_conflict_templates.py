"""conflict templates: named planner rules that tasks reference, versioned like retry policies

Revision ID: a22b0001c0de
Revises: a22a0001c0de
Create Date: 2026-12-01 21:00:00.000000

The default template is seeded at start from config/tasks/default_policy.yaml (console/services/scheduling/templates.py),
not here: migrations never import app code.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a22b0001c0de'
down_revision = 'a22a0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('conflict_templates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=False),
    sa.Column('current_version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_conflict_templates')),
    sa.UniqueConstraint('name', name=op.f('uq_conflict_templates_name'))
    )
    op.create_table('conflict_template_versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('template_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('rules', sa.JSON(), nullable=False),
    sa.Column('created_by', sa.String(length=80), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('tasks_changed', sa.Integer(), server_default='0', nullable=False),
    sa.ForeignKeyConstraint(['template_id'], ['conflict_templates.id'],
                            name=op.f('fk_conflict_template_versions_template_id_conflict_templates')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_conflict_template_versions')),
    sa.UniqueConstraint('template_id', 'version', name=op.f('uq_conflict_template_versions_template_id'))
    )
    # Plain nullable columns: SQLite adds them without copying the tasks table.
    op.add_column('tasks', sa.Column('template_id', sa.Integer(), nullable=True))
    op.add_column('tasks', sa.Column('inherits', sa.JSON(), nullable=True))
    op.create_index(op.f('ix_tasks_template_id'), 'tasks', ['template_id'], unique=False)


def downgrade():
    op.drop_index(op.f('ix_tasks_template_id'), table_name='tasks')
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('inherits')
        batch_op.drop_column('template_id')
    op.drop_table('conflict_template_versions')
    op.drop_table('conflict_templates')
