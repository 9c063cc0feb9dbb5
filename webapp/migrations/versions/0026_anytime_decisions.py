"""ppi: grade until decided (ppi_until_decided) and the confidence sequence's stored decisions (ppi_decision)

Revision ID: 0026_anytime
Revises: 0025_audit
Create Date: 2026-12-02 06:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0026_anytime'
down_revision: str | None = '0025_audit'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'ppi_until_decided',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('cap', sa.Integer(), nullable=True),
        sa.Column('set_by', sa.Integer(), nullable=True),
        sa.Column('set_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('closed_reason', sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(['run_id'], ['run.id']),
        sa.ForeignKeyConstraint(['set_by'], ['app_user.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('ppi_until_decided', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ppi_until_decided_run_id'), ['run_id'], unique=True)
    op.create_table(
        'ppi_decision',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('criterion', sa.String(length=40), nullable=False),
        sa.Column('verdict', sa.String(length=10), nullable=False),
        sa.Column('low', sa.Float(), nullable=False),
        sa.Column('high', sa.Float(), nullable=False),
        sa.Column('grades', sa.Integer(), nullable=False),
        sa.Column('decided_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('reopened_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('reopened_by', sa.Integer(), nullable=True),
        sa.Column('reopen_reason', sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(['run_id'], ['run.id']),
        sa.ForeignKeyConstraint(['reopened_by'], ['app_user.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('ppi_decision', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ppi_decision_run_id'), ['run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('ppi_decision', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ppi_decision_run_id'))
    op.drop_table('ppi_decision')
    with op.batch_alter_table('ppi_until_decided', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ppi_until_decided_run_id'))
    op.drop_table('ppi_until_decided')
