"""runbooks: executions with their log, changes, backups and liveness; admins' approval rules per runbook

Revision ID: b2a6c0d4e8f1
Revises: c3a1f0d2e4b6
Create Date: 2026-12-01 15:37:51.175812

The runbook_executions table was created by the first schema and never written, so it is made again in
the shape an execution needs (dry-run, reason, status, log, heartbeat, the approver's preview). What an
execution changed, and the rows as they were, are rows of their own, appended in the change's transaction.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'b2a6c0d4e8f1'
down_revision = 'c3a1f0d2e4b6'
branch_labels = None
depends_on = None


def _executions():
    op.create_table('runbook_executions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('runbook', sa.String(length=60), nullable=False),
    sa.Column('tenant_id', sa.Integer(), nullable=True),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('dry_run', sa.Boolean(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('log', sa.Text(), nullable=False),
    sa.Column('changes_total', sa.Integer(), nullable=False),
    sa.Column('requested_by', sa.String(length=120), nullable=False),
    sa.Column('requested_by_id', sa.Integer(), nullable=True),
    sa.Column('approval_id', sa.Integer(), nullable=True),
    sa.Column('worker_id', sa.String(length=120), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('queued_at', sa.DateTime(), nullable=True),
    sa.Column('preview_started_at', sa.DateTime(), nullable=True),
    sa.Column('previewed_at', sa.DateTime(), nullable=True),
    sa.Column('started_at', sa.DateTime(), nullable=True),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['approval_id'], ['approvals.id'], name=op.f('fk_runbook_executions_approval_id_approvals')),
    sa.ForeignKeyConstraint(['requested_by_id'], ['users.id'], name=op.f('fk_runbook_executions_requested_by_id_users')),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_runbook_executions_tenant_id_tenants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runbook_executions'))
    )
    with op.batch_alter_table('runbook_executions', schema=None) as batch_op:
        batch_op.create_index('ix_runbook_executions_runbook_id', ['runbook', 'id'], unique=False)
        batch_op.create_index('ix_runbook_executions_status_heartbeat_at', ['status', 'heartbeat_at'], unique=False)
        batch_op.create_index('ix_runbook_executions_tenant_id_id', ['tenant_id', 'id'], unique=False)


def upgrade():
    op.drop_table('runbook_executions')
    _executions()
    op.create_table('runbook_policies',
    sa.Column('runbook', sa.String(length=60), nullable=False),
    sa.Column('requires_approval', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('updated_by', sa.String(length=120), nullable=False),
    sa.PrimaryKeyConstraint('runbook', name=op.f('pk_runbook_policies'))
    )
    op.create_table('runbook_backups',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('execution_id', sa.Integer(), nullable=False),
    sa.Column('object', sa.String(length=40), nullable=False),
    sa.Column('object_id', sa.String(length=200), nullable=False),
    sa.Column('row', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['execution_id'], ['runbook_executions.id'], name=op.f('fk_runbook_backups_execution_id_runbook_executions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runbook_backups'))
    )
    with op.batch_alter_table('runbook_backups', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runbook_backups_execution_id'), ['execution_id'], unique=False)
    op.create_table('runbook_changes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('execution_id', sa.Integer(), nullable=False),
    sa.Column('planned', sa.Boolean(), nullable=False),
    sa.Column('object', sa.String(length=40), nullable=False),
    sa.Column('object_id', sa.String(length=200), nullable=False),
    sa.Column('field', sa.String(length=80), nullable=False),
    sa.Column('before', sa.JSON(), nullable=True),
    sa.Column('after', sa.JSON(), nullable=True),
    sa.ForeignKeyConstraint(['execution_id'], ['runbook_executions.id'], name=op.f('fk_runbook_changes_execution_id_runbook_executions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runbook_changes'))
    )
    with op.batch_alter_table('runbook_changes', schema=None) as batch_op:
        batch_op.create_index('ix_runbook_changes_execution_id_planned_id', ['execution_id', 'planned', 'id'], unique=False)


def downgrade():
    op.drop_table('runbook_changes')
    op.drop_table('runbook_backups')
    op.drop_table('runbook_policies')
    op.drop_table('runbook_executions')
    op.create_table('runbook_executions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('runbook', sa.String(length=120), nullable=False),
    sa.Column('tenant_id', sa.Integer(), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('dead_letter_id', sa.Integer(), nullable=True),
    sa.Column('approval_id', sa.Integer(), nullable=True),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('output', sa.Text(), nullable=True),
    sa.Column('started_by', sa.String(length=80), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=True),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['approval_id'], ['approvals.id'], name=op.f('fk_runbook_executions_approval_id_approvals')),
    sa.ForeignKeyConstraint(['dead_letter_id'], ['dead_letters.id'], name=op.f('fk_runbook_executions_dead_letter_id_dead_letters')),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_runbook_executions_run_id_runs')),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_runbook_executions_tenant_id_tenants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runbook_executions'))
    )
