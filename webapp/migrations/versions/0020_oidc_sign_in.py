"""auth: sign-in through an OpenID provider (identities by issuer and subject, pending sign-ins, role sources)

Revision ID: 0020_oidc
Revises: 0019_judge_signals
Create Date: 2026-12-02 05:45:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0020_oidc'
down_revision: str | None = '0019_judge_signals'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # every role held so far was granted by an admin (or the command line)
    with op.batch_alter_table('user_role', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source', sa.String(length=10), nullable=False, server_default='admin'))
    with op.batch_alter_table('user_role', schema=None) as batch_op:
        batch_op.alter_column('source', existing_type=sa.String(length=10), server_default=None)
    op.create_table(
        'oidc_identity',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('issuer', sa.String(length=255), nullable=False),
        sa.Column('subject', sa.String(length=255), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_sign_in_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['user_id'], ['app_user.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('issuer', 'subject', name='uq_oidc_identity_issuer_subject'),
    )
    with op.batch_alter_table('oidc_identity', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_oidc_identity_user_id'), ['user_id'], unique=False)
    op.create_table(
        'oidc_login_request',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('state_hash', sa.String(length=64), nullable=False),
        sa.Column('verifier_hash', sa.String(length=64), nullable=False),
        sa.Column('next_path', sa.String(length=500), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('oidc_login_request', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_oidc_login_request_state_hash'), ['state_hash'], unique=True)
        batch_op.create_index(batch_op.f('ix_oidc_login_request_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('oidc_login_request', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_oidc_login_request_expires_at'))
        batch_op.drop_index(batch_op.f('ix_oidc_login_request_state_hash'))
    op.drop_table('oidc_login_request')
    with op.batch_alter_table('oidc_identity', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_oidc_identity_user_id'))
    op.drop_table('oidc_identity')
    with op.batch_alter_table('user_role', schema=None) as batch_op:
        batch_op.drop_column('source')
