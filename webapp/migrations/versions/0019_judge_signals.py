"""ppi: several judge signals per draft (k calls, a second judge, log-prob expectations), calls and cost

Revision ID: 0019_judge_signals
Revises: 0018_sessions_limits
Create Date: 2026-11-28 07:05:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0019_judge_signals'
down_revision: str | None = '0018_sessions_limits'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('ppi_judge_score', schema=None) as batch_op:
        batch_op.add_column(sa.Column('signals', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('calls', sa.Integer(), nullable=False, server_default='1'))
        batch_op.add_column(sa.Column('cost_usd', sa.Float(), nullable=True))
    with op.batch_alter_table('ppi_judge_score', schema=None) as batch_op:
        batch_op.alter_column('calls', existing_type=sa.Integer(), server_default=None)


def downgrade() -> None:
    with op.batch_alter_table('ppi_judge_score', schema=None) as batch_op:
        batch_op.drop_column('cost_usd')
        batch_op.drop_column('calls')
        batch_op.drop_column('signals')
