"""ppi: production weeks turned into runs (one per ISO week), for the weekly human-graded quality estimate

Revision ID: 0014_production_weekly
Revises: 0011_ppi_sample
Create Date: 2026-11-27 11:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0014_production_weekly'
down_revision: str | None = '0011_ppi_sample'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('ppi_production_week',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('week', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('events_with_draft', sa.Integer(), nullable=False),
    sa.Column('drafts_taken', sa.Integer(), nullable=False),
    sa.Column('cap', sa.Integer(), nullable=False),
    sa.Column('cap_seed', sa.Integer(), nullable=False),
    sa.Column('budget', sa.Float(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['created_by'], ['app_user.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('week')
    )
    with op.batch_alter_table('ppi_production_week', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ppi_production_week_run_id'), ['run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('ppi_production_week', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ppi_production_week_run_id'))

    op.drop_table('ppi_production_week')
