"""What crosses the chain upwards: reads joining a lower domain with a higher one.

Dependencies run one way (docs/architecture.md, "Layers"): kb → datasets → runs → checks →
grading → regression → gates, with metrics, survey, evaluator, reviews and alerts beside them.
A service never calls a domain above it. Reactions ("after a run is checked, raise its regression
alerts and notify them") are no longer here: the request records a fact and the reacting domain's
reactions.py handles it after the commit (webapp/core/reactions.py, issue 42). What is left are
reads a lower domain's page shows from a higher one (blind grading's signals, the judge's
scores, the CI gate's final grades, the weekly quality beside the metrics). Nothing below the top
imports it but the domains' entry points (routes.py, pages.py, cli.py, home.py).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Collection, Sequence

from pydantic import BaseModel, Field
from sqlalchemy import bindparam, func
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from webapp.auth.service import Principal
from webapp.checks import ci_gate
from webapp.checks import service as checks_service
from webapp.core.blind import ALL_SIGNALS, SignalsView
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.evaluator.models import EvaluatorJudgeScore
from webapp.grading import evidence as grading_evidence
from webapp.grading import status as grading_status
from webapp.grading.evidence import JudgeVerdict
from webapp.grading.models import Grade
from webapp.metrics import alert_states
from webapp.metrics.targets import METRIC_LABELS
from webapp.ppi import charts as ppi_charts
from webapp.ppi import production as ppi_production
from webapp.ppi import report as ppi_report
from webapp.ppi import stored_figures as ppi_stored_figures
from webapp.regression import drop as regression_drop
from webapp.regression.alerts import PassRateDifference
from webapp.regression.case_pair import JudgeLookup
from webapp.runs import service as runs_service
from webapp.runs.models import Run

# ======== runs, checks, regression, evaluator: reads across the chain ========


# --- runs: importing drafts (grades guard what was graded) ---------------------------------------------


def grade_counts(session: Session, draft_ids: list[int]) -> dict[int, int]:
    """Return how many grades each of these drafts has (drafts without any are left out)."""
    if not draft_ids:
        return {}
    rows = session.exec(
        select(Grade.draft_id, func.count()).where(col(Grade.draft_id).in_(draft_ids)).group_by(col(Grade.draft_id))
    ).all()
    return {draft_id: n for draft_id, n in rows}


# Runs' import with grading's grade counts, so that a graded draft keeps its text and citations:
# the same keyword arguments as webapp.runs.service.import_drafts, less that one.
import_drafts = functools.partial(runs_service.import_drafts, grade_counts=grade_counts)


# --- ppi → regression: the sampled pass-rate differences on the alerts pages --------------------------


def pass_rate_readings(*, session: Session, spec: EvalSpec, baseline_id: int | None = None) -> list[PassRateDifference]:
    """Return the sampled pass-rate difference of every run with a sample whose baseline has one (the alerts page).

    With `baseline_id`: only the runs measured against that baseline.
    """
    return ppi_report.baseline_differences(session=session, spec=spec, baseline_id=baseline_id)


# --- checks → grading: the CI gate reads the golden drafts' final factual grades ------------------------


def baseline_of(*, session: Session, run_id: int) -> Run | None:
    """Return the run the drop alert measures a run from (marked baseline, else the previous checked run), or None.

    The CI verdict's compare link compares with it, so the link shows the comparison the verdict read.
    """
    baseline = regression_drop.alert_baseline(session=session, run_id=run_id)
    return baseline.run if baseline is not None else None


def ci_gate_failures(
    *, session: Session, spec: EvalSpec, summary: checks_service.RunSummary, signals: SignalsView = ALL_SIGNALS
) -> list[str]:
    """Return why a run fails the CI gate: its checks, and the final factual grades of its golden drafts.

    A failure of a draft whose signals `signals` hides is counted, not named (blind grading).
    """
    return ci_verdict(session=session, spec=spec, summary=summary, signals=signals).reasons


def ci_verdict(
    *, session: Session, spec: EvalSpec, summary: checks_service.RunSummary, signals: SignalsView = ALL_SIGNALS
) -> ci_gate.CiVerdict:
    """Return the CI verdict on a run (webapp.checks.ci_gate): criterion 1 whole, golden and safety, the drop alert."""
    finals = grading_status.final_grades(session=session, run_id=summary.run_id)
    factual = {draft_id: view.factual_accuracy for draft_id, view in finals.items()}
    return ci_gate.ci_verdict(
        summary=summary, spec=spec, factual=factual, signals=signals,
        eval_set=checks_service.eval_set_facts(session=session, spec=spec, dataset_id=summary.dataset_id),
        drop=regression_drop.drop_reading(session=session, spec=spec, run_id=summary.run_id, summary=summary),
    )


# --- grading → runs, checks, regression: blind grading on the pages below grading -----------------------


def signals_view(
    *, session: Session, spec: EvalSpec, principal: Principal | None, run_id: int | None = None, draft_ids: Collection[int] = ()
) -> SignalsView:
    """Return which drafts' model signals the viewer sees (webapp.core.blind's rule; grading knows what they graded)."""
    return grading_evidence.signals_view(session=session, spec=spec, principal=principal, run_id=run_id, draft_ids=draft_ids)


# --- evaluator → regression: the judge's scores on the run comparison -----------------------------------


def judge_scores(*, session: Session, spec: EvalSpec, principal: Principal | None) -> JudgeLookup:
    """Return how the comparison reads the judge's scores of a draft, hidden from blind graders until they graded it."""
    views: dict[int, SignalsView] = {}

    def lookup(*, run_id: int, draft_id: int) -> tuple[dict[str, object] | None, bool]:
        verdict = judge_verdict(session, draft_id)
        if verdict is None:
            return None, False
        if run_id not in views:
            views[run_id] = signals_view(session=session, spec=spec, principal=principal, run_id=run_id)
        if views[run_id].hides(draft_id):
            return None, True
        return verdict.scores or {}, False

    return lookup


