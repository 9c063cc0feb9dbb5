"""metrics: the progress of `metrics rebuild`, so that a killed rebuild continues where it stopped

Revision ID: 0024_ops
Revises: 0023_kbremote
Create Date: 2026-12-02 06:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0024_ops'
down_revision: str | None = '0023_kbremote'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'metric_rebuild_progress',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('tz', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column('phase', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
        sa.Column('done_through', sa.Date(), nullable=True),
        sa.Column('marks_upto', sa.Integer(), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )


def downgrade() -> None:
    op.drop_table('metric_rebuild_progress')
