"""grading: a planned draft closed to grading, with the reason (a run graded until decided closed)

Revision ID: 0027_anytime2
Revises: 0026_anytime
Create Date: 2026-12-02 07:10:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0027_anytime2'
down_revision: str | None = '0026_anytime'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('grading_plan', schema=None) as batch_op:
        batch_op.add_column(sa.Column('closed_reason', sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('grading_plan', schema=None) as batch_op:
        batch_op.drop_column('closed_reason')
