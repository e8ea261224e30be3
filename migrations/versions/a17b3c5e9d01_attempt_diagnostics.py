"""attempt diagnostics: a failed attempt's traceback and the handler's last log lines

Revision ID: a17b3c5e9d01
Revises: a17a0001c0de
Create Date: 2026-12-10 10:00:00.000000

One row per failed attempt (run, series, attempt), written by the worker with the failure; bounded and masked
before it is stored (console/services/engine/diagnostics.py).
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a17b3c5e9d01'
down_revision = 'a17a0001c0de'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('attempt_diagnostics',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('series', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.Column('traceback', sa.Text(), nullable=True),
    sa.Column('log_lines', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_attempt_diagnostics_run_id_runs')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_attempt_diagnostics')),
    sa.UniqueConstraint('run_id', 'series', 'attempt', name=op.f('uq_attempt_diagnostics_run_id'))
    )


def downgrade():
    op.drop_table('attempt_diagnostics')
