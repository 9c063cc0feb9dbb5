"""JSON API shapes of a recorded prompt-evaluator run (the run page's report, with the same blind rule)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from webapp.evaluator.service import CriterionAgreement, SelfAgreement


class EvaluatorRunRef(BaseModel):
    """The run as recorded: its id and name here, the evaluator's own run id, its status."""

    id: int
    name: str
    artifact_run_id: str
    status: str


class RubricRef(BaseModel):
    """The judge's rubric: name, content hash, its metrics and flags."""

    name: str
    hash: str
    metrics: list[str]
    flags: list[str]


class MetricStats(BaseModel):
    """A metric's statistics over the samples of a case."""

    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    count: int
    high_variance: bool


class FlagStats(BaseModel):
    """A flag's counts over the samples of a case."""

    true_count: int
    false_count: int
    total_count: int
    true_proportion: float | None


class CasePublic(BaseModel):
    """One test case's statistics (null while hidden from a grader who has not graded its drafts)."""

    test_case_id: str
    status: str
    visible: bool
    per_metric_stats: dict[str, MetricStats] | None
    per_flag_stats: dict[str, FlagStats] | None


class VarianceWarning(MetricStats):
    """A case whose metric varies more than the rubric allows across samples."""

    test_case_id: str
    metric: str


class JudgeScorePublic(BaseModel):
    """The judge's verdict on one draft (scores, flags, rationale and error null while hidden)."""

    draft_id: int
    test_case_id: str
    sample_index: int
    status: str
    visible: bool
    scores: dict[str, Any] | None
    flags: dict[str, Any] | None
    rationale: str | None
    error: str | None


class EvaluatorReportPublic(BaseModel):
    """A recorded run's statistics, variance warnings, judge scores and judge-human agreement."""

    run: EvaluatorRunRef
    rubric: RubricRef
    dataset_hash: str
    generator_model: str
    judge_model: str
    num_samples: int
    hidden_drafts: int = Field(description="Drafts whose judge scores are hidden from the caller")
    overall_metric_stats: dict[str, Any] | None
    overall_flag_stats: dict[str, Any] | None
    cases: list[CasePublic]
    variance_warnings: list[VarianceWarning]
    judge_scores: list[JudgeScorePublic]
    agreement: list[CriterionAgreement]
    judge_repeats: int
    judge_self_agreement: list[SelfAgreement]
    graded_drafts: int
