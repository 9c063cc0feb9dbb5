"""metrics: the retention watermark (events of days before it may be pruned; their daily figures are final)

Revision ID: 0015_retention_watermark
Revises: 0014_production_weekly
Create Date: 2026-11-28 04:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0015_retention_watermark'
down_revision: str | None = '0014_production_weekly'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('metric_retention_watermark',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('pruned_before', sa.Date(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )


def downgrade() -> None:
    op.drop_table('metric_retention_watermark')
