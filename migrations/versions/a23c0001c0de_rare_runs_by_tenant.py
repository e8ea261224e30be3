"""a tenant's runs in a rare status (dead, cancelled, ...) by a partial index, newest first

Revision ID: a23c0001c0de
Revises: a23b0001c0de
Create Date: 2026-12-02 03:05:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a23c0001c0de'
down_revision = 'a23b0001c0de'
branch_labels = None
depends_on = None

# Written out, not imported: migrations never import app code. The same text as console/models/runs.py's.
RARE = ("status = 'cancelled' OR status = 'compensated' OR status = 'compensation_failed' OR status = 'dead' "
        "OR status = 'failed' OR status = 'resolved'")


def upgrade():
    op.create_index('ix_runs_rare_tenant_status_id', 'runs', ['tenant_id', 'status', 'id'], unique=False,
                    sqlite_where=sa.text(RARE), postgresql_where=sa.text(RARE))


def downgrade():
    op.drop_index('ix_runs_rare_tenant_status_id', table_name='runs')
