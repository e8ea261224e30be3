"""the runs and dead letters' index diet: fewer indexes, and partial ones for live runs and open letters

Revision ID: a23b0001c0de
Revises: a22d0001c0de
Create Date: 2026-12-01 23:40:00.000000
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a23b0001c0de'
down_revision = 'a22d0001c0de'
branch_labels = None
depends_on = None

# Written out, not imported: migrations never import app code. The same text as console/models/runs.py's.
LIVE = "status = 'pending' OR status = 'retry_wait' OR status = 'running' OR status = 'compensating'"
LIVE_TASK = f"({LIVE}) AND task_id IS NOT NULL"
OPEN_LETTER = "status = 'open'"

# (name, table, columns, predicate or None) as they were, and as they become.
BEFORE = [
    ('ix_runs_status_next_retry_at', 'runs', ['status', 'next_retry_at'], None),
    ('ix_runs_tenant_status_id', 'runs', ['tenant_id', 'status', 'id'], None),
    ('ix_runs_task_id_id', 'runs', ['task_id', 'id'], None),
    ('ix_runs_tenant_handler_status', 'runs', ['tenant_id', 'handler', 'status'], None),
    ('ix_runs_task_status', 'runs', ['task_id', 'status'], None),
    ('ix_runs_error_code_id', 'runs', ['error_code', 'id'], None),
    ('ix_runs_status_reason_handler', 'runs', ['status', 'status_reason', 'handler'], None),
    ('ix_runs_status_finished_at', 'runs', ['status', 'finished_at'], None),
    ('ix_dead_letters_fingerprint_status', 'dead_letters', ['fingerprint', 'status'], None),
    ('ix_dead_letters_work_order_id_status', 'dead_letters', ['work_order_id', 'status'], None),
]
AFTER = [
    ('ix_runs_task_id_id', 'runs', ['task_id', 'id'], 'task_id IS NOT NULL'),
    ('ix_runs_error_code_id', 'runs', ['error_code', 'id'], 'error_code IS NOT NULL'),
    ('ix_runs_status_finished_at', 'runs', ['status', 'finished_at'], 'finished_at IS NOT NULL'),
    ('ix_runs_live_tenant_status', 'runs', ['tenant_id', 'status'], LIVE),
    ('ix_runs_live_task_status', 'runs', ['task_id', 'status'], LIVE_TASK),
    ('ix_runs_live_handler_status', 'runs', ['handler', 'status', 'status_reason'], LIVE),
    ('ix_dead_letters_open_work_order_id', 'dead_letters', ['work_order_id'], OPEN_LETTER),
    ('ix_dead_letters_open_fingerprint', 'dead_letters', ['fingerprint'], OPEN_LETTER),
]


def _create(name, table, columns, predicate):
    where = {} if predicate is None else {'sqlite_where': sa.text(predicate), 'postgresql_where': sa.text(predicate)}
    op.create_index(name, table, columns, unique=False, **where)


def upgrade():
    for name, table, _columns, _predicate in BEFORE:
        op.drop_index(name, table_name=table)
    for index in AFTER:
        _create(*index)


def downgrade():
    for name, table, _columns, _predicate in AFTER:
        op.drop_index(name, table_name=table)
    for index in BEFORE:
        _create(*index)
