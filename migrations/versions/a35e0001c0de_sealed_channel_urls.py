"""sealed channel URLs: channel_settings.url holds a Fernet token too (a Slack webhook's URL is its credential)

Revision ID: a35e0001c0de
Revises: a33e0001c0de
Create Date: 2026-12-05 07:20:00.000000

As with the secrets (a21b5e0c7d13), URLs saved before are left as they are, read as plaintext, shown "not encrypted",
and sealed by a save or `rebound channels reseal`. A downgrade opens the sealed ones again.
"""
from alembic import op
import sqlalchemy as sa

from console.db.migration_steps import unseal_channel_column


# revision identifiers, used by Alembic.
revision = 'a35e0001c0de'
down_revision = 'a33e0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('url', existing_type=sa.String(length=500), type_=sa.Text(), existing_nullable=True)


def downgrade():
    # The release before reads URLs as plaintext only: opened with the app's secret key (Flask-Migrate runs this in
    # the app's context), or its alerts went to `sealed://…`.
    unseal_channel_column(op.get_bind(), "url")
    with op.batch_alter_table('channel_settings', schema=None) as batch_op:
        batch_op.alter_column('url', existing_type=sa.Text(), type_=sa.String(length=500), existing_nullable=True)
