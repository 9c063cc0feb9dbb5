"""Job runs: each background job's last success and last error, for /healthz and Prometheus."""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow


class JobRun(SQLModel, table=True):
    """One background job (metrics rebuild, alerts, retention): how its passes went, shared by every process.

    One row per job, written after every pass by whichever process ran it (webapp/app/jobs.py), so a web
    process reports on jobs that run in a separate `draftdesk jobs` process too. The job's period is
    stored with it: the reader judges "no success for three periods" without knowing the job.
    """

    __tablename__: ClassVar[str] = "job_run"

    job: str = Field(primary_key=True, max_length=100)
    period_s: float
    first_run_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    last_run_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    last_success_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    last_error_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    last_error: str | None = Field(default=None, sa_column=Column(Text))
    # failed passes since the last success (0 after a success)
    failures: int = 0
