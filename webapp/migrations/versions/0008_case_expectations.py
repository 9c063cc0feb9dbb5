"""datasets: a case's expectations of the response (confidence bounds, expected citations)

Revision ID: 0008_case_expectations
Revises: 0007_drop_queue_index
Create Date: 2026-11-27 08:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008_case_expectations'
down_revision: str | None = '0007_drop_queue_index'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('eval_case', schema=None) as batch_op:
        batch_op.add_column(sa.Column('expected_confidence_above', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('expected_confidence_min', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('expected_confidence_max', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('expected_citations', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('eval_case', schema=None) as batch_op:
        batch_op.drop_column('expected_citations')
        batch_op.drop_column('expected_confidence_max')
        batch_op.drop_column('expected_confidence_min')
        batch_op.drop_column('expected_confidence_above')
