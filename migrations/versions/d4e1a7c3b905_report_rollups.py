"""report rollups: counts per task per hour and per day, error fingerprints, forecasts, a run's due time

Revision ID: d4e1a7c3b905
Revises: b2a6c0d4e8f1
Create Date: 2026-12-03 10:00:00.000000

The rollup tables start empty: the rollups maintenance job fills them from the runs (a day of history per
pass), or `rebound sla-report --rebuild` at once. Column names repeat console/domain/figures.py's MEASURES
(migrations never import app code).
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'd4e1a7c3b905'
down_revision = 'b2a6c0d4e8f1'
branch_labels = None
depends_on = None

COUNTS = ("starts", "on_time", "finished", "succeeded", "retried", "retry_succeeded", "duplicates",
          "attempts_failed", "dead", "dead_letters", "recovered", "alerts", "breaches", "conflicts",
          "conflicts_named")
BUCKETS = {"delay": 17, "recovery": 16, "alert": 15}
MEASURES = COUNTS + tuple(f"{name}_{i}" for name, count in BUCKETS.items() for i in range(count))


def _counts():
    return [sa.Column(name, sa.Integer(), nullable=False) for name in MEASURES]


def _keys(first: str):
    return [sa.Column(first, sa.DateTime(), nullable=False), sa.Column('tenant_id', sa.Integer(), nullable=False),
            sa.Column('task_id', sa.Integer(), nullable=False)]


def upgrade():
    op.create_table('report_hours', *_keys('hour'), sa.Column('handler', sa.String(length=120), nullable=False),
                    sa.Column('hour_of_day', sa.SmallInteger(), nullable=False), *_counts(),
                    sa.PrimaryKeyConstraint('hour', 'tenant_id', 'task_id', 'handler', name=op.f('pk_report_hours')))
    op.create_index('ix_report_hours_task_hour', 'report_hours',
                    ['task_id', 'hour', 'hour_of_day', 'starts', 'on_time'], unique=False)
    op.create_table('report_days', *_keys('day'), sa.Column('handler', sa.String(length=120), nullable=False),
                    *_counts(),
                    sa.PrimaryKeyConstraint('day', 'tenant_id', 'task_id', 'handler', name=op.f('pk_report_days')))
    op.create_index('ix_report_days_task_day', 'report_days', ['task_id', 'day'], unique=False)
    for table, first in (('report_error_hours', 'hour'), ('report_error_days', 'day')):
        op.create_table(table, *_keys(first), sa.Column('fingerprint', sa.String(length=32), nullable=False),
                        sa.Column('error_code', sa.String(length=80), nullable=False),
                        sa.Column('message', sa.String(length=255), nullable=False),
                        sa.Column('letters', sa.Integer(), nullable=False),
                        sa.PrimaryKeyConstraint(first, 'tenant_id', 'task_id', 'fingerprint', name=op.f(f'pk_{table}')))
    op.create_table('report_state',
                    sa.Column('name', sa.String(length=32), nullable=False),
                    sa.Column('through', sa.DateTime(), nullable=False),
                    sa.PrimaryKeyConstraint('name', name=op.f('pk_report_state')))
    op.create_table('forecast_warnings',
                    sa.Column('id', sa.Integer(), nullable=False),
                    sa.Column('kind', sa.String(length=16), nullable=False),
                    sa.Column('tenant_id', sa.Integer(), nullable=False),
                    sa.Column('task_id', sa.Integer(), nullable=False),
                    sa.Column('at', sa.DateTime(), nullable=False),
                    sa.Column('made_at', sa.DateTime(), nullable=False),
                    sa.PrimaryKeyConstraint('id', name=op.f('pk_forecast_warnings')),
                    sa.UniqueConstraint('kind', 'tenant_id', 'task_id', 'at',
                                        name=op.f('uq_forecast_warnings_kind')))
    op.create_index('ix_forecast_warnings_at', 'forecast_warnings', ['at'], unique=False)
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('due_at', sa.DateTime(), nullable=True))


def downgrade():
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('due_at')
    op.drop_index('ix_forecast_warnings_at', table_name='forecast_warnings')
    op.drop_table('forecast_warnings')
    op.drop_table('report_state')
    op.drop_table('report_error_days')
    op.drop_table('report_error_hours')
    op.drop_index('ix_report_days_task_day', table_name='report_days')
    op.drop_table('report_days')
    op.drop_index('ix_report_hours_task_hour', table_name='report_hours')
    op.drop_table('report_hours')
