"""reviews: who marked each review of the plan's cadence done, and when

Revision ID: 0009_cadence_review
Revises: 0008_case_expectations
Create Date: 2026-11-27 07:45:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0009_cadence_review'
down_revision: str | None = '0008_case_expectations'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('cadence_review',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('period', sqlmodel.sql.sqltypes.AutoString(length=10), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('note', sa.Text(), server_default='', nullable=False),
    sa.Column('done_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['app_user.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('kind', 'period', 'user_id', name='uq_cadence_review_kind_period_user')
    )
    with op.batch_alter_table('cadence_review', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_cadence_review_kind'), ['kind'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('cadence_review', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_cadence_review_kind'))
    op.drop_table('cadence_review')
