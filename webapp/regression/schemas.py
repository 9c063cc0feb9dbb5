"""JSON API shapes of the regression suite, run comparison, baselines and regression alerts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from webapp.core.public import PublicModel
from webapp.regression.models import RegressionCaseBase
from webapp.web.api_schemas import StoredTimestamp


class RegressionCasePublic(RegressionCaseBase, PublicModel):
    """A case of the regression suite (cases are never edited or removed)."""

    id: int
    created_at: StoredTimestamp


class AddedCasePublic(RegressionCasePublic):
    """A case just added, and what the next run must do to include it."""

    next_run: str = Field(description="The next run must include this case (the pilot gate waits for it)")


class SuitePublic(BaseModel):
    """The regression suite and its progress towards the target size."""

    count: int
    target: int
    cases: list[RegressionCasePublic]


class RunName(BaseModel):
    """A run's id and name."""

    id: int
    name: str


class SuiteResultPublic(PublicModel):
    """One regression case in a run: pass, fail, not_run or not_checked, and why."""

    case_id: str
    status: str
    reason: str
    draft_ids: list[int]
    source: str


class SuiteReportPublic(BaseModel):
    """The regression suite's result for a run, case by case (pass_rate null when no case ran)."""

    run: RunName
    passed: int
    failed: int
    not_run: int
    not_checked: int
    pass_rate: float | None
    cases: list[SuiteResultPublic]


class BaselinePublic(BaseModel):
    """Whether a run is now the baseline of its dataset."""

    run: str
    is_baseline: bool


class RegressionAlertPublic(PublicModel):
    """A regression alert: a golden example failing or a pass-rate drop, and who acknowledged it."""

    id: int
    run: str
    kind: str
    message: str
    evidence: dict[str, object]
    created_at: StoredTimestamp
    acknowledged_by: int | None
    acknowledged_at: StoredTimestamp | None
    kind_label: str


class PassRateReadingPublic(PublicModel):
    """A run's pass rate minus its baseline's from their judge + human samples, with the 95% interval and its reading."""

    run: RunName
    baseline: RunName
    estimate: float | None = Field(description="Run minus baseline, as a share (-0.072 = -7.2 points); null until both runs have two human grades")
    low: float | None
    high: float | None
    threshold: float = Field(description="The alert's drop as a share (0.05 = 5 points)")
    verdict: str = Field(description="drop (upper bound below -threshold: the alert is raised), no_drop (lower bound at or above -threshold) or undecided")
    text: str = Field(description="As the page shows it: 'pass rate -7.2 points [-11.0, -3.4]'")
    hint: str
    cases: int = Field(description="Gradable cases both runs drafted (the comparison is on these)")
    graded: int
    baseline_graded: int
    pending: int = Field(description="Drawn drafts of either run still waiting for a final grade (the reading stays undecided)")
    ppi_page: str = Field(description="The run's PPI page, where a lead draws a further sample")
    baseline_ppi_page: str


class RegressionAlertsPublic(BaseModel):
    """Regression alerts, newest first, and the sampled pass-rate readings (undecided ones raise no alert)."""

    count: int
    alerts: list[RegressionAlertPublic]
    pass_rate_readings: list[PassRateReadingPublic]


# --- comparison of two runs ---------------------------------------------------------------------


class PairedTestPublic(PublicModel):
    """Cases with an outcome in both runs, how many changed each way, and the exact McNemar test."""

    pairs: int
    fixed: int
    broke: int
    p_value: float | None
    significant: bool
    note: str


class SidePublic(PublicModel):
    """One case in one run: its drafts, whether it passes every check (null: not checked), failed checks."""

    draft_ids: list[int]
    passed: bool | None
    failed_checks: list[str]


class CaseRowPublic(PublicModel):
    """One case across the two runs (a side is null when that run has no draft of the case)."""

    case_id: str
    category: str | None
    intent: str | None
    golden: bool
    change: str
    a: SidePublic | None
    b: SidePublic | None


class PassCount(BaseModel):
    """Passes over applicable drafts in one run (rate null when none applies)."""

    passed: int
    total: int
    rate: float | None


class CheckDeltaPublic(PublicModel):
    """One check (or all checks together) in both runs, the change, and the paired test."""

    key: str
    label: str
    a: PassCount
    b: PassCount
    delta: float | None
    paired: PairedTestPublic
    fixed_cases: list[str] = Field(description="Cases whose A side fails this check and B side does not (from the case table).")
    broke_cases: list[str] = Field(description="Cases whose B side fails this check and A side does not (from the case table).")


class GradedMean(BaseModel):
    """A rubric criterion's mean final grade in one run (factual accuracy: share of pass)."""

    mean: float | None
    graded: int


class RubricDeltaPublic(PublicModel):
    """A rubric criterion in both runs; the paired test for pass/fail criteria only."""

    key: str
    name: str
    a: GradedMean
    b: GradedMean
    delta: float | None
    paired: PairedTestPublic | None


class ComparisonPublic(BaseModel):
    """Two runs over the same dataset compared case by case (rubric null until either has final grades)."""

    a: RunName
    b: RunName
    overall: CheckDeltaPublic = Field(description="All checks over the cases both runs have, checked in both")
    paired_cases: int = Field(description="Cases both runs have, checked in both: what overall and every check compare")
    apart: str = Field(description="The cases left out of the figures: '3 cases only in A, 0 only in B'")
    counts: dict[str, int] = Field(description="Cases per outcome: fixed, broke, unchanged_pass, ...")
    cases: list[CaseRowPublic]
    checks: list[CheckDeltaPublic]
    rubric: list[RubricDeltaPublic] | None


# --- requests ---------------------------------------------------------------------------------------------


class CaseFilters(BaseModel):
    """Which two runs to compare and which of their cases to list."""

    a: str = Field("", description="Run A (before): name or id")
    b: str = Field("", description="Run B (after): name or id")
    category: str = ""
    intent: str = Field("", description="The case's intent")
    golden: Literal["", "yes", "no"] = ""
    outcome: Literal["", "fixed", "broke", "unchanged_pass", "unchanged_fail", "only_a", "only_b", "not_checked"] = ""
    format: Literal["", "json", "csv"] = ""

    def case_filters(self) -> dict[str, str]:
        """Return the filters that select cases."""
        return {"category": self.category, "intent": self.intent, "golden": self.golden, "outcome": self.outcome}
