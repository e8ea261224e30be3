"""saga workflows

Revision ID: c3a1f0d2e4b6
Revises: a1c5e77195a0
Create Date: 2026-12-01 15:37:53.520833

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'c3a1f0d2e4b6'
down_revision = 'a1c5e77195a0'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('workflows',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('tenant_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('idempotency_key', sa.String(length=200), nullable=False),
    sa.Column('status', sa.String(length=24), nullable=False),
    sa.Column('step_count', sa.Integer(), nullable=False),
    sa.Column('current_step', sa.Integer(), nullable=False),
    sa.Column('failed_step', sa.Integer(), nullable=True),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('created_by', sa.String(length=80), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_workflows_tenant_id_tenants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workflows')),
    sa.UniqueConstraint('tenant_id', 'idempotency_key', name=op.f('uq_workflows_tenant_id'))
    )
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.create_index('ix_workflows_status_updated_at', ['status', 'updated_at'], unique=False)
        batch_op.create_index('ix_workflows_tenant_id_id', ['tenant_id', 'id'], unique=False)

    op.create_table('workflow_steps',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('workflow_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('handler', sa.String(length=120), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('policy', sa.JSON(), nullable=True),
    sa.Column('compensation_status', sa.String(length=24), nullable=True),
    sa.Column('compensation_started_at', sa.DateTime(), nullable=True),
    sa.Column('compensation_finished_at', sa.DateTime(), nullable=True),
    sa.Column('note', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['workflow_id'], ['workflows.id'], name=op.f('fk_workflow_steps_workflow_id_workflows')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workflow_steps')),
    sa.UniqueConstraint('workflow_id', 'position', name=op.f('uq_workflow_steps_workflow_id'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('workflow_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('workflow_step', sa.Integer(), nullable=True))
        batch_op.create_index('ix_runs_workflow_id_workflow_step', ['workflow_id', 'workflow_step'], unique=True,
                              sqlite_where=sa.text('workflow_id IS NOT NULL'),
                              postgresql_where=sa.text('workflow_id IS NOT NULL'))



def downgrade():
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_workflow_id_workflow_step')
        batch_op.drop_column('workflow_step')
        batch_op.drop_column('workflow_id')

    op.drop_table('workflow_steps')
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.drop_index('ix_workflows_tenant_id_id')
        batch_op.drop_index('ix_workflows_status_updated_at')

    op.drop_table('workflows')
