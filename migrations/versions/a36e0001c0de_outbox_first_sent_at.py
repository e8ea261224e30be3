"""outbox.first_sent_at: when the first channel took a message (alert latency ends there, delivered or not)

Revision ID: a36e0001c0de
Revises: a35e0001c0de
Create Date: 2026-12-05 10:10:00.000000

Filled for the messages already sent from their deliveries' first "sent" row, so the alert-latency figures of the
days before the upgrade stay as they read.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a36e0001c0de'
down_revision = 'a35e0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('first_sent_at', sa.DateTime(), nullable=True))
        batch_op.create_index('ix_outbox_kind_first_sent_at', ['kind', 'first_sent_at'], unique=False)
    op.execute("UPDATE outbox SET first_sent_at = (SELECT min(deliveries.at) FROM deliveries "
               "WHERE deliveries.outbox_id = outbox.id AND deliveries.outcome = 'sent') "
               "WHERE EXISTS (SELECT 1 FROM deliveries WHERE deliveries.outbox_id = outbox.id "
               "AND deliveries.outcome = 'sent')")


def downgrade():
    with op.batch_alter_table('outbox', schema=None) as batch_op:
        batch_op.drop_index('ix_outbox_kind_first_sent_at')
        batch_op.drop_column('first_sent_at')
