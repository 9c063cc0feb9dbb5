"""runs: the pipeline's API (issue 40): a run's retrieval version and commit, and when it was completed

Revision ID: 0020_pipeline
Revises: 0019_judge_signals
Create Date: 2026-12-02 05:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0020_pipeline'
down_revision: str | None = '0019_judge_signals'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('retrieval_version', sa.String(length=200), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('commit', sa.String(length=200), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.alter_column('retrieval_version', existing_type=sa.String(length=200), server_default=None)
        batch_op.alter_column('commit', existing_type=sa.String(length=200), server_default=None)


def downgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_column('closed_at')
        batch_op.drop_column('commit')
        batch_op.drop_column('retrieval_version')
