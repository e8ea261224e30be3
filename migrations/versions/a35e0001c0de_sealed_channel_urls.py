"""sealed channel URLs: channel_settings.url holds a Fernet token too (a Slack webhook's URL is its credential)

Revision ID: a35e0001c0de
Revises: a33e0001c0de
Create Date: 2026-12-05 07:20:00.000000

As with the secrets (a21b5e0c7d13), URLs saved before are left as they are: a migration never sees the secret key
that seals them. They are read as plaintext, shown "not encrypted", and sealed by a save or `rebound channels reseal`.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a35e0001c0de'
down_revision = 'a33e0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('url', existing_type=sa.String(length=500), type_=sa.Text(), existing_nullable=True)


def downgrade():
    # The sealed form of a URL near the 500-character limit is longer: run this only with plaintext URLs or none.
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('url', existing_type=sa.Text(), type_=sa.String(length=500), existing_nullable=True)
