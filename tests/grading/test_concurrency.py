"""Real concurrency: threads, each with its own engine and session, submitting at the same moment."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from sqlmodel import Session, func, select

from tests.grading.conftest import GradingWorld, scores
from webapp.core.db import make_engine
from webapp.core.spec import EvalSpec
from webapp.grading.errors import AlreadyGraded, NoPlaceLeft
from webapp.grading.grades import record_grade
from webapp.grading.models import Adjudication, FinalGrade, Grade, GradingSlot
from webapp.grading.queue import BatchFilter, next_item


def run_together(db_url: str, jobs: list[Callable[[Session], Any]]) -> list[Any]:
    """Run each job in its own thread, engine and transaction, released together by a barrier; return results or errors."""
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)

    def worker(i: int, job: Callable[[Session], Any]) -> None:
        engine = make_engine(db_url)
        try:
            with Session(engine, expire_on_commit=False) as s:
                barrier.wait()
                try:
                    results[i] = job(s)
                    s.commit()
                except Exception as exc:  # noqa: BLE001 - the test inspects what each thread met
                    s.rollback()
                    results[i] = exc
        finally:
            engine.dispose()

    threads = [threading.Thread(target=worker, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def submit(spec: EvalSpec, draft_id: int, grader_id: int, **kw: Any) -> Callable[[Session], Any]:
    def job(s: Session) -> Any:
        return record_grade(
            session=s, spec=spec, draft_id=draft_id, grader_id=grader_id, scores=scores(spec, **kw)
        ).id

    return job


def count(session: Session, model: Any, **where: Any) -> int:
    stmt = select(func.count()).select_from(model)
    for k, v in where.items():
        stmt = stmt.where(getattr(model, k) == v)
    return int(session.exec(stmt).one())


class TestSimultaneousSubmissions:
    def test_three_graders_two_places(
        self, db_url: str, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        draft_id = world.drafts[0].id
        users = (world.alice, world.bob, world.carol)
        results = run_together(db_url, [submit(spec, draft_id, u.id) for u in users])
        assert sum(isinstance(r, int) for r in results) == 2, results
        assert sum(isinstance(r, NoPlaceLeft) for r in results) == 1, results
        session.expire_all()
        assert count(session, Grade, draft_id=draft_id) == 2
        assert count(session, GradingSlot, draft_id=draft_id) == 2
        # The pair agreed: the second transaction saw the first grade and made the final grade.
        assert count(session, FinalGrade, draft_id=draft_id) == 1

    def test_same_grader_twice_gives_one_grade(
        self, db_url: str, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        draft_id = world.drafts[1].id
        results = run_together(db_url, [submit(spec, draft_id, world.alice.id) for _ in range(3)])
        assert sum(isinstance(r, int) for r in results) == 1, results
        assert all(isinstance(r, int | AlreadyGraded) for r in results), results
        session.expire_all()
        assert count(session, Grade, draft_id=draft_id) == 1

    def test_disagreeing_pair_at_once_opens_one_adjudication(
        self, db_url: str, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        draft_id = world.drafts[2].id
        jobs = [submit(spec, draft_id, world.alice.id, tone=1), submit(spec, draft_id, world.bob.id, tone=5)]
        results = run_together(db_url, jobs)
        assert all(isinstance(r, int) for r in results), results
        session.expire_all()
        assert count(session, Adjudication, draft_id=draft_id) == 1
        assert count(session, FinalGrade, draft_id=draft_id) == 0


class TestSimultaneousNextItem:
    def test_reservations_never_exceed_places(
        self, db_url: str, session: Session, spec: EvalSpec, world: GradingWorld
    ) -> None:
        batch = BatchFilter(run_id=world.run.id)

        def take(uid: int) -> Callable[[Session], Any]:
            return lambda s: next_item(session=s, spec=spec, grader_id=uid, batch=batch).id  # type: ignore[union-attr]

        users = (world.alice, world.bob, world.carol, world.lead)
        results = run_together(db_url, [take(u.id) for u in users])
        assert all(isinstance(r, int) for r in results), results
        session.expire_all()
        per_draft = Counter(s.draft_id for s in session.exec(select(GradingSlot)))
        assert per_draft.total() == 4 and max(per_draft.values()) <= spec.grading.graders_per_draft
        # Oldest first: the first draft takes two graders, the second the other two.
        assert per_draft == {world.drafts[0].id: 2, world.drafts[1].id: 2}
