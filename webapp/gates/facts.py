"""Gather the facts the launch gates judge, from the other domains' services.

Checks come from webapp.checks.service, final human grades from webapp.grading.status,
regression results from webapp.regression.service, online metrics and hallucination reports
from webapp.metrics (daily, streaks, targets, reports) and the survey from webapp.survey.service.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from urllib.parse import quote

from sqlmodel import Session, col, select

from webapp.checks import service as checks_service
from webapp.core import units
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.datasets.mix import dataset_mix
from webapp.datasets.models import Dataset, EvalCase
from webapp.gates.pilot_facts import (
    CaseFacts,
    DraftFacts,
    FinalGradeFacts,
    PilotFacts,
    PpiCriterionFacts,
    PpiGradingFacts,
    RegressionFacts,
)
from webapp.gates.production_criteria import HallucinationFacts, StreakFacts, SurveyFacts
from webapp.grading import status as grading_status
from webapp.metrics import daily as metrics_daily
from webapp.metrics import reports as metrics_reports
from webapp.metrics import streaks as metrics_streaks
from webapp.metrics import targets as metrics_targets
from webapp.metrics.models import Event
from webapp.ppi.estimator import Estimate
from webapp.ppi.models import PpiDecision
from webapp.ppi.report import decide, stored_sample
from webapp.ppi.signals import FIGURE_RANGE
from webapp.ppi.stored_figures import run_figures
from webapp.ppi.until_decided import closed_reason, in_draw_order, open_decisions
from webapp.ppi.views import gate_threshold
from webapp.regression import service as regression_service
from webapp.runs.models import Run
from webapp.survey import service as survey_service


def pilot_facts(*, session: Session, spec: EvalSpec, run: Run) -> PilotFacts:
    """Collect, for every draft of the run, its check results and final grade, the suite's results and the PPI reading."""
    assert run.id is not None
    return replace(run_facts(session=session, spec=spec, run=run), ppi=ppi_facts(session=session, spec=spec, run_id=run.id))


def run_facts(*, session: Session, spec: EvalSpec, run: Run) -> PilotFacts:
    """Collect the whole-run facts (every draft's check results and final grade, the suite, the eval set), without the PPI reading.

    What the stored gate criteria are computed from (webapp/gates/stored_report.py).
    """
    assert run.id is not None
    dataset = session.get(Dataset, run.dataset_id)
    rows = checks_service.run_drafts(session, run.id, summary_only=True)  # read once: the summary takes the same rows
    summary = checks_service.run_summary(session=session, run_id=run.id, pairs=rows)
    outcomes = {o.draft_id: o for o in summary.outcomes}
    finals = grading_status.final_grades(session=session, run_id=run.id)
    # Escalations and fallbacks carry no draft text; grading decides which drafts are gradable.
    gradable = set(grading_status.grading_status(session=session, run_id=run.id).states)
    drafts: list[DraftFacts] = []
    safety_of = checks_service.safety_by_case()
    for draft, case in rows:
        assert draft.id is not None
        outcome = outcomes.get(draft.id)
        fg = finals.get(draft.id)
        drafts.append(
            DraftFacts(
                draft_id=draft.id,
                case_id=case.case_id,
                category=case.category,
                golden=case.golden,
                safety_trigger=safety_of(case),
                results=tuple(outcome.results) if outcome else None,
                needs_grade=draft.id in gradable,
                final_grade=None
                if fg is None
                else FinalGradeFacts(fg.factual_accuracy, fg.citation_relevance, fg.tone, fg.completeness),
            )
        )
    regression = [
        RegressionFacts(r.case_id, r.status, r.note, f"/regression#case-{r.case_id}")
        for r in regression_service.run_report(session=session, run_id=run.id, summary=summary, grades=finals)
    ]
    cases = [
        CaseFacts(c.case_id, c.category, c.intent, c.golden, f"/datasets/{run.dataset_id}/cases/{quote(c.case_id, safe='')}")
        for c in session.exec(
            select(EvalCase).where(EvalCase.dataset_id == run.dataset_id).order_by(col(EvalCase.position))
        ).all()
    ]
    mix = dataset_mix(((c.case_id, c.category, c.intent) for c in cases), spec)
    return PilotFacts(
        run.id, run.name, dataset.count if dataset else len(cases), drafts, regression, cases, mix, f"/datasets/{run.dataset_id}",
    )


