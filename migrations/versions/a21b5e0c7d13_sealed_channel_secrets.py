"""sealed channel secrets: channel_settings.secret holds a Fernet token, longer than the secret it seals

Revision ID: a21b5e0c7d13
Revises: a17b3c5e9d01
Create Date: 2026-12-01 18:00:00.000000

Existing plaintext secrets are left as they are: the app reads them as plaintext until a save or `rebound channels
reseal` seals them (docs/architecture.md, "Channel secrets at rest"). A downgrade opens the sealed ones again.
"""
from alembic import op
import sqlalchemy as sa

from console.db.migration_steps import unseal_channel_column


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
    # The release before reads secrets as plaintext only: opened with the app's secret key (Flask-Migrate runs this in
    # the app's context), or its webhooks were signed with the sealed text.
    unseal_channel_column(op.get_bind(), "secret")
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('secret', existing_type=sa.Text(), type_=sa.String(length=500),
                              existing_nullable=True)
