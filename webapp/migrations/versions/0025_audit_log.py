"""auth: the append-only audit log, one-time flash nonces, and who minted the token a report was filed with

Revision ID: 0025_audit
Revises: 0024_ops
Create Date: 2026-12-02 05:40:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0025_audit'
down_revision: str | None = '0024_ops'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The append-only rule (the same statements as webapp/auth/audit.py's, frozen here as history).
SQLITE_TRIGGERS = (
    "CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON audit_event "
    "BEGIN SELECT RAISE(ABORT, 'audit_event is append-only'); END",
    "CREATE TRIGGER audit_event_no_delete BEFORE DELETE ON audit_event "
    "BEGIN SELECT RAISE(ABORT, 'audit_event is append-only'); END",
)
POSTGRES_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'audit_event is append-only'; END $$",
    "CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_event "
    "FOR EACH ROW EXECUTE FUNCTION audit_event_append_only()",
)


def upgrade() -> None:
    op.create_table('audit_event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('action', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('actor_id', sa.Integer(), nullable=True),
    sa.Column('credential', sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
    sa.Column('subject_id', sa.Integer(), nullable=True),
    sa.Column('target', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('detail', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.ForeignKeyConstraint(['actor_id'], ['app_user.id'], ),
    sa.ForeignKeyConstraint(['subject_id'], ['app_user.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('audit_event', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_event_action'), ['action'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_event_actor_id'), ['actor_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_event_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_event_subject_id'), ['subject_id'], unique=False)
    triggers = SQLITE_TRIGGERS if op.get_bind().dialect.name == 'sqlite' else POSTGRES_TRIGGERS
    for statement in triggers:
        op.execute(statement)
    op.create_table('flash_read',
    sa.Column('nonce', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('nonce')
    )
    with op.batch_alter_table('flash_read', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_flash_read_expires_at'), ['expires_at'], unique=False)
    with op.batch_alter_table('hallucination_report', schema=None) as batch_op:
        batch_op.add_column(sa.Column('minted_by', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_hallucination_report_minted_by', 'app_user', ['minted_by'], ['id'])


def downgrade() -> None:
    with op.batch_alter_table('hallucination_report', schema=None) as batch_op:
        batch_op.drop_constraint('fk_hallucination_report_minted_by', type_='foreignkey')
        batch_op.drop_column('minted_by')
    with op.batch_alter_table('flash_read', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_flash_read_expires_at'))
    op.drop_table('flash_read')
    op.drop_table('audit_event')
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('DROP FUNCTION IF EXISTS audit_event_append_only()')
