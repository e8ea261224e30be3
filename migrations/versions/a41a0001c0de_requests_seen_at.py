"""users.requests_seen_at: when a person last read their own requests, so the answers since are counted for them

Revision ID: a41a0001c0de
Revises: a36e0001c0de
Create Date: 2026-12-06 01:00:00.000000

Set to the upgrade's time for everyone: the answers given before it are not news to anyone.
"""
from datetime import UTC, datetime

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a41a0001c0de'
down_revision = 'a36e0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('requests_seen_at', sa.DateTime(), nullable=True))
    # Naive UTC, as the column stores it (PostgreSQL's CURRENT_TIMESTAMP would be the session's zone).
    now = datetime.now(UTC).replace(tzinfo=None)
    op.get_bind().execute(sa.text("UPDATE users SET requests_seen_at = :now"), {"now": now})


def downgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('requests_seen_at')
