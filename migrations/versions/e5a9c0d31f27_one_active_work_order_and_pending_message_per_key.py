"""one active work order per error group, one pending outbox message per key: unique partial indexes

Revision ID: e5a9c0d31f27
Revises: b7d41c2e9a10
Create Date: 2026-12-01 16:00:00.000000

On PostgreSQL, concurrent parkers could open two work orders for one group and queue two pending alerts for
one key (a SELECT-then-INSERT). Duplicates already there are merged first: the oldest active work order of a
group keeps every dead letter and its count is recomputed, the others are closed with a note; of pending
messages with one key, the newest stays and the others are marked skipped.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'e5a9c0d31f27'
down_revision = 'b7d41c2e9a10'
branch_labels = None
depends_on = None

ACTIVE = "status IN ('open', 'acknowledged')"
PENDING = "status = 'pending'"


def upgrade():
    op.execute(f"""
        UPDATE dead_letters SET work_order_id = (
            SELECT MIN(k.id) FROM work_orders k JOIN work_orders o
              ON o.tenant_id = k.tenant_id AND o.fingerprint = k.fingerprint
            WHERE o.id = dead_letters.work_order_id AND k.{ACTIVE})
        WHERE work_order_id IN (
            SELECT o.id FROM work_orders o WHERE o.{ACTIVE} AND EXISTS (
                SELECT 1 FROM work_orders k WHERE k.tenant_id = o.tenant_id AND k.fingerprint = o.fingerprint
                  AND k.{ACTIVE} AND k.id < o.id))""")
    op.execute(f"""
        UPDATE work_orders SET status = 'closed', closed_at = CURRENT_TIMESTAMP, closed_by = 'migration',
            close_note = 'merged into the oldest active work order of its error group'
        WHERE {ACTIVE} AND EXISTS (
            SELECT 1 FROM work_orders k WHERE k.tenant_id = work_orders.tenant_id
              AND k.fingerprint = work_orders.fingerprint AND k.{ACTIVE} AND k.id < work_orders.id)""")
    op.execute(f"""
        UPDATE work_orders SET dead_letter_count = (
            SELECT COUNT(*) FROM dead_letters d WHERE d.work_order_id = work_orders.id)
        WHERE {ACTIVE}""")
    op.execute(f"""
        UPDATE outbox SET status = 'skipped', last_error = 'merged into a newer pending message with the same key'
        WHERE {PENDING} AND EXISTS (
            SELECT 1 FROM outbox n WHERE n.dedup_key = outbox.dedup_key AND n.{PENDING} AND n.id > outbox.id)""")
    op.create_index('uq_work_orders_active_group', 'work_orders', ['tenant_id', 'fingerprint'], unique=True,
                    sqlite_where=sa.text(ACTIVE), postgresql_where=sa.text(ACTIVE))
    op.create_index('uq_outbox_pending_dedup_key', 'outbox', ['dedup_key'], unique=True,
                    sqlite_where=sa.text(PENDING), postgresql_where=sa.text(PENDING))


def downgrade():
    op.drop_index('uq_outbox_pending_dedup_key', table_name='outbox')
    op.drop_index('uq_work_orders_active_group', table_name='work_orders')
