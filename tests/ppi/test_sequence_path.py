"""The run page's confidence-sequence path (issue 43): one look per final grade, in the order the grades were made."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from sqlmodel import Session

from tests.ppi.test_until_decided import T0, grade, sampled_run
from webapp.core.spec import EvalSpec
from webapp.ppi.estimator import make_sample
from webapp.ppi.report import decide, stored_sample
from webapp.ppi.sequence_path import looks, sequence_paths
from webapp.ppi.signals import FIGURE_RANGE, figure_values
from webapp.ppi.until_decided import on_final_grade, set_until_decided


def test_the_path_has_one_look_per_grade_in_grading_order_and_marks_the_decision(session: Session, spec: EvalSpec) -> None:
    run, order = sampled_run(session)
    assert run.id is not None
    set_until_decided(session=session, run_id=run.id, now=T0)
    graded = order[:45]
    for k, draft_id in enumerate(graded):
        row = grade(session, draft_id, tone=4.0 if k % 3 else 3.0)
        row.decided_at = T0 + dt.timedelta(minutes=k)
        session.add(row)
        session.flush()
        on_final_grade(session=session, spec=spec, draft_id=draft_id, now=row.decided_at)
    paths = {p.key: p for p in sequence_paths(session=session, spec=spec, run_id=run.id)}
    assert list(paths) == ["factual_accuracy", "citation_relevance", "tone", "completeness"]
    tone = paths["tone"]
    assert tone.threshold == 3.5
    assert [p.grades for p in tone.points] == list(range(1, 46))  # one look per final grade
    # before 30 grades only the range holds: 10 graded of 120 drafts, tone 3,4,4,3,4,4,3,4,4,3 (sum 36), the rest 1 to 5
    ten = next(p for p in tone.points if p.grades == 10)
    assert ten.low == pytest.approx((36 + 110 * 1) / 120) and ten.high == pytest.approx((36 + 110 * 5) / 120)
    # look 40 reads exactly the first 40 grades made (by time), not any other 40
    stored = stored_sample(session=session, run_id=run.id)
    assert stored is not None
    mask = np.isin(np.array(stored.ids), graded[:40])
    human = np.where(mask, figure_values(spec, "tone", stored.human_rows), np.nan)
    sample = make_sample(judge=figure_values(spec, "tone", stored.judge_rows), human=human, drawn=mask, pi=stored.pi, cluster=stored.tickets)
    call = decide(sample, 3.5, value_range=FIGURE_RANGE["tone"], seed=stored.seed)
    forty = next(p for p in tone.points if p.grades == 40)
    assert (forty.low, forty.high) == pytest.approx((call.low, call.high))
    assert forty.high - forty.low < ten.high - ten.low
    # a decided criterion carries its stored decision; an undecided one none
    for p in paths.values():
        assert (p.verdict is None) == (p.decided_grades is None)
    citation = paths["citation_relevance"]  # every citation grade 4 against a judge's 4: decided by 45
    assert citation.verdict == "pass" and citation.decided_grades is not None and 30 <= citation.decided_grades <= 45


def test_looks_are_every_grade_up_to_the_limit_then_evenly_spaced_with_the_last() -> None:
    assert looks(3) == [1, 2, 3]
    many = looks(1000)
    assert len(many) == 200 and many[0] == 1 and many[-1] == 1000
