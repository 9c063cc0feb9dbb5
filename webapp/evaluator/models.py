"""Recorded evaluator runs: the run's settings and overall statistics, per-case statistics, judge scores.

A recorded run is also an ordinary Run (source "evaluator") with one Draft per case and
sample, so its drafts go through the automated checks and human grading like any other.
Variance warnings are the per-case metric rows with `high_variance` true.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from sqlalchemy import JSON, Column, Integer, Text, UniqueConstraint
from sqlmodel import Field, SQLModel
from sqlmodel.sql.sqltypes import AutoString

from webapp.core.timeutil import aware_datetime_type, utcnow
from webapp.evaluator.artifact_models import CaseStatus, RunStatus, SampleStatus
from webapp.evaluator.json_types import JsonObject


class EvaluatorRun(SQLModel, table=True):
    __tablename__: ClassVar[str] = "evaluator_run"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="run.id", unique=True, index=True, ondelete="CASCADE")
    artifact_run_id: str = Field(max_length=64, unique=True, index=True)  # the run_id of dataset_evaluation.json
    status: RunStatus = Field(sa_type=AutoString(length=12))
    description: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    dataset_hash: str = Field(max_length=71)
    rubric_name: str = Field(max_length=200)
    rubric_hash: str = Field(max_length=71)
    generator_model: str = Field(max_length=200)
    judge_model: str = Field(max_length=200)
    temperature: float
    seed: int | None = None
    num_samples: int
    # [{"name": ..., "scale": {"min": 1, "max": 5}, "description": ...}] and the flag names, in rubric order.
    metrics: list[JsonObject] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    flags: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    overall_metric_stats: dict[str, JsonObject] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    overall_flag_stats: dict[str, JsonObject] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # --judge-repeats K, and the artifact's judge_self_agreement ({repeats, metrics, flags}) when K > 1.
    judge_repeats: int = Field(default=1, sa_column=Column(Integer, nullable=False, server_default="1"))
    judge_self_agreement: JsonObject | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    timestamp_start: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    timestamp_end: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    recorded_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())


class EvaluatorCaseMetric(SQLModel, table=True):
    """One metric of one case: mean, std, min, max and count over the valid samples."""

    __tablename__: ClassVar[str] = "evaluator_case_metric"
    __table_args__ = (UniqueConstraint("evaluator_run_id", "case_pk", "metric", name="uq_evaluator_case_metric"),)

    id: int | None = Field(default=None, primary_key=True)
    evaluator_run_id: int = Field(foreign_key="evaluator_run.id", index=True, ondelete="CASCADE")
    case_pk: int = Field(foreign_key="eval_case.id", index=True)
    case_status: CaseStatus = Field(sa_type=AutoString(length=12))
    metric: str = Field(max_length=100)
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    count: int = 0
    high_variance: bool = False


class EvaluatorCaseFlag(SQLModel, table=True):
    """One flag of one case: how often it was true over the valid samples."""

    __tablename__: ClassVar[str] = "evaluator_case_flag"
    __table_args__ = (UniqueConstraint("evaluator_run_id", "case_pk", "flag", name="uq_evaluator_case_flag"),)

    id: int | None = Field(default=None, primary_key=True)
    evaluator_run_id: int = Field(foreign_key="evaluator_run.id", index=True, ondelete="CASCADE")
    case_pk: int = Field(foreign_key="eval_case.id", index=True)
    flag: str = Field(max_length=100)
    true_count: int = 0
    false_count: int = 0
    total_count: int = 0
    true_proportion: float | None = None


class EvaluatorJudgeScore(SQLModel, table=True):
    """The judge's verdict on one draft (one sample); scores and flags are null unless it completed."""

    __tablename__: ClassVar[str] = "evaluator_judge_score"

    id: int | None = Field(default=None, primary_key=True)
    evaluator_run_id: int = Field(foreign_key="evaluator_run.id", index=True, ondelete="CASCADE")
    draft_id: int = Field(foreign_key="draft.id", unique=True, index=True, ondelete="CASCADE")
    sample_status: SampleStatus = Field(sa_type=AutoString(length=24))
    scores: dict[str, int | float] | None = Field(default=None, sa_column=Column(JSON))
    flags: dict[str, bool] | None = Field(default=None, sa_column=Column(JSON))
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    error: str | None = Field(default=None, sa_column=Column(Text))
