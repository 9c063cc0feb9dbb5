"""A run's PPI figures and a production week's quality, stored when their inputs change (issue 42 item 2).

The figures cross-fit a predictor per figure (webapp/ppi/report.py), so pages read them stored
(webapp/core/figures.py) and the reactions to "draft_finalised" and "sample_drawn"
(webapp/ppi/reactions.py) compute them, as does the jobs loop's sweep (webapp/ppi/background.py)
for inputs changed without a fact. The fingerprint of a run's inputs is one aggregate query: the
draws (count, newest id), the judge's scores (count, newest id), the final grades of its drafts
(count, newest decision time, the sums of their scores and factual passes), its production week,
the plan file's digest and FIGURES_VERSION (the code's reading of them). Decision:
docs/decisions/0012-stored-figures.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from dataclasses import replace

from pydantic import TypeAdapter
from sqlalchemy import case, func, literal, select, true
from sqlmodel import Session

from webapp.core import figures
from webapp.core.db import table_of
from webapp.core.figures import FigureRead
from webapp.core.spec import EvalSpec
from webapp.grading.models import FinalGrade
from webapp.ppi.models import PpiDraw, PpiJudgeScore, PpiProductionWeek
from webapp.ppi.production import WeekQuality, parse_week, week_criteria, week_quality
from webapp.ppi.report import RunReport, run_report
from webapp.ppi.sequence_path import CriterionLooks, SequencePath, criterion_looks, with_decisions
from webapp.runs.models import Draft, Run

RUN_KIND = "ppi_run"
WEEK_KIND = "ppi_week"
PATH_KIND = "ppi_path"  # the run page's confidence-sequence paths (webapp/ppi/sequence_path.py)
# Raise when the figures' code reads the same rows differently: every stored figure is then stale.
# "2" (3 Dec): estimates carry the graded drafts' sum, so the gate's sequence bounds are cut as the run page's path is
FIGURES_VERSION = "2"

_RUN_ADAPTER: TypeAdapter[RunReport] = TypeAdapter(RunReport)
_WEEK_ADAPTER: TypeAdapter[WeekQuality] = TypeAdapter(WeekQuality)
_PATH_ADAPTER: TypeAdapter[list[CriterionLooks]] = TypeAdapter(list[CriterionLooks])

_D = table_of(PpiDraw)
_J = table_of(PpiJudgeScore)
_F = table_of(FinalGrade)
_W = table_of(PpiProductionWeek)
_DR = table_of(Draft)


@functools.cache
def _spec_digest(spec_json: str) -> str:
    return hashlib.sha256(spec_json.encode()).hexdigest()[:16]


def spec_digest(spec: EvalSpec) -> str:
    """Return a short digest of the plan file as loaded (a changed plan makes every figure stale)."""
    return _spec_digest(spec.model_dump_json())


def run_fingerprint(*, session: Session, spec: EvalSpec, run_id: int) -> str | None:
    """Return the fingerprint of what the run's figures are computed from, or None when the run has no sample."""
    draws = select(func.count(), func.max(_D.c.id)).where(_D.c.run_id == run_id).subquery()
    judge = select(func.count(), func.max(_J.c.id)).where(_J.c.run_id == run_id).subquery()
    finals = (
        select(
            func.count(),
            func.max(_F.c.decided_at),
            func.sum(_F.c.citation_relevance + _F.c.tone + _F.c.completeness),
            func.sum(case((_F.c.factual_accuracy == "pass", 1), else_=0)),
            func.max(_F.c.id),
        )
        .where(_F.c.draft_id.in_(select(_DR.c.id).where(_DR.c.run_id == run_id)))
        .subquery()
    )
    week = select(func.coalesce(func.max(_W.c.week), literal(""))).where(_W.c.run_id == run_id).subquery()
    joined = draws.join(judge, true()).join(finals, true()).join(week, true())  # one row each
    row = session.execute(select(draws, judge, finals, week).select_from(joined)).one()
    if not row[0]:
        return None
    parts = [str(x) for x in row]
    return "|".join([FIGURES_VERSION, spec_digest(spec), *parts])


def _key(run_id: int) -> str:
    return str(run_id)


def refresh_run(*, session: Session, spec: EvalSpec, run_id: int) -> bool:
    """Compute the run's figures (and its production week's quality) and store them with their inputs' fingerprint.

    The fingerprint is read before the figures, so a change committed in between leaves the figure
    marked "updating" (that change's fact recomputes it), never a new figure under an old name.
    Return whether anything was stored (a run without a sample has no figures).
    """
    fingerprint = run_fingerprint(session=session, spec=spec, run_id=run_id)
    if fingerprint is None:
        return False
    report = run_report(session=session, spec=spec, run_id=run_id)
    if report is None:
        return False
    figures.store(session, RUN_KIND, _key(run_id), fingerprint, report, _RUN_ADAPTER)
    figures.store(session, PATH_KIND, _key(run_id), fingerprint, criterion_looks(session=session, spec=spec, run_id=run_id), _PATH_ADAPTER)
    week = session.execute(select(_W.c.week, _W.c.drafts_taken).where(_W.c.run_id == run_id)).first()
    if week is not None:
        name = session.get(Run, run_id)
        quality = week_quality(session=session, spec=spec, week=str(week[0]), run_id=run_id,
                               run_name=name.name if name else "", drafts=int(week[1]))
        figures.store(session, WEEK_KIND, str(week[0]), fingerprint, quality, _WEEK_ADAPTER)
    return True


