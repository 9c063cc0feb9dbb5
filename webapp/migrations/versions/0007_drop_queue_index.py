"""grading: drop the derived queue index (grading_queue, grading_queue_run, grading_queue_grader)

The grading queue reads the drafts, places and grades themselves again (issue 26: sized for 2-3
graders). The indexes those queries use exist already: draft.run_id, grading_slot.draft_id and
grader_id, grade.draft_id, grading_skip.grader_id; no new index is needed.

Downgrading makes the tables again, empty: the old code filled them lazily per run on its first
grading request.

Revision ID: 0007_drop_queue_index
Revises: 0006_grade_grader_recent
Create Date: 2026-11-27 07:40:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0007_drop_queue_index'
down_revision: str | None = '0006_grade_grader_recent'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('grading_queue', schema=None) as batch_op:
        batch_op.drop_index('ix_grading_queue_next')
    op.drop_table('grading_queue')
    op.drop_table('grading_queue_grader')
    op.drop_table('grading_queue_run')


def downgrade() -> None:
    op.create_table('grading_queue_run',
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('graders_per_draft', sa.Integer(), nullable=False),
    sa.Column('last_draft_id', sa.Integer(), nullable=False),
    sa.Column('drafts', sa.Integer(), nullable=False),
    sa.Column('grades_done', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id')
    )
    op.create_table('grading_queue_grader',
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('grader_id', sa.Integer(), nullable=False),
    sa.Column('grades', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['grader_id'], ['app_user.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id', 'grader_id')
    )
    op.create_table('grading_queue',
    sa.Column('draft_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('sample_index', sa.Integer(), nullable=False),
    sa.Column('category', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=True),
    sa.Column('intent', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=True),
    sa.Column('golden', sa.Boolean(), nullable=False),
    sa.Column('draft_intent', sqlmodel.sql.sqltypes.AutoString(length=60), nullable=True),
    sa.Column('gradable', sa.Boolean(), nullable=False),
    sa.Column('places_taken', sa.Integer(), nullable=False),
    sa.Column('has_place', sa.Boolean(), nullable=False),
    sa.Column('grades_in', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['draft_id'], ['draft.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('draft_id')
    )
    with op.batch_alter_table('grading_queue', schema=None) as batch_op:
        batch_op.create_index('ix_grading_queue_next', ['run_id', 'gradable', 'has_place', 'position', 'sample_index', 'draft_id', 'grades_in'], unique=False)
