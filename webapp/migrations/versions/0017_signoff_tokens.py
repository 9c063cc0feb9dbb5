"""security: one gate sign-off per person (unique gate, run, user) and who minted each API token

Revision ID: 0017_signoff_tokens
Revises: 0016_job_runs
Create Date: 2026-11-28 03:40:00

Sign-offs stored twice by one person before this revision (a double post or a race) keep their
first row (lowest id, the one `signoff_state` already counted); the later ones are deleted so the
unique index can be built. Tokens made before this revision have no recorded creator (NULL).
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0017_signoff_tokens'
down_revision: str | None = '0016_job_runs'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DROP_LATER_DUPLICATES = """
DELETE FROM gate_signoff WHERE EXISTS (
    SELECT 1 FROM gate_signoff AS first
    WHERE first.gate = gate_signoff.gate AND first.run_id = gate_signoff.run_id
      AND first.user_id = gate_signoff.user_id AND first.id < gate_signoff.id
)
"""


def upgrade() -> None:
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.add_column(sa.Column('created_by', sa.Integer(), nullable=True))
        batch_op.create_foreign_key('fk_api_token_created_by', 'app_user', ['created_by'], ['id'])

    op.execute(DROP_LATER_DUPLICATES)
    with op.batch_alter_table('gate_signoff', schema=None) as batch_op:
        batch_op.create_index('uq_gate_signoff_person', ['gate', 'run_id', 'user_id'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('gate_signoff', schema=None) as batch_op:
        batch_op.drop_index('uq_gate_signoff_person')

    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.drop_constraint('fk_api_token_created_by', type_='foreignkey')
        batch_op.drop_column('created_by')
