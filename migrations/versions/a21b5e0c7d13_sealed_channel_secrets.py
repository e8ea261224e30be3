"""sealed channel secrets: channel_settings.secret holds a Fernet token, longer than the secret it seals

Revision ID: a21b5e0c7d13
Revises: a17b3c5e9d01
Create Date: 2026-12-01 18:00:00.000000

Existing plaintext secrets are left as they are: the key that seals them is derived from the app's secret
key, which a migration never sees. The app reads them as plaintext until a save or `rebound channels reseal`
seals them (docs/architecture.md, "Channel secrets at rest").
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a21b5e0c7d13'
down_revision = 'a17b3c5e9d01'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('secret', existing_type=sa.String(length=500), type_=sa.Text(),
                              existing_nullable=True)


def downgrade():
    # A sealed value is longer than 500 characters only for a secret near the 500-character limit.
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('secret', existing_type=sa.Text(), type_=sa.String(length=500),
                              existing_nullable=True)
