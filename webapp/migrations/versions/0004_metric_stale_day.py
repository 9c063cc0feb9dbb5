"""metrics: stale-day marks written at ingestion, cleared by the rebuild

Revision ID: 0004_metric_stale_day
Revises: 0003_grading_ux
Create Date: 2026-11-23 23:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004_metric_stale_day'
down_revision: str | None = '0003_grading_ux'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('metric_stale_day',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('day', sa.Date(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('metric_stale_day', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_metric_stale_day_day'), ['day'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('metric_stale_day', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_metric_stale_day_day'))
    op.drop_table('metric_stale_day')
