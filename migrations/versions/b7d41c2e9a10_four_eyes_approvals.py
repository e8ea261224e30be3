"""four-eyes approvals: the diff, expiry, outcome and rollback of a request

Revision ID: b7d41c2e9a10
Revises: fbf90e6766c4
Create Date: 2026-12-01 15:40:00.000000

The approvals table was created empty by the first schema and never written; it gains what a request
needs (the before/after diff the approver reads, when it expires, why an approved change failed, who
rolled it back). Rows that existed could only be test rows; they expire at once.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'b7d41c2e9a10'
down_revision = 'fbf90e6766c4'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.alter_column('kind', existing_type=sa.String(length=32), type_=sa.String(length=40))
        batch_op.add_column(sa.Column('before', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('after', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('outcome', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('expires_at', sa.DateTime(), nullable=False,
                                      server_default=sa.text("'1970-01-01 00:00:00'")))
        batch_op.add_column(sa.Column('rolled_back_by_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('rolled_back_at', sa.DateTime(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_approvals_rolled_back_by_id_users'), 'users',
                                    ['rolled_back_by_id'], ['id'])
        batch_op.create_index('ix_approvals_status_expires_at', ['status', 'expires_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_approvals_requested_by_id'), ['requested_by_id'], unique=False)
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.alter_column('expires_at', server_default=None)


def downgrade():
    with op.batch_alter_table('approvals', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_approvals_requested_by_id'))
        batch_op.drop_index('ix_approvals_status_expires_at')
        batch_op.drop_constraint(batch_op.f('fk_approvals_rolled_back_by_id_users'), type_='foreignkey')
        batch_op.drop_column('rolled_back_at')
        batch_op.drop_column('rolled_back_by_id')
        batch_op.drop_column('expires_at')
        batch_op.drop_column('outcome')
        batch_op.drop_column('after')
        batch_op.drop_column('before')
        batch_op.alter_column('kind', existing_type=sa.String(length=40), type_=sa.String(length=32))
