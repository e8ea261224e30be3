"""keyed audit chain: the row's seq is its key (every column is under the MAC), the head records the switch-over

Revision ID: a21a7e4c9d10
Revises: d4e1a7c3b905
Create Date: 2026-12-10 10:00:00.000000

Rows written before this migration were chained with an unkeyed SHA-256 over some of their columns; they stay
as they are and are verified that way up to `audit_head.keyed_from - 1`. Every row appended after it carries an
HMAC over all its columns, the first one chained from the last legacy row's hash. Stop every process of the old
version before upgrading: a legacy row appended after the switch-over would not verify.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = 'a21a7e4c9d10'
down_revision = 'd4e1a7c3b905'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('audit_head', schema=None) as batch_op:
        batch_op.add_column(sa.Column('keyed_from', sa.Integer(), server_default='1', nullable=False))
    # The next row is the first keyed one.
    op.execute("UPDATE audit_head SET keyed_from = seq + 1")
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_constraint('uq_audit_log_seq', type_='unique')
        batch_op.drop_constraint('pk_audit_log', type_='primary')
        batch_op.drop_column('id')
        batch_op.create_primary_key('pk_audit_log', ['seq'])


def downgrade():
    # Rows appended since the upgrade are keyed; the old code cannot verify them (keep the anchor file).
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.add_column(sa.Column('id', sa.Integer(), nullable=True))
    op.execute("UPDATE audit_log SET id = seq")
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_constraint('pk_audit_log', type_='primary')
        batch_op.alter_column('id', nullable=False)
        batch_op.create_primary_key('pk_audit_log', ['id'])
        batch_op.create_unique_constraint('uq_audit_log_seq', ['seq'])
    if op.get_bind().dialect.name == 'postgresql':
        # The old code leaves id to the database, as the first schema's SERIAL did (SQLite's rowid does it there).
        op.execute("CREATE SEQUENCE audit_log_id_seq OWNED BY audit_log.id")
        op.execute("SELECT setval('audit_log_id_seq', COALESCE((SELECT MAX(id) FROM audit_log), 0) + 1, false)")
        op.execute("ALTER TABLE audit_log ALTER COLUMN id SET DEFAULT nextval('audit_log_id_seq')")
    with op.batch_alter_table('audit_head', schema=None) as batch_op:
        batch_op.drop_column('keyed_from')
