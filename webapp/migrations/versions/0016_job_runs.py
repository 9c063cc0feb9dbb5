"""ops/metrics: job runs (last success, last error per background job); events pending their merge; stale marks' time

Revision ID: 0016_job_runs
Revises: 0015_retention_watermark
Create Date: 2026-11-28 04:00:00

- job_run: one row per background job, written after each pass (webapp/app/jobs.py).
- metric_event.pending: true until the rebuild merges the event into its day's aggregates.
  Events already stored are in their aggregates (false), except those of days still marked
  stale: their aggregates are dropped and their events set pending, so the first pass after the
  upgrade rebuilds them whole (merging onto nothing is a full recompute). On SQLite changing the
  column's default copies the table once.
- ix_metric_event_day_latency: covers the read of a day's merged latencies (the merged day's p95).
- metric_stale_day.created_at: when the mark was written (marks already there: the upgrade's time).
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = '0016_job_runs'
down_revision: str | None = '0015_retention_watermark'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('job_run',
    sa.Column('job', sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
    sa.Column('period_s', sa.Float(), nullable=False),
    sa.Column('first_run_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_run_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_success_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('job')
    )
    # existing rows: merged (false); rows written from now on: pending (true)
    with op.batch_alter_table('metric_event', schema=None) as batch_op:
        batch_op.add_column(sa.Column('pending', sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table('metric_event', schema=None) as batch_op:
        batch_op.alter_column('pending', existing_type=sa.Boolean(), server_default=sa.true(), existing_nullable=False)
    event = sa.table('metric_event', sa.column('day', sa.Date()), sa.column('pending', sa.Boolean()))
    stale = sa.table('metric_stale_day', sa.column('day', sa.Date()))
    daily = sa.table('metric_daily_aggregate', sa.column('day', sa.Date()))
    stale_days = sa.select(stale.c.day)
    op.execute(event.update().where(event.c.day.in_(stale_days)).values(pending=True))
    op.execute(daily.delete().where(daily.c.day.in_(stale_days)))
    op.create_index(
        'ix_metric_event_pending_day', 'metric_event', ['day'], unique=False,
        postgresql_where=sa.text('pending'), sqlite_where=sa.text('pending'),
    )
    op.create_index(
        'ix_metric_event_day_latency', 'metric_event', ['day', 'draft_shown', 'latency_ms', 'intent', 'plan', 'agent_id', 'pending'], unique=False
    )
    # SQLite cannot ADD COLUMN with CURRENT_TIMESTAMP as its default: the (small) table is copied
    with op.batch_alter_table('metric_stale_day', schema=None, recreate='always') as batch_op:
        batch_op.add_column(
            sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table('metric_stale_day', schema=None, recreate='always') as batch_op:
        batch_op.drop_column('created_at')
    op.drop_index('ix_metric_event_day_latency', table_name='metric_event')
    op.drop_index('ix_metric_event_pending_day', table_name='metric_event')
    with op.batch_alter_table('metric_event', schema=None) as batch_op:
        batch_op.drop_column('pending')
    op.drop_table('job_run')
