"""core: facts a request records for the reactions after its commit, and each reaction's mark (issue 42)

Revision ID: 0020_reactions
Revises: 0019_judge_signals
Create Date: 2026-12-02 05:50:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0020_reactions'
down_revision: str | None = '0019_judge_signals'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'fact',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=60), nullable=False),
        sa.Column('subject', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('settled', sa.Boolean(), nullable=False),
        sa.Column('due_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_fact_pending', 'fact', ['settled', 'id'], unique=False)
    op.create_table(
        'fact_reaction',
        sa.Column('fact_id', sa.Integer(), nullable=False),
        sa.Column('reaction', sa.String(length=100), nullable=False),
        sa.Column('state', sa.String(length=10), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('last_error', sa.Text(), nullable=True),
        sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('done_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('result', sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(['fact_id'], ['fact.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('fact_id', 'reaction'),
    )


def downgrade() -> None:
    op.drop_table('fact_reaction')
    op.drop_index('ix_fact_pending', table_name='fact')
    op.drop_table('fact')
