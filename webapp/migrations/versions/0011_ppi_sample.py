"""ppi: judge scores of every draft, frozen error models, append-only sample draws; grading plan

Revision ID: 0011_ppi_sample
Revises: 0009_cadence_review
Create Date: 2026-11-27 07:40:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0011_ppi_sample'
down_revision: str | None = '0009_cadence_review'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copies of webapp.ppi.models' trigger SQL as of this revision.
SQLITE_APPEND_ONLY_DDL = (
    "CREATE TRIGGER ppi_draw_no_update BEFORE UPDATE ON ppi_draw BEGIN SELECT RAISE(ABORT, 'ppi draws are append-only: update refused'); END",
    "CREATE TRIGGER ppi_draw_no_delete BEFORE DELETE ON ppi_draw BEGIN SELECT RAISE(ABORT, 'ppi draws are append-only: delete refused'); END",
)
POSTGRESQL_APPEND_ONLY_DDL = (
    "CREATE OR REPLACE FUNCTION ppi_draw_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'ppi draws are append-only: % refused', lower(TG_OP); END $$",
    'CREATE TRIGGER ppi_draw_no_update_delete BEFORE UPDATE OR DELETE ON ppi_draw FOR EACH ROW EXECUTE FUNCTION ppi_draw_append_only()',
)

def upgrade() -> None:
    op.create_table('ppi_error_model',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('source_runs', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('ppi_judge_score',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('draft_id', sa.Integer(), nullable=False),
    sa.Column('judge_version', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('factual_accuracy', sqlmodel.sql.sqltypes.AutoString(length=4), nullable=False),
    sa.Column('citation_relevance', sa.Float(), nullable=False),
    sa.Column('tone', sa.Float(), nullable=False),
    sa.Column('completeness', sa.Float(), nullable=False),
    sa.Column('raw_calls', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['draft_id'], ['draft.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('draft_id', 'judge_version', name='uq_ppi_judge_score_draft_version')
    )
    with op.batch_alter_table('ppi_judge_score', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ppi_judge_score_draft_id'), ['draft_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_ppi_judge_score_run_id'), ['run_id'], unique=False)

    op.create_table('ppi_draw',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('draft_id', sa.Integer(), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('stratum', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('forced', sa.Boolean(), nullable=False),
    sa.Column('judge_version', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
    sa.Column('judge_score', sa.Float(), nullable=False),
    sa.Column('pi', sa.Float(), nullable=False),
    sa.Column('combined_pi', sa.Float(), nullable=False),
    sa.Column('drawn', sa.Boolean(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('budget', sa.Float(), nullable=False),
    sa.Column('error_model_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['draft_id'], ['draft.id'], ),
    sa.ForeignKeyConstraint(['error_model_id'], ['ppi_error_model.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('run_id', 'draft_id', 'round', name='uq_ppi_draw_run_draft_round')
    )
    with op.batch_alter_table('ppi_draw', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ppi_draw_draft_id'), ['draft_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_ppi_draw_run_id'), ['run_id'], unique=False)

    op.create_table('grading_plan',
    sa.Column('draft_id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['draft_id'], ['draft.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('draft_id')
    )
    with op.batch_alter_table('grading_plan', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_grading_plan_run_id'), ['run_id'], unique=False)

    statements = SQLITE_APPEND_ONLY_DDL if op.get_bind().dialect.name == "sqlite" else POSTGRESQL_APPEND_ONLY_DDL
    for sql in statements:
        op.execute(sa.text(sql))

def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.text("DROP TRIGGER IF EXISTS ppi_draw_no_update_delete ON ppi_draw"))
        op.execute(sa.text("DROP FUNCTION IF EXISTS ppi_draw_append_only()"))
    with op.batch_alter_table('grading_plan', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_grading_plan_run_id'))

    op.drop_table('grading_plan')
    with op.batch_alter_table('ppi_draw', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ppi_draw_run_id'))
        batch_op.drop_index(batch_op.f('ix_ppi_draw_draft_id'))

    op.drop_table('ppi_draw')
    with op.batch_alter_table('ppi_judge_score', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ppi_judge_score_run_id'))
        batch_op.drop_index(batch_op.f('ix_ppi_judge_score_draft_id'))

    op.drop_table('ppi_judge_score')
    op.drop_table('ppi_error_model')
