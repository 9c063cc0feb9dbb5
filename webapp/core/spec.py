"""The evaluation plan as typed data, loaded from the eval spec YAML file.

Every number of the plan (rubric, checks, online-metric targets and alerts, launch gates,
review cadence) is read from here; code never hard-codes them.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from webapp.core.safe_input import InputLimitError, load_yaml

Category = Literal["routine", "edge", "adversarial", "safety"]
CATEGORIES: tuple[str, ...] = ("routine", "edge", "adversarial", "safety")


class SpecError(ValueError):
    """The eval spec file is missing or malformed; the message names the file and key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetSpec(_Strict):
    categories: dict[Category, float]
    pilot_size: int = Field(gt=0)
    production_size: int = Field(gt=0)

    @field_validator("categories")
    @classmethod
    def _shares_sum_to_one(cls, v: dict[str, float]) -> dict[str, float]:
        if abs(sum(v.values()) - 1.0) > 1e-6:
            raise ValueError(f"category shares must add up to 1.0, not {sum(v.values()):g}")
        return v


# The rubric's criteria are stored as columns of the grade tables (grade, final_grade, reference_grade):
# a criterion the tables have no column for could not be graded, so the spec must name exactly these.
RUBRIC_COLUMNS: dict[str, str] = {
    "factual_accuracy": "pass_fail",
    "citation_relevance": "scale",
    "tone": "scale",
    "completeness": "scale",
}


def _rubric_columns_text() -> str:
    return ", ".join(f"{k} ({kind})" for k, kind in RUBRIC_COLUMNS.items())


class Criterion(_Strict):
    key: str
    name: str
    kind: Literal["pass_fail", "scale"]
    question: str = ""
    pass_rule: str = ""
    min: int | None = None
    max: int | None = None
    pass_threshold: int | None = None
    guidance: dict[str | int, str] = Field(default_factory=dict)

    @field_validator("key")
    @classmethod
    def _is_a_grade_column(cls, v: str) -> str:
        if v not in RUBRIC_COLUMNS:
            raise ValueError(
                f"{v!r} is not a criterion grades can be stored for; the rubric's keys are {_rubric_columns_text()}"
            )
        return v

    @field_validator("kind")
    @classmethod
    def _kind_of_its_column(cls, v: str, info: ValidationInfo) -> str:
        key = info.data.get("key")
        if key in RUBRIC_COLUMNS and RUBRIC_COLUMNS[key] != v:
            raise ValueError(f"criterion {key!r} is stored as {RUBRIC_COLUMNS[key]}, so its kind must be {RUBRIC_COLUMNS[key]}")
        return v

    @model_validator(mode="after")
    def _scale_bounds(self) -> Criterion:
        if self.kind == "scale":
            if self.min is None or self.max is None or self.pass_threshold is None:
                raise ValueError(f"scale criterion {self.key!r} needs min, max and pass_threshold")
            if not self.min <= self.pass_threshold <= self.max:
                raise ValueError(f"pass_threshold of {self.key!r} must lie within min..max")
        return self

    @property
    def is_scale(self) -> bool:
        return self.kind == "scale"


class RubricSpec(_Strict):
    criteria: list[Criterion]

    @field_validator("criteria")
    @classmethod
    def _one_factual(cls, v: list[Criterion]) -> list[Criterion]:
        keys = [c.key for c in v]
        if len(set(keys)) != len(keys):
            raise ValueError("criterion keys must be unique")
        if sum(c.kind == "pass_fail" for c in v) != 1:
            raise ValueError("exactly one pass_fail criterion (factual accuracy) is required")
        missing = [k for k in RUBRIC_COLUMNS if k not in keys]
        if missing:
            raise ValueError(
                f"missing criterion {', '.join(map(repr, missing))}; the rubric's keys are {_rubric_columns_text()}"
            )
        return v

    @property
    def factual(self) -> Criterion:
        return next(c for c in self.criteria if c.kind == "pass_fail")

    @property
    def scales(self) -> list[Criterion]:
        return [c for c in self.criteria if c.kind == "scale"]

    def criterion(self, key: str) -> Criterion:
        return next(c for c in self.criteria if c.key == key)


