"""work_order_notes: people's notes on a work order (what was tried, found, handed over)

Revision ID: a45a0001c0de
Revises: a44a0001c0de
Create Date: 2026-12-07 12:30:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a45a0001c0de'
down_revision = 'a44a0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'work_order_notes',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('work_order_id', sa.Integer(), nullable=False),
        sa.Column('author', sa.String(length=80), nullable=False),
        sa.Column('author_id', sa.Integer(), nullable=True),
        sa.Column('body', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['author_id'], ['users.id']),
        sa.ForeignKeyConstraint(['work_order_id'], ['work_orders.id']),
        sa.PrimaryKeyConstraint('id'))
    op.create_index('ix_work_order_notes_work_order_id', 'work_order_notes', ['work_order_id'])


def downgrade():
    op.drop_index('ix_work_order_notes_work_order_id', table_name='work_order_notes')
    op.drop_table('work_order_notes')
