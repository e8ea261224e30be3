"""delivery: channel settings, delivery attempts, work-order close notes and page indexes

Revision ID: 60671582e913
Revises: aa3248a65e19
Create Date: 2026-11-29 12:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '60671582e913'
down_revision = 'aa3248a65e19'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('channel_settings',
    sa.Column('name', sa.String(length=32), nullable=False),
    sa.Column('url', sa.String(length=500), nullable=True),
    sa.Column('secret', sa.String(length=500), nullable=True),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('updated_by', sa.String(length=80), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_channel_settings'))
    )
    op.create_table('deliveries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('outbox_id', sa.Integer(), nullable=False),
    sa.Column('channel', sa.String(length=32), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('duration_ms', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['outbox_id'], ['outbox.id'], name=op.f('fk_deliveries_outbox_id_outbox')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deliveries'))
    )
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.create_index('ix_deliveries_channel_id', ['channel', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_deliveries_outbox_id'), ['outbox_id'], unique=False)

    with op.batch_alter_table('work_orders', schema=None) as batch_op:
        batch_op.add_column(sa.Column('closed_by', sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column('close_note', sa.Text(), nullable=True))
        batch_op.create_index('ix_work_orders_status_id', ['status', 'id'], unique=False)
        batch_op.create_index('ix_work_orders_tenant_status_id', ['tenant_id', 'status', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_work_orders_created_at'), ['created_at'], unique=False)

    with op.batch_alter_table('dead_letters', schema=None) as batch_op:
        batch_op.create_index('ix_dead_letters_work_order_id_status', ['work_order_id', 'status'], unique=False)
        batch_op.create_index('ix_dead_letters_work_order_id_id', ['work_order_id', 'id'], unique=False)

    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.create_index('ix_outbox_kind_delivered_at', ['kind', 'delivered_at'], unique=False)


def downgrade():
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_kind_delivered_at')

    with op.batch_alter_table('dead_letters', schema=None) as batch_op:
        batch_op.drop_index('ix_dead_letters_work_order_id_id')
        batch_op.drop_index('ix_dead_letters_work_order_id_status')

    with op.batch_alter_table('work_orders', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_work_orders_created_at'))
        batch_op.drop_index('ix_work_orders_tenant_status_id')
        batch_op.drop_index('ix_work_orders_status_id')
        batch_op.drop_column('close_note')
        batch_op.drop_column('closed_by')

    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deliveries_outbox_id'))
        batch_op.drop_index('ix_deliveries_channel_id')

    op.drop_table('deliveries')
    op.drop_table('channel_settings')
