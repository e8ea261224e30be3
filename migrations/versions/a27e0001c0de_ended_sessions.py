"""ended_sessions: a logout ends that session only (and a copy of its cookie), not every session of the person

Revision ID: a27e0001c0de
Revises: a24c0001c0de
Create Date: 2026-12-04 06:00:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a27e0001c0de'
down_revision = 'a24c0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'ended_sessions',
        sa.Column('session_id', sa.String(length=32), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('ended_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_ended_sessions_user_id_users')),
        sa.PrimaryKeyConstraint('session_id', name=op.f('pk_ended_sessions')),
    )
    with op.batch_alter_table('ended_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ended_sessions_ended_at'), ['ended_at'], unique=False)


def downgrade():
    with op.batch_alter_table('ended_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ended_sessions_ended_at'))
    op.drop_table('ended_sessions')
