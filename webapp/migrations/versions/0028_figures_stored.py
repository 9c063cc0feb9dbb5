"""core: figures stored with the fingerprint of their inputs, computed by reactions and read by pages (issue 42 item 2)

Revision ID: 0028_figures
Revises: 0027_anytime2
Create Date: 2026-12-02 10:40:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0028_figures'
down_revision: str | None = '0027_anytime2'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'stored_figure',
        sa.Column('kind', sa.String(length=40), nullable=False),
        sa.Column('key', sa.String(length=100), nullable=False),
        sa.Column('fingerprint', sa.String(length=200), nullable=False),
        sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('result', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('kind', 'key'),
    )


def downgrade() -> None:
    op.drop_table('stored_figure')
