"""users.must_change_password: a password an admin reset is changed by its person before anything else

Revision ID: a44a0001c0de
Revises: a43a0001c0de
Create Date: 2026-12-07 11:20:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a44a0001c0de'
down_revision = 'a43a0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users') as batch_op:
        batch_op.add_column(sa.Column('must_change_password', sa.Boolean(), server_default=sa.false(),
                                      nullable=False))


def downgrade():
    with op.batch_alter_table('users') as batch_op:
        batch_op.drop_column('must_change_password')
