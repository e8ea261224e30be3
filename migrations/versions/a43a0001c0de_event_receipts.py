"""event_receipts: what an event sent with an idempotency key answered for a task it did not fire

Revision ID: a43a0001c0de
Revises: a42a0001c0de
Create Date: 2026-12-07 09:10:00.000000

A task paused or debounced at an event's first send fired when the same event was sent again (no run held the key);
the answer is kept per (tenant, task, key) so the second send is a duplicate.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a43a0001c0de'
down_revision = 'a42a0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'event_receipts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('tenant_id', sa.Integer(), nullable=False),
        sa.Column('task_id', sa.Integer(), nullable=False),
        sa.Column('idempotency_key', sa.String(length=200), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('received_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['task_id'], ['tasks.id']),
        sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('tenant_id', 'task_id', 'idempotency_key'))
    op.create_index('ix_event_receipts_received_at', 'event_receipts', ['received_at'])


def downgrade():
    op.drop_index('ix_event_receipts_received_at', table_name='event_receipts')
    op.drop_table('event_receipts')
