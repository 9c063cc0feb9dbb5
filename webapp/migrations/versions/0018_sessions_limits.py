"""auth: a web session's last request (the idle timeout)

Revision ID: 0018_sessions_limits
Revises: 0017_signoff_tokens
Create Date: 2026-11-28 04:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0018_sessions_limits'
down_revision: str | None = '0017_signoff_tokens'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('web_session', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=True))
    # an existing session counts as seen when it was opened: one idle for longer ends at its next request
    op.execute("UPDATE web_session SET last_seen_at = created_at")
    with op.batch_alter_table('web_session', schema=None) as batch_op:
        batch_op.alter_column('last_seen_at', existing_type=sa.DateTime(timezone=True), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('web_session', schema=None) as batch_op:
        batch_op.drop_column('last_seen_at')
