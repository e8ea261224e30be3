"""alert rules: thresholds an admin edits and each rule's state (ok / firing)

Revision ID: c41e7a9d2b10
Revises: 60671582e913
Create Date: 2026-11-29 13:00:00.000000

The default rules are seeded at start by console/services/alert_rules.ensure_defaults (every process
calls it through bootstrap.ensure_ready), so a database made with create_all gets them too.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'c41e7a9d2b10'
down_revision = '60671582e913'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('alert_rules',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('description', sa.String(length=255), nullable=False),
    sa.Column('threshold', sa.Float(), nullable=False),
    sa.Column('window_s', sa.Integer(), nullable=True),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('last_value', sa.Float(), nullable=True),
    sa.Column('detail', sa.String(length=255), nullable=True),
    sa.Column('changed_at', sa.DateTime(), nullable=False),
    sa.Column('evaluated_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_rules')),
    sa.UniqueConstraint('key', name=op.f('uq_alert_rules_key'))
    )


def downgrade():
    op.drop_table('alert_rules')