def ppi_criterion(
    key: str, estimate: Estimate | None, threshold: float, *, pending: int, undrawn: int | None = None,
    decision: PpiDecision | None = None, in_draw_order: bool = False,
) -> PpiCriterionFacts:
    """Read one criterion's PPI estimate against the threshold: the confidence sequence's call (webapp.ppi.report.decide)."""
    call = decide(estimate, threshold, pending=pending, undrawn=undrawn, value_range=FIGURE_RANGE.get(key), in_draw_order=in_draw_order)
    return PpiCriterionFacts(
        key,
        threshold,
        estimate.estimate if estimate else None,
        call.low if estimate else None,
        call.high if estimate else None,
        call.verdict,
        call.more_grades,
        share=key == "factual_accuracy",
        provisional=call.provisional,
        decided_at=None if decision is None else decision.decided_at,
        decided_grades=None if decision is None else decision.grades,
    )


def ppi_facts(*, session: Session, spec: EvalSpec, run_id: int) -> PpiGradingFacts | None:
    """Return the run's PPI reading for criterion 2, or None when the run has no PPI sample.

    The figures are read stored (webapp/ppi/stored_figures.py: a gate page never cross-fits); while
    a new sample's figures are first computed, every criterion reads as having no estimate yet.
    """
    read = run_figures(session=session, spec=spec, run_id=run_id)
    report = read.value
    if report is None:
        stored = stored_sample(session=session, run_id=run_id) if read.state == "computing" else None
        if stored is None:
            return None
        criteria = tuple(
            ppi_criterion(c.key, None, t, pending=stored.pending, undrawn=len(stored.ids) - stored.n_drawn)
            for c in spec.rubric.criteria if (t := gate_threshold(spec, c.key)) is not None
        )
        return PpiGradingFacts(run_id, stored.graded, stored.pending, criteria, drafts=len(stored.ids), drawn=stored.n_drawn,
                               figures_state=read.state)
    criteria = []
    decisions = open_decisions(session=session, run_id=run_id)
    ordered = in_draw_order(session=session, run_id=run_id)
    for crit in spec.rubric.criteria:
        threshold = gate_threshold(spec, crit.key)
        if threshold is not None:
            fig = report.figures.get(crit.key)
            criteria.append(ppi_criterion(
                    crit.key, fig.estimate if fig else None, threshold, pending=report.pending, undrawn=report.drafts - report.drawn,
                    decision=decisions.get(crit.key), in_draw_order=ordered,
                ))
    return PpiGradingFacts(
        run_id, report.graded, report.pending, tuple(criteria), drafts=report.drafts, drawn=report.drawn, figures_state=read.state,
        in_draw_order=ordered, closed_reason=closed_reason(session=session, run_id=run_id),
    )


def _plain_label(label: str) -> str:
    """Return a metric label without its unit in brackets (the value carries the unit)."""
    return re.sub(r" \(.*\)$", "", label).lower()


def streak_facts(*, session: Session, spec: EvalSpec, today: dt.date) -> StreakFacts:
    """Business-day streaks of days meeting every target, over the pilot period up to today (all traffic)."""
    s = metrics_streaks.pilot_streaks(session=session, spec=spec, today=today)
    days = {d: ms for d, ms in s.missed}
    values = {
        d.day: d
        for d in (metrics_daily.daily_metrics(session=session, spec=spec, start=min(days), end=max(days)) if days else [])
    }
    missed = tuple(
        (day, tuple(
            f"{_plain_label(metrics_targets.METRIC_LABELS.get(m, m))} {units.text(m, values[day].value(m))} "
            f"(target {metrics_targets.describe_target(m, spec)})"
            for m in ms
        ))
        for day, ms in s.missed
    )
    return StreakFacts(s.longest, s.longest_start, s.longest_end, s.current, missed, s.scope_text)


def hallucination_facts(*, session: Session, spec: EvalSpec) -> list[HallucinationFacts]:
    """Confirmed hallucination reports on events of the pilot period."""
    pilot = spec.online_metrics.pilot
    reports = metrics_reports.confirmed_hallucination_reports(session=session, start=pilot.start, end=pilot.end)
    ids = [r.event_id for r in reports]
    days = dict(session.exec(select(col(Event.event_id), col(Event.day)).where(col(Event.event_id).in_(ids))).all()) if ids else {}
    return [HallucinationFacts(stored_id(r.id), r.event_id, days[r.event_id]) for r in reports]


def survey_facts(*, session: Session) -> SurveyFacts:
    """The newest survey round's counts (that round only)."""
    latest = survey_service.rounds(session=session)
    if not latest:
        return SurveyFacts(0, 0, 0)
    rnd = latest[0]
    c = survey_service.counts(session=session, round_id=rnd.id)
    return SurveyFacts(c.yes, c.no, c.neutral, c.round_name, rnd.id)