class DisagreementSpec(_Strict):
    scale_difference: int = Field(ge=1)
    opposite_sides_of_threshold: bool = True


class GradingSpec(_Strict):
    graders_per_draft: int = Field(ge=1)
    reservation_minutes: int = Field(ge=1)
    disagreement: DisagreementSpec
    # Blind grading: the model's confidence, judge scores and check results stay hidden until the grader submits.
    show_model_signals_before_grading: bool = False


PiiKind = Literal["email", "phone", "account_number", "ssn", "payment_card"]
ExpectedBehavior = Literal["draft", "fallback", "escalate"]


class ChecksSpec(_Strict):
    min_words: int = Field(ge=0)
    max_words: int = Field(gt=0)
    confidence_fallback: float = Field(ge=0, le=1)
    pii_kinds: list[PiiKind]
    account_number_pattern: str
    phone_regions: list[str] = Field(default_factory=lambda: ["US"])
    # Beyond the spec's seven checks: what a case expects when its expected_behavior is not set.
    expected_behavior_by_category: dict[Category, ExpectedBehavior] = Field(
        default_factory=lambda: {"routine": "draft", "safety": "escalate"}
    )

    @field_validator("account_number_pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        import re

        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return v


class RegressionSpec(_Strict):
    alert_pass_rate_drop: float = Field(ge=0, le=1)
    target_cases: int = Field(ge=0)
    target_months: int = Field(ge=0)


MetricName = Literal[
    "accept_rate",
    "reject_rate",
    "edit_distance",
    "escalation_rate",
    "handle_time_s",
    "latency_p95_s",
    "hallucination_reports",
    "cost_per_draft",
]
METRIC_NAMES: tuple[str, ...] = MetricName.__args__


class TargetRule(_Strict):
    op: Literal[">", "<", ">=", "<=", "==", "within_baseline"]
    value: float


class AlertRule(_Strict):
    op: Literal[">", "<", ">=", "<=", "above_baseline"]
    value: float
    window: Literal["consecutive_days", "trailing_mean"]
    days: int = Field(ge=1)


class PilotPeriod(_Strict):
    start: dt.date
    end: dt.date

    @model_validator(mode="after")
    def _ordered(self) -> PilotPeriod:
        if self.end < self.start:
            raise ValueError("pilot end is before its start")
        return self


class OnlineMetricsSpec(_Strict):
    minor_edit_limit: float = Field(ge=0, le=1)
    escalation_baseline: float = Field(ge=0, le=1)
    pilot: PilotPeriod
    holidays: list[dt.date] = Field(default_factory=list)
    targets: dict[MetricName, TargetRule]
    alerts: dict[MetricName, AlertRule]


class PilotGateSpec(_Strict):
    min_cases: int = Field(ge=1)
    automated_pass_rate: float = Field(ge=0, le=1)
    human_mean_above: float
    factual_pass_score: float
    factual_fail_score: float
    golden_factual_failures_allowed: int = Field(ge=0)
    safety_escalation_rate: float = Field(ge=0, le=1)
    regression_pass_rate: float = Field(ge=0, le=1)


class ProductionGateSpec(_Strict):
    min_cases: int = Field(ge=1)
    consecutive_business_days: int = Field(ge=1)
    confirmed_hallucinations_allowed: int = Field(ge=0)
    survey_net_positive: bool = True
    survey_min_responses: int = Field(default=8, ge=1)  # the pilot's 8 agents


HumanGradingReading = Literal["plan", "intervals"]


class GatesSpec(_Strict):
    pilot: PilotGateSpec
    production: ProductionGateSpec
    # How the gates' human-grading criteria read a run with a PPI sample: "plan" (the plan's way:
    # every graded example counts, the observed averages against the thresholds, pass/fail) or
    # "intervals" (each criterion's 95% interval: pass/fail/undecided on its bounds). Issue 34.
    human_grading: HumanGradingReading = "plan"
    # Roles whose "go" a gate decision needs ("results reviewed by PM and ML lead before deploy").
    signoff_roles: list[Literal["pm", "ml_lead", "lead"]] = Field(default_factory=lambda: ["pm", "ml_lead"], min_length=1)


class ReviewSpec(_Strict):
    phase: Literal["pilot", "post_launch_month1", "steady_state"]
    weekly_pairs: int = Field(ge=1)
    monthly_pairs: int = Field(ge=1)

    @property
    def cadence(self) -> Literal["weekly", "monthly"]:
        return "monthly" if self.phase == "steady_state" else "weekly"

    @property
    def sample_size(self) -> int:
        return self.monthly_pairs if self.cadence == "monthly" else self.weekly_pairs


class AlertsSpec(_Strict):
    # Hours without any event (during and after the pilot) before the "no data" alert fires.
    no_data_hours: float = Field(default=6, gt=0)


class MetricsViewSpec(_Strict):
    # Days with fewer events than this are drawn hollow on the metrics charts (a rate over fewer
    # than 50 events has a 95% interval of about +-12 points, wider than a target-to-alert gap).
    low_volume_events: int = Field(default=50, ge=1)


def _default_weekly_targets() -> dict[str, float]:
    return dict.fromkeys(RUBRIC_COLUMNS, 3.5)


class TeamTargetsSpec(_Strict):
    """Targets the team set for itself, beyond the plan (pages label them "the team's target")."""

    # Production weeks' human-graded quality, per rubric criterion as the pilot gate reads it
    # (factual accuracy: the average with pass = gates.pilot.factual_pass_score, fail =
    # factual_fail_score; the others: the 1-5 average). The weekly `human_quality` alert fires for
    # a final week when a criterion's 95% upper bound is below its target here.
    weekly_human_quality: dict[str, float] = Field(default_factory=_default_weekly_targets)

    @field_validator("weekly_human_quality")
    @classmethod
    def _every_criterion(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = [k for k in v if k not in RUBRIC_COLUMNS]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))} is not a rubric criterion; the rubric's keys are {_rubric_columns_text()}")
        missing = [k for k in RUBRIC_COLUMNS if k not in v]
        if missing:
            raise ValueError(f"missing a target for {', '.join(map(repr, missing))}: give one per rubric criterion")
        bad = [k for k, t in v.items() if not 1 <= t <= 5]
        if bad:
            raise ValueError(f"the target of {bad[0]!r} must lie within 1..5 (the gate's scale)")
        return v


class EvalSpec(_Strict):
    version: int
    timezone: str = "UTC"
    intents: list[str] = Field(min_length=1)
    dataset: DatasetSpec
    rubric: RubricSpec
    grading: GradingSpec
    checks: ChecksSpec
    regression: RegressionSpec
    online_metrics: OnlineMetricsSpec
    gates: GatesSpec
    review: ReviewSpec
    alerts: AlertsSpec = Field(default_factory=AlertsSpec)
    metrics: MetricsViewSpec = Field(default_factory=MetricsViewSpec)
    team_targets: TeamTargetsSpec = Field(default_factory=TeamTargetsSpec)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {v!r}") from exc
        return v

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


def load_spec(path: Path) -> EvalSpec:
    """Read and validate the eval spec file; raise SpecError naming the file and the bad key."""
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(f"{path}: eval spec file not found") from exc
    except InputLimitError as exc:
        raise SpecError(f"{path}:{exc.line}: refused: {exc.message}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the eval spec must be a mapping of keys")
    try:
        return EvalSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise SpecError(f"{path}: key '{key}': {first['msg']}") from exc
