"""What crosses the chain upwards: reactions after an event, and reads joining a lower domain with a higher one.

Dependencies run one way (docs/architecture.md, "Layers"): kb → datasets → runs → checks →
grading → regression → gates, with metrics, survey, evaluator, reviews and alerts beside them.
A service never calls a domain above it. When something in a lower domain has consequences
above it ("after a run is checked, raise its regression alerts and notify them"), the route,
page or command that did it calls the function here right after the service call, in the
same transaction; this module calls each domain in order. Nothing below the top imports it
but the domains' entry points (routes.py, pages.py, cli.py, home.py, demo.py).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Collection, Sequence

from pydantic import BaseModel, Field
from sqlalchemy import bindparam, func
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from webapp.alerts import outbox as alerts_outbox
from webapp.auth.service import Principal
from webapp.checks import ci_gate
from webapp.checks import service as checks_service
from webapp.core.blind import ALL_SIGNALS, SignalsView
from webapp.core.db import stored_id, table_of
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.evaluator.models import EvaluatorJudgeScore
from webapp.grading import evidence as grading_evidence
from webapp.grading import status as grading_status
from webapp.grading.evidence import JudgeVerdict
from webapp.grading.models import FinalGrade, Grade
from webapp.metrics import alert_states
from webapp.metrics import stale as metrics_stale
from webapp.metrics.targets import METRIC_LABELS
from webapp.ppi import charts as ppi_charts
from webapp.ppi import production as ppi_production
from webapp.ppi import report as ppi_report
from webapp.ppi import until_decided as ppi_until_decided
from webapp.ppi.models import PpiDraw
from webapp.regression import alerts as regression_alerts
from webapp.regression import service as regression_service
from webapp.regression.alerts import DifferenceLookup, PassRateDifference
from webapp.regression.case_pair import JudgeLookup
from webapp.regression.models import RegressionAlert
from webapp.runs import service as runs_service
from webapp.runs.models import Draft, Run

# ======== runs, checks, regression, evaluator, metrics → alerts ========


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


# --- checks → regression → alerts: after a run is checked ------------------------------------------------


def raise_regression_alerts(*, session: Session, spec: EvalSpec, run_id: int) -> list[RegressionAlert]:
    """Raise the run's regression alerts and queue their notifications; return the new alerts.

    Called after a run is checked and after a draft gets its final grade (a golden example's
    factual-accuracy fail is a regression alert).
    """
    new = regression_alerts.raise_alerts_for_run(
        session=session, spec=spec, run_id=run_id, difference=pass_rate_difference(session=session, spec=spec)
    )
    if new:
        alerts_outbox.notify_changes(session=session, spec=spec)  # new regression alerts -> outbox
    return new


def pass_rate_difference(*, session: Session, spec: EvalSpec) -> DifferenceLookup:
    """Return how the regression alert reads a run's pass-rate difference from its baseline in their PPI samples."""

    def lookup(*, run_id: int, baseline_id: int) -> PassRateDifference | None:
        return ppi_report.pass_rate_difference(session=session, spec=spec, run_id=run_id, baseline_id=baseline_id)

    return lookup


def pass_rate_readings(*, session: Session, spec: EvalSpec, baseline_id: int | None = None) -> list[PassRateDifference]:
    """Return the sampled pass-rate difference of every run with a sample whose baseline has one (the alerts page).

    With `baseline_id`: only the runs measured against that baseline.
    """
    return ppi_report.baseline_differences(session=session, spec=spec, baseline_id=baseline_id)


def after_run_checked(*, session: Session, spec: EvalSpec, run_id: int) -> list[RegressionAlert]:
    """React to checks.check_run: raise and notify the run's regression alerts; return the new ones."""
    return raise_regression_alerts(session=session, spec=spec, run_id=run_id)


def ci_gate_failures(
    *, session: Session, spec: EvalSpec, summary: checks_service.RunSummary, signals: SignalsView = ALL_SIGNALS
) -> list[str]:
    """Return why a run fails the CI gate: its checks, and the final factual grades of its golden drafts.

    A failure of a draft whose signals `signals` hides is counted, not named (blind grading).
    """
    finals = grading_status.final_grades(session=session, run_id=summary.run_id)
    factual = {draft_id: view.factual_accuracy for draft_id, view in finals.items()}
    return ci_gate.gate_failures(summary=summary, spec=spec, factual=factual, signals=signals)


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


# --- metrics → alerts: after production events or a hallucination decision ------------------------------


def after_metrics_changed(*, session: Session, spec: EvalSpec) -> None:
    """Queue the notifications of alert transitions (new events, a confirmed or undone hallucination report)."""
    alerts_outbox.notify_changes(session=session, spec=spec)


# ======== ppi → the metrics page: the weekly human-graded quality beside the online metrics ========


def production_quality(
    *, session: Session, spec: EvalSpec, start: dt.date, end: dt.date
) -> tuple[list[ppi_production.WeekQuality], str]:
    """Return the production weeks overlapping start..end with their quality estimates, and their chart as plotly JSON (metrics may not import ppi)."""
    weeks = ppi_production.weekly_quality(session=session, spec=spec, start=start, end=end)
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
        quality_weeks=ppi_production.weekly_quality(session=session, spec=spec),
    )


