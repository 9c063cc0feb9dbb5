"""The grading queue's statements (webapp/grading/queue.py) against counts and orders worked out in Python.

The statements read a run's grades over the range of its draft ids and its queue through the
dataset's cases: two runs whose drafts were written alternately (ids interleaved) must not see
each other's drafts or grades, and every filter shape counts what a plain loop over the rows counts.
"""

from __future__ import annotations

from sqlmodel import Session, select

from tests.factories import make_dataset, make_user
from tests.grading.conftest import scores
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading.grades import record_grade
from webapp.grading.models import Grade
from webapp.grading.queue import BatchFilter, batch_counts, next_item
from webapp.runs.models import Draft, Run

CATEGORIES = ["billing", "account", "billing", "technical", "billing", "account"]


def _interleaved(session: Session) -> tuple[Run, Run, list[EvalCase]]:
    """Two runs over one six-case dataset, two samples a case, their drafts written in turn (A, B, A, B...)."""
    ds = make_dataset(session, [{"case_id": f"c{i}", "category": CATEGORIES[i]} for i in range(6)])
    a = Run(name="run-a", dataset_id=ds.id, model="m")  # type: ignore[arg-type]
    b = Run(name="run-b", dataset_id=ds.id, model="m")  # type: ignore[arg-type]
    session.add_all([a, b])
    session.flush()
    cases = list(session.exec(select(EvalCase).where(EvalCase.dataset_id == ds.id).order_by(EvalCase.position)))
    # written from the last case to the first, so that id order is not the queue order
    for case in reversed(cases):
        for sample in (1, 0):
            for run in (a, b):
                session.add(Draft(run_id=run.id, case_pk=case.id, sample_index=sample, draft_text="Hello"))  # type: ignore[arg-type]
                session.flush()
    # one escalation in run A: not gradable, neither counted nor served
    session.add(Draft(run_id=a.id, case_pk=cases[0].id, sample_index=2, draft_text=None, escalated=True))  # type: ignore[arg-type]
    session.flush()
    return a, b, cases


def _expected(session: Session, batch: BatchFilter, grader_id: int, n: int) -> tuple[int, int, int]:
    """(drafts, grades counted up to n per draft, the grader's grades) of the batch, by a loop over the rows."""
    drafts = [
        d for d in session.exec(select(Draft).where(Draft.run_id == batch.run_id))
        if d.draft_text is not None and not d.escalated
        and (batch.category is None or session.get(EvalCase, d.case_pk).category == batch.category)  # type: ignore[union-attr]
    ]
    ids = {d.id for d in drafts}
    grades = [g for g in session.exec(select(Grade)) if g.draft_id in ids]
    per_draft: dict[int, int] = {}
    for g in grades:
        per_draft[g.draft_id] = per_draft.get(g.draft_id, 0) + 1
    return len(drafts), sum(min(c, n) for c in per_draft.values()), sum(g.grader_id == grader_id for g in grades)


def test_counts_of_interleaved_runs_equal_a_loop_over_the_rows(session: Session, spec: EvalSpec) -> None:
    a, b, _cases = _interleaved(session)
    alice, bob, carol = (make_user(session, email=f"{n}@example.test", roles=["labeler"]) for n in ("alice", "bob", "carol"))
    assert a.id is not None and b.id is not None
    a_drafts = list(session.exec(select(Draft).where(Draft.run_id == a.id, Draft.escalated == False)))  # noqa: E712
    b_drafts = list(session.exec(select(Draft).where(Draft.run_id == b.id)))
    # Alice grades all of B and three of A; Bob two of A (one beside Alice's); Carol another of A
    for user, drafts in ((alice, b_drafts + a_drafts[:3]), (bob, a_drafts[2:4]), (carol, a_drafts[4:5])):
        for d in drafts:
            record_grade(session=session, spec=spec, draft_id=d.id, grader_id=user.id, scores=scores(spec))  # type: ignore[arg-type]
    session.commit()
    n = spec.grading.graders_per_draft
    assert n == 2
    for run in (a, b):
        for category in (None, "billing", "account", "technical"):
            batch = BatchFilter(run_id=run.id, category=category)  # type: ignore[arg-type]
            for user in (alice, bob, carol):
                c = batch_counts(session=session, spec=spec, batch=batch, grader_id=user.id)  # type: ignore[arg-type]
                assert (c.drafts, c.grades_done, c.mine) == _expected(session, batch, user.id, n), (run.name, category, user.email)  # type: ignore[arg-type]
    # By hand for run A, no filter, Alice: 12 drafts (the escalation left out); grades 3 (Alice) +
    # 2 (Bob) + 1 (Carol) = 6 of the 24 needed; Alice's 3. Run B: 12 drafts, Alice's 12 grades.
    c = batch_counts(session=session, spec=spec, batch=BatchFilter(run_id=a.id), grader_id=alice.id)  # type: ignore[arg-type]
    assert (c.drafts, c.grades_done, c.grades_needed, c.mine) == (12, 6, 24, 3)
    c = batch_counts(session=session, spec=spec, batch=BatchFilter(run_id=b.id), grader_id=alice.id)  # type: ignore[arg-type]
    assert (c.drafts, c.grades_done, c.grades_needed, c.mine) == (12, 12, 24, 12)


def test_the_queue_serves_a_run_in_case_order_and_never_the_other_runs_drafts(session: Session, spec: EvalSpec) -> None:
    a, b, cases = _interleaved(session)
    grader = make_user(session, email="g@example.test", roles=["labeler"])
    assert a.id is not None and grader.id is not None
    batch = BatchFilter(run_id=a.id)
    served: list[Draft] = []
    while (d := next_item(session=session, spec=spec, grader_id=grader.id, batch=batch, exclude=[x.id for x in served if x.id])) is not None:  # type: ignore[misc]
        served.append(d)
        record_grade(session=session, spec=spec, draft_id=d.id, grader_id=grader.id, scores=scores(spec))  # type: ignore[arg-type]
    position = {c.id: c.position for c in cases}
    assert all(d.run_id == a.id for d in served) and len(served) == 12  # not the escalation, nothing of run B
    assert [(position[d.case_pk], d.sample_index) for d in served] == [(p, s) for p in range(6) for s in (0, 1)]
    # a category filter: the billing cases only, still in their order
    other = make_user(session, email="h@example.test", roles=["labeler"])
    billing = BatchFilter(run_id=a.id, category="billing")
    first = next_item(session=session, spec=spec, grader_id=other.id, batch=billing)  # type: ignore[arg-type]
    assert first is not None and (position[first.case_pk], first.sample_index) == (0, 0)
    assert b.id is not None
