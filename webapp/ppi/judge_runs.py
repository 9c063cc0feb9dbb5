"""The judge's runs, for the evaluator page and the ML lead: each run's sample state, and the judge's agreement with people across runs.

Decision (issue 35 item 4, "a judge that drifts is seen before its intervals widen"): the chart
plots, per run that has at least 2 graded drafts (oldest first, by the run's creation time), the
share of graded drafts on which the judge's first call agrees with people per figure (equal for
pass/fail figures, within 1 point on 1-5), the same "agreement" the run's intervals page shows.
Agreement needs no estimate, so the list stays cheap to build on every visit (one stored sample per
judged run); the predictor's out-of-fold R-squared is on each run's intervals page.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session

from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.grading.models import FinalGrade
from webapp.ppi.models import PpiDraw, PpiJudgeScore
from webapp.ppi.report import FIGURES, agreement_of, stored_sample
from webapp.ppi.schemas import JudgeRunView
from webapp.runs.models import Run


def judge_runs(*, session: Session) -> list[JudgeRunView]:
    """Return every run the PPI judge scored, newest first, with its sample's counts (drawn, graded) and its intervals page.

    Aggregates only (no ORM rows, no estimates): the evaluator page lists them on every visit.
    """
    j, d, f, r = table_of(PpiJudgeScore).c, table_of(PpiDraw).c, table_of(FinalGrade).c, table_of(Run).c
    judged = session.execute(
        sa_select(j.run_id, r.name, func.max(j.judge_version), func.count(func.distinct(j.draft_id)))
        .join(table_of(Run), r.id == j.run_id)
        .group_by(j.run_id, r.name, r.created_at)
        .order_by(r.created_at.desc(), j.run_id.desc())
    ).all()
    if not judged:
        return []
    drawn_ids = sa_select(d.run_id, d.draft_id).where(d.drawn.is_(True)).distinct().subquery()
    drawn = dict(session.execute(sa_select(drawn_ids.c.run_id, func.count()).group_by(drawn_ids.c.run_id)).all())
    graded = dict(session.execute(
        sa_select(drawn_ids.c.run_id, func.count())
        .join(table_of(FinalGrade), f.draft_id == drawn_ids.c.draft_id)
        .group_by(drawn_ids.c.run_id)
    ).all())
    rounds = dict(session.execute(sa_select(d.run_id, func.max(d.round)).group_by(d.run_id)).all())
    versions = dict(session.execute(sa_select(d.run_id, func.min(d.judge_version)).where(d.round == 1).group_by(d.run_id)).all())
    return [
        JudgeRunView(
            run_id=int(run_id), run_name=str(name), judge_version=str(versions.get(run_id, version)), judged=int(count),
            drawn=int(drawn.get(run_id, 0)), graded=int(graded.get(run_id, 0)), rounds=int(rounds.get(run_id, 0)),
            href=f"/ppi/runs/{quote(str(name), safe='')}",
        )
        for run_id, name, version, count in judged
    ]


@dataclass(frozen=True)
class RunAgreement:
    """One judged run's agreement between the judge's first call and people, per figure (None: fewer than 2 graded drafts)."""

    run_name: str
    judge_version: str
    graded: int
    agreement: dict[str, float | None]


def agreement_history(*, session: Session, spec: EvalSpec, runs: list[JudgeRunView]) -> list[RunAgreement]:
    """Return, oldest run first, each judged run's agreement per figure; runs with fewer than 2 graded drafts are left out."""
    out: list[RunAgreement] = []
    for run in reversed(runs):  # judge_runs lists newest first
        if run.graded < 2:
            continue
        stored = stored_sample(session=session, run_id=run.run_id)
        if stored is None:
            continue
        out.append(RunAgreement(
            run_name=run.run_name, judge_version=run.judge_version, graded=stored.graded,
            agreement={key: agreement_of(spec, stored, key) for key in FIGURES},
        ))
    return out
