"""ppi: the drafts whose final grades a stored decision rested on (issue 43: a correction of one of them re-opens it)

Revision ID: 0029_untildecided
Revises: 0028_figures
Create Date: 2026-12-02 10:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0029_untildecided'
down_revision: str | None = '0028_figures'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('ppi_decision', schema=None) as batch_op:
        batch_op.add_column(sa.Column('rested_on', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('ppi_decision', schema=None) as batch_op:
        batch_op.drop_column('rested_on')
