"""Each gate criterion's confidence-sequence path over a run's grades (issue 43): the run page's chart.

Decisions (docs/ppi.md, "The sequence's path"):
- Recomputed from stored data, not stored per look: the run's sample (`stored_sample`) with only
  its first k final grades, in the order they were finalised (`FinalGrade.decided_at`, then the
  draft id), for k = 1 .. the grades so far. x is k, y the sequence's bounds at that look
  (`webapp.ppi.report.decide` on the prefix).
- Each prefix reads the single-score estimator (the judge's first call, PPI++ lambda), never the
  learned predictor: that one is cross-fitted over tickets, too slow to refit for every prefix,
  and the path shows how the sequence narrowed, not the gate's final choice. The stored decision
  (`PpiDecision`, the bounds it was made on) is marked where it was made.
- At most `MAX_POINTS` looks are drawn (every grade up to that, evenly spaced looks beyond, the
  last look always).
- The looks are a stored figure (issue 42 item 2): computed with the run's figures when their
  inputs change (`webapp.ppi.stored_figures.refresh_run`, under the same fingerprint) and read by
  the page with the stored decisions joined at read time (`with_decisions`). Computed on every
  view, the up to 4 x 200 looks took 0.2-0.4 s of the process's GIL per page in a team's busy hour.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.grading.models import FinalGrade
from webapp.ppi.estimator import make_sample
from webapp.ppi.models import PpiDecision
from webapp.ppi.report import StoredSample, decide, stored_sample
from webapp.ppi.signals import FIGURE_RANGE, figure_values
from webapp.ppi.views import TITLES, gate_threshold

MAX_POINTS = 200


@dataclass(frozen=True)
class PathPoint:
    """The sequence at one look: the grades so far and its bounds."""

    grades: int
    low: float
    high: float


@dataclass(frozen=True)
class SequencePath:
    """One gate criterion's path: its looks, the gate's threshold, and the stored decision (None: undecided)."""

    key: str
    title: str
    threshold: float
    points: list[PathPoint]
    verdict: str | None
    decided_grades: int | None
    decided_low: float | None
    decided_high: float | None


def grading_order(*, session: Session, stored: StoredSample) -> list[int]:
    """Return the positions (in `stored.ids`) of the graded drafts, in the order their final grades were made."""
    f = table_of(FinalGrade).c
    labelled = {stored.ids[i]: int(i) for i in np.flatnonzero(stored.labelled)}
    rows = session.execute(sa_select(f.draft_id).where(f.draft_id.in_(list(labelled))).order_by(f.decided_at, f.draft_id)).all()
    return [labelled[int(r[0])] for r in rows]


def looks(n: int) -> list[int]:
    """Return the prefix sizes drawn: every one up to MAX_POINTS, evenly spaced beyond (the last always)."""
    if n <= MAX_POINTS:
        return list(range(1, n + 1))
    return sorted({int(round(k)) for k in np.linspace(1, n, MAX_POINTS)})


@dataclass(frozen=True)
class CriterionLooks:
    """One gate criterion's looks (what is stored): its key, the gate's threshold and the sequence at each look."""

    key: str
    threshold: float
    points: list[PathPoint]


def criterion_looks(*, session: Session, spec: EvalSpec, run_id: int) -> list[CriterionLooks]:
    """Compute each gate criterion's confidence sequence at every look over the run's grades so far ([] without a sample)."""
    stored = stored_sample(session=session, run_id=run_id)
    if stored is None:
        return []
    order = grading_order(session=session, stored=stored)
    out = []
    for key in TITLES:
        threshold = gate_threshold(spec, key)
        if threshold is None:
            continue
        judge = figure_values(spec, key, stored.judge_rows)
        human = figure_values(spec, key, stored.human_rows)
        points = []
        for k in looks(len(order)):
            mask = np.zeros(len(stored.ids), dtype=bool)
            mask[order[:k]] = True
            sample = make_sample(judge=judge, human=np.where(mask, human, np.nan), drawn=mask, pi=stored.pi, cluster=stored.tickets)
            call = decide(sample, threshold, value_range=FIGURE_RANGE[key], seed=stored.seed)
            if call.low is not None and call.high is not None:
                points.append(PathPoint(k, call.low, call.high))
        out.append(CriterionLooks(key=key, threshold=threshold, points=points))
    return out


def with_decisions(*, session: Session, run_id: int, computed: list[CriterionLooks]) -> list[SequencePath]:
    """Return the criteria's paths with the run's stored decisions (read now: a decision is marked where it was made)."""
    decisions = {
        d.criterion: d
        for d in session.exec(select(PpiDecision).where(PpiDecision.run_id == run_id).order_by(col(PpiDecision.id))).all()
        if d.reopened_at is None
    }
    out = []
    for c in computed:
        d = decisions.get(c.key)
        out.append(SequencePath(
            key=c.key, title=TITLES.get(c.key, c.key), threshold=c.threshold, points=c.points,
            verdict=None if d is None else d.verdict, decided_grades=None if d is None else d.grades,
            decided_low=None if d is None else d.low, decided_high=None if d is None else d.high,
        ))
    return out


def sequence_paths(*, session: Session, spec: EvalSpec, run_id: int) -> list[SequencePath]:
    """Return each gate criterion's confidence-sequence path over the run's grades so far, computed now ([] without a sample)."""
    return with_decisions(session=session, run_id=run_id, computed=criterion_looks(session=session, spec=spec, run_id=run_id))
