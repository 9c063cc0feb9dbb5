"""grading: a grader's grades newest first from an index (the "Previous" lookup on every grading page)

Revision ID: 0006_grade_grader_recent
Revises: 0005_grading_queue
Create Date: 2026-11-24 06:20:00
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0006_grade_grader_recent'
down_revision: str | None = '0005_grading_queue'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('grade', schema=None) as batch_op:
        batch_op.create_index('ix_grade_grader_recent', ['grader_id', 'created_at', 'id'], unique=False)
        batch_op.drop_index('ix_grade_grader_id')


def downgrade() -> None:
    with op.batch_alter_table('grade', schema=None) as batch_op:
        batch_op.create_index('ix_grade_grader_id', ['grader_id'], unique=False)
        batch_op.drop_index('ix_grade_grader_recent')
