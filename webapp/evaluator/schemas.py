"""JSON API shapes of a recorded prompt-evaluator run (the run page's report, with the same blind rule)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from webapp.core.db import stored_id
from webapp.core.public import PublicModel
from webapp.evaluator.artifact_models import RunStatus, SampleStatus
from webapp.evaluator.models import EvaluatorCaseFlag, EvaluatorCaseMetric
from webapp.evaluator.report import (
    CaseRow,
    CaseRowStatus,
    CriterionAgreement,
    EvaluatorReport,
    JudgeRow,
    SelfAgreement,
)


class EvaluatorRunRef(BaseModel):
    """The run as recorded: its id and name here, the evaluator's own run id, its status."""

    id: int
    name: str
    artifact_run_id: str
    status: RunStatus


class RubricRef(BaseModel):
    """The judge's rubric: name, content hash, its metrics and flags."""

    name: str
    hash: str
    metrics: list[str]
    flags: list[str]


class MetricStats(PublicModel):
    """A metric's statistics over the samples of a case."""

    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    count: int
    high_variance: bool


class FlagStats(PublicModel):
    """A flag's counts over the samples of a case."""

    true_count: int
    false_count: int
    total_count: int
    true_proportion: float | None


class OverallMetricStats(BaseModel):
    """A metric over the run: the mean, lowest and highest of the per-case means."""

    mean_of_means: float | None
    min_of_means: float | None
    max_of_means: float | None
    num_cases: int


class CasePublic(PublicModel):
    """One test case's statistics (null while hidden from a grader who has not graded its drafts)."""

    test_case_id: str
    status: CaseRowStatus = Field(description="The case's status; empty for a case with flags only")
    visible: bool
    per_metric_stats: dict[str, MetricStats] | None
    per_flag_stats: dict[str, FlagStats] | None


class VarianceWarning(MetricStats):
    """A case whose metric varies more than the rubric allows across samples."""

    test_case_id: str
    metric: str


class JudgeScorePublic(PublicModel):
    """The judge's verdict on one draft (scores, flags, rationale and error null while hidden)."""

    draft_id: int
    test_case_id: str
    sample_index: int
    status: SampleStatus
    visible: bool
    scores: dict[str, int | float] | None
    flags: dict[str, bool] | None
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
    overall_metric_stats: dict[str, OverallMetricStats] | None
    overall_flag_stats: dict[str, FlagStats] | None
    cases: list[CasePublic]
    variance_warnings: list[VarianceWarning]
    judge_scores: list[JudgeScorePublic]
    agreement: list[CriterionAgreement]
    judge_repeats: int
    judge_self_agreement: list[SelfAgreement]
    graded_drafts: int


def _metric(m: EvaluatorCaseMetric) -> MetricStats:
    return MetricStats.of(m)


def _flag(f: EvaluatorCaseFlag) -> FlagStats:
    return FlagStats.of(f)


def _case(c: CaseRow) -> CasePublic:
    return CasePublic.of(
        c,
        test_case_id=c.case_id,
        per_metric_stats={k: _metric(m) for k, m in c.metrics.items()} if c.visible else None,
        per_flag_stats={k: _flag(f) for k, f in c.flags.items()} if c.visible else None,
    )


def _judge_score(j: JudgeRow) -> JudgeScorePublic:
    hidden: dict[str, object] = {} if j.visible else {"scores": None, "flags": None, "rationale": None, "error": None}
    return JudgeScorePublic.of(j, test_case_id=j.case_id, **hidden)


def report_public(r: EvaluatorReport) -> EvaluatorReportPublic:
    """Return the JSON answer of a run's report (the run page's view; hidden figures null, as on the page)."""
    ev = r.ev
    return EvaluatorReportPublic(
        run=EvaluatorRunRef(id=stored_id(r.run.id), name=r.run.name, artifact_run_id=ev.artifact_run_id, status=ev.status),
        rubric=RubricRef(name=ev.rubric_name, hash=ev.rubric_hash, metrics=r.metric_names, flags=r.flag_names),
        dataset_hash=ev.dataset_hash,
        generator_model=ev.generator_model,
        judge_model=ev.judge_model,
        num_samples=ev.num_samples,
        hidden_drafts=r.hidden_drafts,
        overall_metric_stats=(
            {k: OverallMetricStats.model_validate(v) for k, v in ev.overall_metric_stats.items()} if r.overall_visible else None
        ),
        overall_flag_stats={k: FlagStats.model_validate(v) for k, v in ev.overall_flag_stats.items()} if r.overall_visible else None,
        cases=[_case(c) for c in r.cases],
        variance_warnings=[
            VarianceWarning(test_case_id=cid, metric=m.metric, **_metric(m).model_dump()) for cid, m in r.warnings
        ],
        judge_scores=[_judge_score(j) for j in r.judge_rows],
        agreement=r.agreement,
        judge_repeats=ev.judge_repeats,
        judge_self_agreement=r.self_agreement,
        graded_drafts=r.graded,
    )
