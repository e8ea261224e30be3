"""the note a person gave when rolling an approved change back, shown on the request's page

Revision ID: a24c0001c0de
Revises: a24b0001c0de
Create Date: 2026-12-03 12:35:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a24c0001c0de'
down_revision = 'a24b0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('approvals') as batch_op:
        batch_op.add_column(sa.Column('rollback_note', sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table('approvals') as batch_op:
        batch_op.drop_column('rollback_note')