# ======== metrics → aggregates and alerts after a batch ========


def after_ingest(*, session: Session, spec: EvalSpec, background: bool) -> None:
    """Rebuild stale days and queue alert transitions in this transaction, unless a background rebuilder will.

    With background jobs (`draftdesk serve`), a batch stops at its insert and stale-day marks: the
    rebuilder (webapp/metrics/background.py) coalesces the rebuilds of many batches and calls
    `after_metrics_changed` right after (within REBUILD_INTERVAL_S). Without one (tests, scripts,
    `serve --no-background`), nothing else would rebuild, so the request does it, as before.
    """
    if background:
        return
    while metrics_stale.rebuild_stale(session=session, spec=spec):
        pass
    after_metrics_changed(session=session, spec=spec)


# ======== grading → regression, evaluator → grading: after a grade, the judge on the grading page ========

_DRAFTS = table_of(Draft)
_FINALS = table_of(FinalGrade)
_CASES = table_of(EvalCase)

# The run of a draft whose final grade is factual "fail" on a golden case (no row otherwise).
_GOLDEN_FAIL = (
    core_select(_DRAFTS.c.run_id)
    .join(_FINALS, _FINALS.c.draft_id == _DRAFTS.c.id)
    .join(_CASES, _CASES.c.id == _DRAFTS.c.case_pk)
    .where(_DRAFTS.c.id == bindparam("draft_id"), _FINALS.c.factual_accuracy == "fail", _CASES.c.golden.is_(True))
)


def after_grading(*, session: Session, spec: EvalSpec, draft_id: int, outcome: str | None = None) -> None:
    """React to a grade, revision or adjudication of a draft: a golden case graded factual fail raises and notifies its run's alerts now.

    `outcome` is the draft's outcome when the caller knows it: a draft that still needs grades has
    no final grade, so there is nothing to look at (most saves: a draft's first grade).
    """
    if outcome == "needs_grades":
        return
    ppi_until_decided.on_final_grade(session=session, spec=spec, draft_id=draft_id)  # issue 43: the sequence's call after every final grade
    run_id = session.connection().execute(_GOLDEN_FAIL, {"draft_id": draft_id}).scalar()
    if run_id is not None:
        raise_regression_alerts(session=session, spec=spec, run_id=int(run_id))
        return
    sampled = session.connection().execute(_SAMPLED, {"draft_id": draft_id}).scalar()
    if sampled is not None:
        after_sample_graded(session=session, spec=spec, run_id=int(sampled))


# The run of a drawn draft of a PPI sample that has a final grade (no row otherwise).
_SAMPLED = (
    core_select(table_of(PpiDraw).c.run_id)
    .join(_FINALS, _FINALS.c.draft_id == table_of(PpiDraw).c.draft_id)
    .where(table_of(PpiDraw).c.draft_id == bindparam("draft_id"), table_of(PpiDraw).c.drawn.is_(True))
    .limit(1)
)


def after_sample_graded(*, session: Session, spec: EvalSpec, run_id: int) -> list[RegressionAlert]:
    """React to a final grade of a drawn draft: re-read the sampled pass-rate drop of the run (and of the runs it is the baseline of).

    The sampled difference changes with every final grade, so a drop is confirmed the moment the
    grades confirm it, not at the next check. Only the pass-rate alert is re-read here (golden
    grades have their own trigger above); a confirmed drop is notified as every regression alert.
    """
    new: list[RegressionAlert] = []
    run = session.get(Run, run_id)
    readings: list[PassRateDifference] = []
    baseline = regression_service.baseline_for(session=session, run_id=run_id)
    if baseline is not None and baseline.id != run_id:
        reading = ppi_report.pass_rate_difference(session=session, spec=spec, run_id=run_id, baseline_id=stored_id(baseline.id))
        if reading is not None:
            readings.append(reading)
    if run is not None and run.is_baseline:
        readings += pass_rate_readings(session=session, spec=spec, baseline_id=run_id)
    for reading in readings:
        alert = regression_alerts.raise_sampled_drop(session=session, reading=reading)
        if alert is not None:
            new.append(alert)
    if new:
        alerts_outbox.notify_changes(session=session, spec=spec)
    return new


_JUDGE = core_select(table_of(EvaluatorJudgeScore).c.scores, table_of(EvaluatorJudgeScore).c.rationale).where(
    table_of(EvaluatorJudgeScore).c.draft_id == bindparam("draft_id")
)


# The grading pages read judge verdicts through it (JudgeLookup.verdict_of); the run comparison through `judge_scores`.
JUDGE = grading_evidence.JudgeLookup(stmt=_JUDGE)


def judge_verdict(session: Session, draft_id: int) -> JudgeVerdict | None:
    """Return the evaluator's judge verdict on a draft (None when no judge ran on it): the one read of judge scores here."""
    return JUDGE.verdict_of(session, draft_id)
