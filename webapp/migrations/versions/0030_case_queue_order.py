"""datasets: an index on eval_case (dataset_id, position), the grading queue's order of a run without a plan

Revision ID: 0030_case_queue_order
Revises: 0029_untildecided
Create Date: 2026-12-07 23:30:00
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0030_case_queue_order'
down_revision: str | None = '0029_untildecided'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_eval_case_dataset_position', 'eval_case', ['dataset_id', 'position'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_eval_case_dataset_position', table_name='eval_case')
