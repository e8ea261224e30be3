"""capacity reservations: running slots and queued runs a tenant holds for a time range

Revision ID: a22a0001c0de
Revises: a21b5e0c7d13
Create Date: 2026-12-01 19:00:00.000000

Read by admission on every claim (console/services/scheduling/reservations.py), written by people.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a22a0001c0de'
down_revision = 'a21b5e0c7d13'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('capacity_reservations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('tenant_id', sa.Integer(), nullable=False),
    sa.Column('running_slots', sa.Integer(), nullable=False),
    sa.Column('queued_runs', sa.Integer(), nullable=False),
    sa.Column('starts_at', sa.DateTime(), nullable=False),
    sa.Column('ends_at', sa.DateTime(), nullable=False),
    sa.Column('reason', sa.String(length=255), nullable=False),
    sa.Column('created_by', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('cancelled_at', sa.DateTime(), nullable=True),
    sa.Column('cancelled_by', sa.String(length=64), nullable=True),
    sa.ForeignKeyConstraint(['tenant_id'], ['tenants.id'], name=op.f('fk_capacity_reservations_tenant_id_tenants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_capacity_reservations'))
    )
    op.create_index('ix_capacity_reservations_ends_at', 'capacity_reservations', ['ends_at', 'starts_at'],
                    unique=False)


def downgrade():
    op.drop_index('ix_capacity_reservations_ends_at', table_name='capacity_reservations')
    op.drop_table('capacity_reservations')
