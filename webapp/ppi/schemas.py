"""JSON shapes of the PPI API."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EstimatePublic(BaseModel):
    """One PPI estimate with its 95% interval (the API's `interval`, `single` and `learned`)."""

    estimate: float
    low: float
    high: float
    se: float
    df: float
    confidence: float
    judge_alone: float
    bias: float = Field(description="Judge alone minus the estimate: the bias the human sample removed")
    lambdas: list[float] = Field(description="Lambda of each cross-fitting fold (one value below 60 grades)")
    human_grades: int
    drafts: int
    worth_human_grades: float = Field(description="Human-only grades that would give an interval this narrow")
    estimand: Literal["run", "superpopulation"] = Field(
        description="What the interval is about: the run's own drafts (width 0 once all are graded) or drafts like these"
    )
    about: str = Field(description="The estimand as the page labels it, e.g. \"about this run's 100 drafts\"")
    predictor: str = Field(default="judge", description="What stood in for the human grade: \"judge\" (one score) or the learned predictor")
    r_squared: float | None = Field(
        default=None, description="The learned predictor's out-of-fold R-squared with the human grades (None for one score)"
    )


IntervalPublic = EstimatePublic  # the name before issue 36


class GatePublic(BaseModel):
    """The gate's reading of one figure against its threshold."""

    threshold: float
    verdict: Literal["pass", "fail", "undecided"]
    more_grades: int | None = Field(
        description="Undecided only: about how many further grades, beyond the drafts already drawn, the confidence "
        "sequence needs to decide (0: grading the drafts already drawn should; the gate shows the same count)"
    )
    provisional: bool = Field(default=False, description="Drawn drafts still wait for their final grades: the verdict may change")
    sequence_low: float | None = Field(
        default=None, description="The confidence sequence's lower bound at this look (valid at every look at once; the verdict reads it)"
    )
    sequence_high: float | None = Field(default=None, description="The confidence sequence's upper bound at this look")
    grades: int = Field(default=0, description="The human grades the call rests on")


class FigurePublic(BaseModel):
    """One rubric figure: the estimate the gate uses (`interval`), the two it was chosen from, judge health and what the signals bought."""

    key: str
    title: str
    unit: Literal["share", "grade"]
    interval: IntervalPublic | None
    agreement: float | None = Field(description="Judge and human agree on the graded drafts (within 1 point on 1-5)")
    judge_minus_human: float | None = Field(
        description="The judge's bias over the run's drafts from the graded ones (1/pi-weighted mean of judge minus human)"
    )
    bias_matches_gap: bool = Field(
        default=False, description="interval.bias equals judge_minus_human (every lambda is 1 and the single score is used); otherwise lambda < 1 or the learned predictor explains the gap"
    )
    low_lambda_warning: bool
    gate: GatePublic | None
    single: EstimatePublic | None = Field(default=None, description="The single-score estimate (the judge's first call)")
    learned: EstimatePublic | None = Field(
        default=None, description="The learned-predictor estimate from the judge's signals; None when the run has no signals"
    )
    uses_learned: bool = Field(
        default=False, description="`interval` (what the gate uses) is the learned estimate: its worth is >= 1.2 x the human "
        "grades and >= the single score's"
    )
    signals_note: str | None = Field(
        default=None, description="Why the gate uses the single-score estimate although signals exist, or the human grades alone"
    )
    source: Literal["learned", "single", "human"] = Field(
        default="single", description="Which estimate `interval` is: the learned predictor's, the single judge score's, or the "
        "human grades alone (read when the judge's estimate is worth fewer grades than people gave)"
    )
    signal_columns: list[str] = Field(default_factory=list, description="The learned predictor's signals: calls_mean, calls_sd, second, expected")
    call_to_call_share: float | None = Field(
        default=None, description="Share of the judge's error that changes from call to call: mean within-draft variance of the "
        "calls / variance of the first call's error against the human grade (graded drafts with >= 2 calls)"
    )
    judges_error_correlation: float | None = Field(
        default=None, description="Correlation of (first call - human) and (second judge - human) on the graded drafts"
    )


class JudgeCostPublic(BaseModel):
    """What the judge cost per draft of the run."""

    calls_per_draft: float = Field(description="Judge calls per draft, both judges, failed calls included")
    usd_per_draft: float | None = Field(description="Dollars per draft; None when the judge configuration gives no prices")


class RunReportPublic(BaseModel):
    """A run's rubric figures with 95% intervals, the sample's counts and the judge's cost."""

    run_id: int
    drafts: int
    drawn: int
    graded: int
    pending: int
    rounds: int
    judge_version: str
    seed: int
    figures: list[FigurePublic]
    judge_cost: JudgeCostPublic | None = None
    week: str | None = Field(default=None, description="The production week whose run this is: its figures are those /metrics shows")
    figures_state: Literal["current", "updating"] = Field(
        default="current", description="updating: grades or draws changed since these figures were computed (recomputed within seconds)"
    )


RunIntervalsPublic = RunReportPublic  # the name before issue 36


class SampleIn(BaseModel):
    budget: float = Field(gt=0, allow_inf_nan=False, description="Expected number of sampled drafts, besides the forced ones")
    judge_version: str = Field(min_length=1, max_length=200)
    seed: int | None = Field(default=None, ge=0, le=2**31 - 2)


class FurtherSampleIn(BaseModel):
    budget: float = Field(gt=0, allow_inf_nan=False)
    seed: int | None = Field(default=None, ge=0, le=2**31 - 2)


class SamplePublic(BaseModel):
    run_id: int
    round: int
    drafts: int
    forced: int
    drawn: int
    expected: float
    seed: int
    error_model_id: int | None


class ProductionWeekIn(BaseModel):
    week: str = Field(min_length=1, max_length=10, description="ISO week, e.g. 2026-W47")
    budget: float = Field(gt=0, allow_inf_nan=False, description="Human-grading budget: expected number of drafts people grade")
    seed: int | None = Field(default=None, ge=0, le=2**31 - 2, description="Seed of the uniform draw when the week has more drafts than the cap")


class ProductionWeekPublic(BaseModel):
    created: bool = Field(description="False: the week had its run already, nothing was changed")
    week: str
    run_id: int
    run_name: str
    events_with_draft: int
    drafts_taken: int
    cap: int
    cap_seed: int
    budget: float


class WeekCriterionPublic(BaseModel):
    """One rubric criterion of a production week, as the pilot gate reads it (factual accuracy: pass 5, fail 1)."""

    key: str
    name: str
    estimate: float | None = Field(description="PPI estimate (1-5); None until two drawn drafts have final grades")
    low: float | None
    high: float | None
    team_target: float = Field(description="The team's target (team_targets.weekly_human_quality), not the plan's")
    below_target: bool = Field(description="Final week and the 95% upper bound is below the team's target")


class WeekQualityPublic(BaseModel):
    week: str
    start: str
    end: str
    run_name: str
    drafts: int
    sampled: bool
    drawn: int
    graded: int
    pending: int
    provisional: bool
    estimate: float | None = Field(description="Overall quality (mean of the four criteria, 1-5), PPI estimate; no target")
    low: float | None
    high: float | None
    below_target: bool = Field(description="The alert: a final week with a criterion whose 95% upper bound is below the team's target")
    criteria: list[WeekCriterionPublic] = Field(description="Each rubric criterion as the pilot gate reads it, against the team's target")
    figures_state: Literal["current", "updating"] = Field(
        default="current", description="updating: grades or draws changed since the week's figures were computed (or none yet)"
    )
    estimand: Literal["run", "superpopulation"] = Field(
        description="What the interval is about: a week's figure is about drafts like the week's (superpopulation)"
    )


class JudgeRunView(BaseModel):
    """A Draft Desk run the PPI judge scored: its sample's state and the page with its intervals."""

    run_id: int
    run_name: str
    judge_version: str
    judged: int = Field(description="Drafts the judge scored")
    drawn: int = Field(description="Drafts the sample drew for human grading (0: no sample yet)")
    graded: int = Field(description="Drawn drafts with a final grade")
    rounds: int
    href: str = Field(description="The run's intervals page")

    @property
    def pending(self) -> int:
        """Return how many drawn drafts still wait for their final grade."""
        return self.drawn - self.graded


class UntilDecidedIn(BaseModel):
    """The lead's "grade until decided" setting of a sampled run (PUT: the same body again changes nothing)."""

    model_config = ConfigDict(extra="forbid")

    on: bool = Field(description="True: grade the run until decided (its queue closes by itself); false: grade the whole sample again")
    cap: int | None = Field(
        default=None, ge=1, le=10**9,
        description="The most final grades before the queue closes even if undecided; null: no cap. At most the run's drafts, "
        "and not below the final grades it has",
    )


class DecisionPublic(BaseModel):
    """One call the confidence sequence made on a criterion and that was stored: when, on how many grades, and if re-opened."""

    verdict: Literal["pass", "fail"]
    sequence_low: float = Field(description="The sequence's lower bound when the call was made")
    sequence_high: float = Field(description="The sequence's upper bound when the call was made")
    grades: int = Field(description="The final grades the call rested on")
    rested_on: list[int] | None = Field(
        default=None, description="The drafts whose final grades those were (ids); null for a decision stored before they were kept"
    )
    decided_at: dt.datetime
    reopened_at: dt.datetime | None = Field(default=None, description="When a grade saved after the call made it no longer hold")
    reopened_by: str | None = Field(
        default=None, description="Who saved that grade (the adjudicating lead, or the grader whose revision changed the final grade)"
    )
    reopen_reason: str | None = None


class CriterionCallPublic(BaseModel):
    """One gate criterion's call on the run as it stands, and the stored decisions behind it."""

    key: str
    title: str
    threshold: float
    verdict: Literal["pass", "fail", "undecided"] = Field(description="The confidence sequence's call at this look")
    decided: bool = Field(description="The call is decided and stored (a decision not re-opened)")
    reason: str = Field(description="Why the call is what it is, in words")
    sequence_low: float | None = Field(description="The sequence's bounds at this look (null before any estimate)")
    sequence_high: float | None
    grades: int = Field(description="The final grades this look rests on")
    more_grades: int | None = Field(
        description="Undecided only: about how many further final grades (counted from those given so far) the sequence "
        "needs to decide if the estimate stays where it is; null when decided or with no estimate yet"
    )
    decision: DecisionPublic | None = Field(description="The stored decision that holds (decided only)")
    reopened: list[DecisionPublic] = Field(default_factory=list, description="Earlier decisions re-opened by a later grade, oldest first")


class UntilDecidedPublic(BaseModel):
    """A sampled run's "grade until decided" setting and each gate criterion's call."""

    run_id: int
    run_name: str
    on: bool = Field(description="The run is graded until decided")
    cap: int | None
    set_by: str | None = Field(description="Who set it (email); null when off")
    set_at: dt.datetime | None
    closed: bool = Field(description="The run's queue closed by itself (every criterion decided, or the cap reached)")
    closed_at: dt.datetime | None
    closed_reason: str | None
    drafts: int
    drawn: int
    graded: int
    pending: int
    criteria: list[CriterionCallPublic]
