"""runs: the pipeline's API (issue 40): a run's retrieval version and commit, and when it was completed

Revision ID: 0021_pipeline
Revises: 0020_oidc
Create Date: 2026-12-02 05:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0021_pipeline'
down_revision: str | None = '0020_oidc'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN (both databases do it in place): a batch copy of `run` would drop the table
    # that drafts, checks and sign-offs reference, which SQLite refuses with foreign keys on.
    # The server default fills the existing rows; the app always writes the columns itself.
    op.add_column('run', sa.Column('retrieval_version', sa.String(length=200), nullable=False, server_default=''))
    op.add_column('run', sa.Column('commit', sa.String(length=200), nullable=False, server_default=''))
    op.add_column('run', sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column('run', 'closed_at')
    op.drop_column('run', 'commit')
    op.drop_column('run', 'retrieval_version')
