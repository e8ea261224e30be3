"""api_tokens.expires_at: a token may be issued for a time (30 days, 90 days, a year) and stops working then

Revision ID: a33e0001c0de
Revises: a31e0001c0de
Create Date: 2026-12-05 01:40:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a33e0001c0de'
down_revision = 'a31e0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_column('expires_at')
