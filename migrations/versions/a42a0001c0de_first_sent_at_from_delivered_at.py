"""outbox.first_sent_at of messages delivered with no "sent" delivery row: their delivered_at

Revision ID: a42a0001c0de
Revises: a41a0001c0de
Create Date: 2026-12-06 16:20:00.000000

a36e0001c0de filled first_sent_at from the deliveries' first "sent" row only. A message delivered with none (before
the deliveries were recorded, or a history written without them) kept it empty, so a rebuild of the rollups dropped
it from the alert-latency figures: the days before the upgrade read "met" where they had read "not met". The releases
before measured latency to delivered_at, so that is what they read again; a message delivered has been taken by its
first channel by then at the latest.
"""
from alembic import op


# revision identifiers, used by Alembic.
revision = 'a42a0001c0de'
down_revision = 'a41a0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.execute("UPDATE outbox SET first_sent_at = delivered_at "
               "WHERE first_sent_at IS NULL AND delivered_at IS NOT NULL")


def downgrade():
    pass  # a value it filled is one the release before would have read the same (delivered_at)
