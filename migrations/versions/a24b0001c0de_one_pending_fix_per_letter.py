"""one pending params fix per dead letter, held by a partial unique index

Revision ID: a24b0001c0de
Revises: a24a0001c0de
Create Date: 2026-12-03 09:30:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a24b0001c0de'
down_revision = 'a24a0001c0de'
branch_labels = None
depends_on = None

# Written out, not imported: migrations never import app code. The same text as console/models/recovery.py's.
PENDING_FIX = "status = 'pending' AND kind = 'dead_letter.fix_params'"


def upgrade():
    # Before the index: of several pending fixes of one letter, the first filed stays; only one could ever run.
    op.execute(
        "UPDATE approvals SET status = 'expired', outcome = 'an earlier request for the same dead letter was pending; "
        "only one is kept' WHERE " + PENDING_FIX + " AND id NOT IN (SELECT min(id) FROM approvals WHERE "
        + PENDING_FIX + " GROUP BY subject_id)")
    op.create_index('ix_approvals_one_pending_fix', 'approvals', ['subject_id'], unique=True,
                    sqlite_where=sa.text(PENDING_FIX), postgresql_where=sa.text(PENDING_FIX))


def downgrade():
    op.drop_index('ix_approvals_one_pending_fix', table_name='approvals')
