"""PPI's reactions: the sampled pass-rate drop, re-read when a run is checked or a drawn draft gets its final grade,
the anytime-valid calls of a sampled run (issue 43), updated after every final grade, and the run's stored
figures (issue 42 item 2, webapp/ppi/stored_figures.py), computed again after a final grade or a drawn sample.

The sampled difference changes with every final grade, so a drop is confirmed the moment the
grades confirm it, not at the next check. The alert is regression's (raise_sampled_drop); the
reading is PPI's, so the reaction lives here (ppi may import regression, not the other way).
"""

from __future__ import annotations

from pydantic import JsonValue
from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlmodel import Session

from webapp.core.db import stored_id, table_of
from webapp.core.reactions import FactPublic, Reaction
from webapp.core.spec import EvalSpec
from webapp.grading.models import FinalGrade
from webapp.ppi import report as ppi_report
from webapp.ppi import stored_figures, until_decided
from webapp.ppi.models import PpiDraw
from webapp.regression import alerts as regression_alerts
from webapp.regression import service as regression_service
from webapp.regression.alert_facts import golden_fail_run, raised
from webapp.regression.alerts import PassRateDifference
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Run

_DRAWS = table_of(PpiDraw)
_FINALS = table_of(FinalGrade)

# The run of a drawn draft of a PPI sample that has a final grade (no row otherwise).
_SAMPLED = (
    core_select(_DRAWS.c.run_id)
    .join(_FINALS, _FINALS.c.draft_id == _DRAWS.c.draft_id)
    .where(_DRAWS.c.draft_id == bindparam("draft_id"), _DRAWS.c.drawn.is_(True))
    .limit(1)
)


def _against_baseline(session: Session, spec: EvalSpec, run_id: int) -> list[PassRateDifference]:
    baseline = regression_service.baseline_for(session=session, run_id=run_id)
    if baseline is None or baseline.id == run_id:
        return []
    reading = ppi_report.pass_rate_difference(session=session, spec=spec, run_id=run_id, baseline_id=stored_id(baseline.id))
    return [] if reading is None else [reading]


def _raise(session: Session, run_id: int, readings: list[PassRateDifference]) -> JsonValue:
    new: list[RegressionAlert] = []
    for reading in readings:
        alert = regression_alerts.raise_sampled_drop(session=session, reading=reading)
        if alert is not None:
            new.append(alert)
    return raised(session, run_id, new)


def drop_after_check(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "run_checked": the run's sampled difference from its baseline confirms a drop, or not."""
    run_id = int(fact.subject["run_id"])
    return _raise(session, run_id, _against_baseline(session, spec, run_id))


def drop_after_grade(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "draft_finalised": re-read the sampled drop of the draft's run (and of the runs it is the baseline of).

    A golden case's factual fail re-reads its run against its baseline, as a check would; a drawn
    draft's final grade re-reads the run's reading and, for a baseline, every run measured against it.
    """
    draft_id = int(fact.subject["draft_id"])
    golden = golden_fail_run(session, draft_id)
    if golden is not None:
        return _raise(session, golden, _against_baseline(session, spec, golden))
    sampled = session.connection().execute(_SAMPLED, {"draft_id": draft_id}).scalar()
    if sampled is None:
        return []
    run_id = int(sampled)
    readings = _against_baseline(session, spec, run_id)
    run = session.get(Run, run_id)
    if run is not None and run.is_baseline:
        readings += ppi_report.baseline_differences(session=session, spec=spec, baseline_id=run_id)
    return _raise(session, run_id, readings)


def calls_after_grade(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "draft_finalised": update the run's anytime-valid calls (issue 43), store decisions, close a run graded until decided.

    The decision's time is the grade's (the fact's), not the moment the reaction ran.
    """
    out = until_decided.on_final_grade(session=session, spec=spec, draft_id=int(fact.subject["draft_id"]), now=fact.created_at)
    if out is None:
        return None
    return {"decided": list(out.decided), "reopened": list(out.reopened), "closed": out.closed_reason}


def figures_after_grade(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "draft_finalised": store the figures of the draft's run (and its production week) again, if it has a sample."""
    run_id = stored_figures.run_of_draft(session=session, draft_id=int(fact.subject["draft_id"]))
    if run_id is None:
        return None
    return {"run_id": run_id} if stored_figures.refresh_run(session=session, spec=spec, run_id=run_id) else None


def figures_after_sample(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
    """React to "sample_drawn": store the run's figures (and its production week's) with the new draws."""
    run_id = int(fact.subject["run_id"])
    return {"run_id": run_id} if stored_figures.refresh_run(session=session, spec=spec, run_id=run_id) else None


REACTIONS: tuple[Reaction, ...] = (
    Reaction(name="ppi.sampled_drop_after_check", fact="run_checked", handle=drop_after_check),
    Reaction(name="ppi.sampled_drop_after_grade", fact="draft_finalised", handle=drop_after_grade),
    Reaction(name="ppi.calls_after_grade", fact="draft_finalised", handle=calls_after_grade),
    Reaction(name="ppi.figures_after_grade", fact="draft_finalised", handle=figures_after_grade),
    Reaction(name="ppi.figures_after_sample", fact="sample_drawn", handle=figures_after_sample),
)
