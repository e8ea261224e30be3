"""api_tokens.issue_key: the form that issued a token, so submitting it again issues no second one

Revision ID: a24a0001c0de
Revises: a23d0001c0de
Create Date: 2026-12-03 09:00:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a24a0001c0de'
down_revision = 'a23d0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('api_tokens') as batch:
        batch.add_column(sa.Column('issue_key', sa.String(length=32), nullable=True))
    op.create_index('ix_api_tokens_issue_key', 'api_tokens', ['issue_key'], unique=True)


def downgrade():
    op.drop_index('ix_api_tokens_issue_key', table_name='api_tokens')
    with op.batch_alter_table('api_tokens') as batch:
        batch.drop_column('issue_key')
