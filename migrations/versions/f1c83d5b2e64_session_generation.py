"""users.session_generation: logout, a password or role change and disabling end every session on the server

Revision ID: f1c83d5b2e64
Revises: e5a9c0d31f27
Create Date: 2026-12-01 16:10:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'f1c83d5b2e64'
down_revision = 'e5a9c0d31f27'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_generation', sa.Integer(), server_default='0', nullable=False))


def downgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('session_generation')