def run_figures(*, session: Session, spec: EvalSpec, run_id: int) -> FigureRead[RunReport]:
    """Return the run's figures as stored, and whether they are current: the one read of every page, the API and the gates.

    A run without a sample reads (None, "current"). In a process without a jobs loop a stale or
    missing figure is computed here (webapp.core.figures.refresh_on_read), not stored.
    """
    fingerprint = run_fingerprint(session=session, spec=spec, run_id=run_id)
    if fingerprint is None:
        return FigureRead(None, "current")
    got = figures.read(session, RUN_KIND, _key(run_id), fingerprint, _RUN_ADAPTER)
    if got.state != "current" and figures.refresh_on_read():
        return FigureRead(run_report(session=session, spec=spec, run_id=run_id), "current")
    return got


def run_sequence_paths(*, session: Session, spec: EvalSpec, run_id: int) -> FigureRead[list[SequencePath]]:
    """Return the run's confidence-sequence paths as stored (with its decisions read now), and whether they are current.

    Stored with the run's figures under the same fingerprint; like run_figures, a process without
    a jobs loop computes a stale or missing one here. A run without a sample reads ([], "current").
    """
    fingerprint = run_fingerprint(session=session, spec=spec, run_id=run_id)
    if fingerprint is None:
        return FigureRead([], "current")
    got = figures.read(session, PATH_KIND, _key(run_id), fingerprint, _PATH_ADAPTER)
    computed = got.value
    if got.state != "current" and figures.refresh_on_read():
        computed, got = criterion_looks(session=session, spec=spec, run_id=run_id), FigureRead(None, "current")
    paths = [] if computed is None else with_decisions(session=session, run_id=run_id, computed=computed)
    return FigureRead(paths, got.state, got.computed_at)


def stored_weekly_quality(
    *, session: Session, spec: EvalSpec, start: dt.date | None = None, end: dt.date | None = None
) -> list[WeekQuality]:
    """Return each production week's quality (weeks overlapping start..end), read stored; weeks without figures yet are listed with none.

    What /metrics, home's alerts card and the API read (webapp.ppi.production.weekly_quality computes them);
    a week whose inputs changed since (or that has none yet) is marked `updating`.
    """
    stmt = select(_W.c.week, _W.c.run_id, _W.c.drafts_taken, table_of(Run).c.name).join(
        table_of(Run), table_of(Run).c.id == _W.c.run_id
    ).order_by(_W.c.week)
    weeks: list[WeekQuality] = []
    for week, run_id, drafts, name in session.execute(stmt).all():
        iso = parse_week(str(week))
        if (start is not None and iso.end < start) or (end is not None and iso.start > end):
            continue
        fingerprint = run_fingerprint(session=session, spec=spec, run_id=int(run_id))
        if fingerprint is None:  # not sampled yet: nothing to estimate, nothing to store
            weeks.append(week_quality(session=session, spec=spec, week=str(week), run_id=int(run_id), run_name=str(name), drafts=int(drafts)))
            continue
        got = figures.read(session, WEEK_KIND, str(week), fingerprint, _WEEK_ADAPTER)
        if got.state != "current" and figures.refresh_on_read():
            got = FigureRead(
                week_quality(session=session, spec=spec, week=str(week), run_id=int(run_id), run_name=str(name), drafts=int(drafts)), "current"
            )
        value = got.value
        if value is None:  # computing: the week is listed, its figures are not there yet
            value = WeekQuality(week=str(week), start=iso.start, end=iso.end, run_id=int(run_id), run_name=str(name),
                                drafts=int(drafts), sampled=True, drawn=0, graded=0, pending=0, estimate=None,
                                criteria=week_criteria(spec, None))
        weeks.append(replace(value, run_name=str(name), updating=got.state != "current"))
    return weeks


def sampled_runs(*, session: Session) -> list[int]:
    """Return the ids of the runs with a sample (the runs that have figures), in id order."""
    return [int(i) for i in session.execute(select(_D.c.run_id).distinct().order_by(_D.c.run_id)).scalars()]


def refresh_stale(*, session: Session, spec: EvalSpec) -> list[int]:
    """Recompute every sampled run's figures whose inputs changed since they were stored (or that have none); return the runs."""
    done = []
    for run_id in sampled_runs(session=session):
        fingerprint = run_fingerprint(session=session, spec=spec, run_id=run_id)
        row = figures.stored(session, RUN_KIND, _key(run_id))
        if fingerprint is not None and (row is None or row.fingerprint != fingerprint):
            refresh_run(session=session, spec=spec, run_id=run_id)
            done.append(run_id)
    return done


def run_of_draft(*, session: Session, draft_id: int) -> int | None:
    """Return the run of a draft when that run has a sample, else None."""
    run_id = session.execute(select(_DR.c.run_id).where(_DR.c.id == draft_id)).scalar()
    if run_id is None:
        return None
    sampled = session.execute(select(_D.c.id).where(_D.c.run_id == run_id).limit(1)).scalar()
    return None if sampled is None else int(run_id)

