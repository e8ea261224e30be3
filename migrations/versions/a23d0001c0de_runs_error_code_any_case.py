"""runs found by error code in any case: the error-code index is on lower(error_code)

Revision ID: a23d0001c0de
Revises: a23c0001c0de
Create Date: 2026-12-03 10:00:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a23d0001c0de'
down_revision = 'a23c0001c0de'
branch_labels = None
depends_on = None

# Written out, not imported: migrations never import app code. The same text as console/models/runs.py's.
FAILED = "error_code IS NOT NULL"
WHERE = {'sqlite_where': sa.text(FAILED), 'postgresql_where': sa.text(FAILED)}


def upgrade():
    # Codes keep the case they were raised in (ValueError, TIMEOUT, http_502): the list's filter ignores it, and this
    # index replaces the one on the code as stored, so a status change still writes one error-code entry.
    op.drop_index('ix_runs_error_code_id', table_name='runs')
    op.create_index('ix_runs_error_code_lower_id', 'runs', [sa.text('lower(error_code)'), 'id'], unique=False, **WHERE)


def downgrade():
    op.drop_index('ix_runs_error_code_lower_id', table_name='runs')
    op.create_index('ix_runs_error_code_id', 'runs', ['error_code', 'id'], unique=False, **WHERE)