# ======== ppi → the metrics page: the weekly human-graded quality beside the online metrics ========


def production_quality(
    *, session: Session, spec: EvalSpec, start: dt.date, end: dt.date
) -> tuple[list[ppi_production.WeekQuality], str]:
    """Return the production weeks overlapping start..end with their quality estimates, and their chart as plotly JSON (metrics may not import ppi)."""
    weeks = ppi_stored_figures.stored_weekly_quality(session=session, spec=spec, start=start, end=end)
    return weeks, ppi_charts.to_json(ppi_charts.quality_figure(weeks, ppi_production.quality_targets(spec)))


class FiringAlertsView(BaseModel):
    """The alerts firing now: the online metrics' alert rules and the weekly human-graded quality alert."""

    metrics: list[str] = Field(description="Labels of the online-metric alerts firing")
    quality_weeks: list[str] = Field(description="ISO weeks whose human-graded quality alert fires (upper bound below the target)")

    @property
    def count(self) -> int:
        """Return how many alerts fire: each online-metric rule, and the human-graded quality alert once (whatever its weeks)."""
        return len(self.metrics) + (1 if self.quality_weeks else 0)

    @property
    def names(self) -> list[str]:
        """Return what fires, for a sentence: 'deflection rate', 'human-graded quality (2026-W46)'."""
        quality = [f"human-graded quality ({', '.join(self.quality_weeks)})"] if self.quality_weeks else []
        return [m.lower() for m in self.metrics] + quality


def count_firing(
    *, metric_alerts: Sequence[alert_states.AlertStatus], quality_weeks: Sequence[ppi_production.WeekQuality]
) -> FiringAlertsView:
    """Return the alerts firing among these: the one count home's card and /metrics' "alerts firing" show.

    Decision: the human-graded quality alert is one alert rule, like each online metric's, so it
    counts once however many weeks fire; the weeks are named. Home passes every metric alert (all
    traffic) and every production week; /metrics passes the range's and segment's metric alerts and
    the weeks its quality panel shows, so its count matches the panel's "alert: firing".
    """
    return FiringAlertsView(
        metrics=[METRIC_LABELS.get(a.metric, a.metric) for a in metric_alerts if a.state == "firing"],
        quality_weeks=[w.week for w in quality_weeks if w.below_target],
    )


def firing_alerts(*, session: Session, spec: EvalSpec) -> FiringAlertsView:
    """Return the alerts firing now over all traffic: every online-metric rule and every production week."""
    return count_firing(
        metric_alerts=alert_states.alerts(session=session, spec=spec),
        quality_weeks=ppi_stored_figures.stored_weekly_quality(session=session, spec=spec),
    )


_JUDGE = core_select(table_of(EvaluatorJudgeScore).c.scores, table_of(EvaluatorJudgeScore).c.rationale).where(
    table_of(EvaluatorJudgeScore).c.draft_id == bindparam("draft_id")
)


# The grading pages read judge verdicts through it (JudgeLookup.verdict_of); the run comparison through `judge_scores`.
JUDGE = grading_evidence.JudgeLookup(stmt=_JUDGE)


def judge_verdict(session: Session, draft_id: int) -> JudgeVerdict | None:
    """Return the evaluator's judge verdict on a draft (None when no judge ran on it): the one read of judge scores here."""
    return JUDGE.verdict_of(session, draft_id)
