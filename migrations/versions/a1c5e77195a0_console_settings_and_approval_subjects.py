"""console settings and approvals by subject: values an admin sets in Admin → Settings (first: how many dead
letters a bulk discard may close without approval); an index to find the requests about a run

Revision ID: a1c5e77195a0
Revises: f1c83d5b2e64
Create Date: 2026-12-02 10:00:00.000000

A setting without a row has the default its declaration in console/services/system/console_settings.py gives,
so the table starts empty.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a1c5e77195a0'
down_revision = 'f1c83d5b2e64'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('console_settings',
    sa.Column('key', sa.String(length=80), nullable=False),
    sa.Column('value', sa.JSON(), nullable=False),
    sa.Column('updated_by', sa.String(length=80), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_console_settings'))
    )
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.create_index('ix_approvals_subject_type_subject_id', ['subject_type', 'subject_id'], unique=False)


def downgrade():
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.drop_index('ix_approvals_subject_type_subject_id')
    op.drop_table('console_settings')
