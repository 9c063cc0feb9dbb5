"""grading skips with reasons

Revision ID: 0003_grading_ux
Revises: 0002_views
Create Date: 2026-11-23 06:45:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0003_grading_ux'
down_revision: str | None = '0002_views'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('grading_skip',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('draft_id', sa.Integer(), nullable=False),
    sa.Column('grader_id', sa.Integer(), nullable=False),
    sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('detail', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
    sa.Column('skipped_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['draft_id'], ['draft.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['grader_id'], ['app_user.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('grading_skip', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_grading_skip_draft_id'), ['draft_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_grading_skip_grader_id'), ['grader_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('grading_skip', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_grading_skip_grader_id'))
        batch_op.drop_index(batch_op.f('ix_grading_skip_draft_id'))
    op.drop_table('grading_skip')
