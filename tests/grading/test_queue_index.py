"""The grading queue's index (webapp.grading.queue_index) stays equal to a recount from drafts,
places and grades after every kind of change, and the next item and progress it gives agree with
the rules worked out by hand."""

from __future__ import annotations

import datetime as dt

from sqlmodel import Session, col, func, select

from tests.factories import make_run
from tests.grading.conftest import GradingWorld, scores
from webapp.datasets.models import Dataset
from webapp.grading import queue_index
from webapp.grading.grades import record_grade
from webapp.grading.models import Grade, GradingQueueEntry, GradingQueueGrader, GradingQueueRun, GradingSlot
from webapp.grading.queue import BatchFilter, batch_counts, next_item, release_expired, skip_draft
from webapp.runs.models import Draft
from webapp.spec import EvalSpec

T0 = dt.datetime(2026, 11, 24, 9, 0, tzinfo=dt.UTC)


def recount(session: Session, run_id: int) -> list[tuple[int, int, int, bool]]:
    """(draft, places, grades, gradable) of each draft of the run, counted from the source tables."""
    out = []
    for d in session.exec(select(Draft).where(Draft.run_id == run_id).order_by(col(Draft.id))):
        places = len(session.exec(select(GradingSlot.id).where(GradingSlot.draft_id == d.id)).all())
        grades = len(session.exec(select(Grade.id).where(Grade.draft_id == d.id)).all())
        out.append((d.id, places, grades, d.draft_text is not None and not d.escalated))
    return out  # type: ignore[return-value]


def assert_index_exact(session: Session, run_id: int, n: int) -> None:
    """Every draft's row holds its recounted places and grades, gradability and has_place = places < n;
    the run's totals are its gradable drafts and grades counted up to n each.

    Committed first: the run's grade total is applied at commit (queue_index.settle), so the
    check covers the deferred update as the product runs it."""
    session.commit()
    totals = session.exec(
        select(GradingQueueRun)
        .where(GradingQueueRun.run_id == run_id)
        .execution_options(populate_existing=True)
    ).one()
    recounted = recount(session, run_id)
    gradable_ids = [d for d, *_, ok in recounted if ok]
    per_grader = {
        g: k
        for g, k in session.exec(
            select(Grade.grader_id, func.count())
            .where(col(Grade.draft_id).in_(gradable_ids))
            .group_by(col(Grade.grader_id))
        )
    }
    kept = {
        r.grader_id: r.grades
        for r in session.exec(
            select(GradingQueueGrader)
            .where(GradingQueueGrader.run_id == run_id)
            .execution_options(populate_existing=True)
        )
        if r.grades
    }
    assert kept == per_grader
    assert (totals.drafts, totals.grades_done) == (
        sum(1 for *_, ok in recounted if ok),
        sum(min(g, n) for _, _, g, ok in recounted if ok),
    )
    rows = {
        e.draft_id: e
        for e in session.exec(
            select(GradingQueueEntry)
            .where(GradingQueueEntry.run_id == run_id)
            .execution_options(populate_existing=True)
        )
    }
    counted = recount(session, run_id)
    assert sorted(rows) == [d for d, *_ in counted]
    for draft_id, places, grades, gradable in counted:
        e = rows[draft_id]
        assert (e.places_taken, e.grades_in, e.gradable, e.has_place) == (
            places,
            grades,
            gradable,
            places < n,
        ), draft_id


def test_counters_follow_reservations_grades_skips_and_expiry(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    run_id = world.run.id
    assert run_id is not None
    n = spec.grading.graders_per_draft
    assert n == 2
    batch = BatchFilter(run_id=run_id)
    # Nothing is indexed before the first grading request of the run.
    assert session.exec(select(GradingQueueEntry)).first() is None
    first = next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, now=T0)  # type: ignore[arg-type]
    assert first is not None and first.id == world.drafts[0].id  # oldest first
    assert_index_exact(session, run_id, n)
    # Bob takes the second place of draft 0; Carol is offered draft 1, since draft 0 is full.
    assert (
        next_item(session=session, spec=spec, grader_id=world.bob.id, batch=batch, now=T0).id
        == world.drafts[0].id
    )  # type: ignore[arg-type,union-attr]
    assert (
        next_item(session=session, spec=spec, grader_id=world.carol.id, batch=batch, now=T0).id
        == world.drafts[1].id
    )  # type: ignore[arg-type,union-attr]
    assert_index_exact(session, run_id, n)
    entry = session.get(GradingQueueEntry, world.drafts[0].id, populate_existing=True)
    assert entry is not None and (entry.places_taken, entry.has_place) == (2, False)
    # Alice grades draft 0: a grade in, her place kept.
    record_grade(
        session=session,
        spec=spec,
        draft_id=world.drafts[0].id,
        grader_id=world.alice.id,
        scores=scores(spec),
        now=T0,
    )  # type: ignore[arg-type]
    assert_index_exact(session, run_id, n)
    # Bob skips draft 0: his place is given back.
    skip_draft(session=session, draft_id=world.drafts[0].id, grader_id=world.bob.id, reason="domain", now=T0)  # type: ignore[arg-type]
    assert_index_exact(session, run_id, n)
    entry = session.get(GradingQueueEntry, world.drafts[0].id, populate_existing=True)
    assert entry is not None and (entry.places_taken, entry.grades_in, entry.has_place) == (1, 1, True)
    # Carol's reservation of draft 1 expires (reservation_minutes later) and is released.
    later = T0 + dt.timedelta(minutes=spec.grading.reservation_minutes + 1)
    assert release_expired(session=session, now=later) >= 1
    assert_index_exact(session, run_id, n)
    # Counts by hand: 6 gradable drafts (the escalation is not), 1 grade in of 12 needed, Alice 1.
    counts = batch_counts(session=session, spec=spec, batch=batch, grader_id=world.alice.id)  # type: ignore[arg-type]
    assert (counts.drafts, counts.grades_done, counts.grades_needed, counts.mine) == (6, 1, 12, 1)
    golden = batch_counts(
        session=session, spec=spec, batch=BatchFilter(run_id=run_id, golden=True), grader_id=world.bob.id
    )  # type: ignore[arg-type]
    assert (golden.drafts, golden.grades_done, golden.mine) == (1, 1, 0)
    edge = batch_counts(
        session=session,
        spec=spec,
        batch=BatchFilter(run_id=run_id, category="edge"),
        grader_id=world.alice.id,
    )  # type: ignore[arg-type]
    assert (edge.drafts, edge.grades_done, edge.mine) == (3, 0, 0)  # cases 1, 3, 5


def test_skipped_drafts_come_last_and_full_drafts_never(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    run_id = world.run.id
    assert run_id is not None
    batch = BatchFilter(run_id=run_id)
    d = [x.id for x in world.drafts]
    nxt = next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, now=T0)  # type: ignore[arg-type]
    assert nxt is not None and nxt.id == d[0]
    skip_draft(session=session, draft_id=d[0], grader_id=world.alice.id, reason="kb_missing", now=T0)  # type: ignore[arg-type]
    # Bob and Carol fill draft 1.
    for user in (world.bob, world.carol):
        got = next_item(session=session, spec=spec, grader_id=user.id, batch=batch, exclude=(d[0],), now=T0)  # type: ignore[arg-type]
        assert got is not None and got.id == d[1]
    # Alice: draft 0 is skipped, draft 1 is full, so draft 2.
    got = next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, exclude=(), now=T0)  # type: ignore[arg-type]
    assert got is not None and got.id == d[2]
    assert_index_exact(session, run_id, spec.grading.graders_per_draft)


def test_drafts_added_later_are_appended_and_reimport_rebuilds(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    run_id = world.run.id
    assert run_id is not None
    batch = BatchFilter(run_id=run_id)
    next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, now=T0)  # type: ignore[arg-type]
    before = session.exec(select(GradingQueueRun).where(GradingQueueRun.run_id == run_id)).one().last_draft_id
    # A new sample of case-0 arrives in the same run (a higher draft id).
    case_pk = world.drafts[0].case_pk
    extra = Draft(run_id=run_id, case_pk=case_pk, sample_index=1, draft_text="Another draft.", citations=[])
    session.add(extra)
    session.flush()
    counts = batch_counts(session=session, spec=spec, batch=batch, grader_id=world.alice.id)  # type: ignore[arg-type]
    assert counts.drafts == 7
    after = session.exec(
        select(GradingQueueRun)
        .where(GradingQueueRun.run_id == run_id)
        .execution_options(populate_existing=True)
    ).one()
    assert after.last_draft_id == extra.id and after.last_draft_id > before
    assert_index_exact(session, run_id, spec.grading.graders_per_draft)
    # A re-import changed a draft in place (now escalated): flows invalidates, the next request rebuilds.
    world.drafts[3].escalated = True
    world.drafts[3].draft_text = None
    session.add(world.drafts[3])
    queue_index.invalidate(session=session, run_id=run_id)
    counts = batch_counts(session=session, spec=spec, batch=batch, grader_id=world.alice.id)  # type: ignore[arg-type]
    assert counts.drafts == 6
    assert_index_exact(session, run_id, spec.grading.graders_per_draft)


def test_a_state_read_before_drafts_were_added_is_not_trusted(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    """prefetch_state keeps a state read with other statements; drafts added after it make ensure read again.

    (The flush that writes them ends a subtransaction, and queue_index forgets the state with it.)
    """
    run_id = world.run.id
    assert run_id is not None
    batch = BatchFilter(run_id=run_id)
    next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, now=T0)  # type: ignore[arg-type]
    session.commit()
    stmt, params = queue_index.state_read(world.drafts[0].id)  # type: ignore[arg-type]
    queue_index.prefetch_state(session, session.connection().execute(stmt, params).first())
    extra = Draft(
        run_id=run_id,
        case_pk=world.drafts[0].case_pk,
        sample_index=1,
        draft_text="Another draft.",
        citations=[],
    )
    session.add(extra)  # not flushed yet: ensure flushes it, after the state was read
    counts = batch_counts(session=session, spec=spec, batch=batch, grader_id=world.alice.id)  # type: ignore[arg-type]
    assert counts.drafts == 7
    assert_index_exact(session, run_id, spec.grading.graders_per_draft)


def test_a_new_graders_per_draft_rebuilds_the_index(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    run_id = world.run.id
    assert run_id is not None
    batch = BatchFilter(run_id=run_id)
    for user in (world.alice, world.bob):
        next_item(session=session, spec=spec, grader_id=user.id, batch=batch, now=T0)  # type: ignore[arg-type]
    three = spec.model_copy(update={"grading": spec.grading.model_copy(update={"graders_per_draft": 3})})
    got = next_item(session=session, spec=three, grader_id=world.carol.id, batch=batch, now=T0)  # type: ignore[arg-type]
    assert got is not None and got.id == world.drafts[0].id  # a third place opened on draft 0
    assert_index_exact(session, run_id, 3)
    counts = batch_counts(session=session, spec=three, batch=batch, grader_id=world.carol.id)  # type: ignore[arg-type]
    assert counts.grades_needed == 18


def test_deleting_a_run_removes_its_queue_rows(session: Session, spec: EvalSpec, world: GradingWorld) -> None:
    run_id = world.run.id
    next_item(session=session, spec=spec, grader_id=world.alice.id, batch=BatchFilter(run_id=run_id), now=T0)  # type: ignore[arg-type]
    session.commit()
    for slot in session.exec(select(GradingSlot)):
        session.delete(slot)
    for draft in session.exec(select(Draft).where(col(Draft.run_id) == run_id)):
        session.delete(draft)
    session.flush()
    session.delete(world.run)
    session.commit()
    assert session.exec(select(GradingQueueEntry)).first() is None
    assert session.exec(select(GradingQueueRun)).first() is None
    # And a second run over the same dataset is indexed on its own.
    ds = session.exec(select(Dataset)).one()
    run2 = make_run(session, ds, [{"case_id": "case-0", "draft_text": "Hello."}], name="run-2")
    session.commit()
    counts = batch_counts(
        session=session, spec=spec, batch=BatchFilter(run_id=run2.id), grader_id=world.alice.id
    )  # type: ignore[arg-type]
    assert (counts.drafts, counts.grades_done) == (1, 0)


def test_a_reimport_that_escalates_a_draft_takes_it_out_of_the_queue(
    session: Session, spec: EvalSpec
) -> None:
    import json

    from tests.factories import make_dataset, make_user
    from webapp import flows

    make_dataset(session, [{"case_id": f"c{i}"} for i in range(3)], name="eval")
    grader = make_user(session, email="g@example.test", roles=["labeler"])
    records = [{"case_id": f"c{i}", "draft_text": f"Draft {i}.", "citations": []} for i in range(3)]

    def import_(rows: list[dict[str, object]]) -> None:
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        flows.import_drafts(session=session, data=data, path="d.jsonl", run_name="r1", dataset="eval")

    import_(records)
    run_id = session.exec(select(Draft.run_id)).first()
    assert run_id is not None
    batch = BatchFilter(run_id=run_id)
    first = batch_counts(session=session, spec=spec, batch=batch, grader_id=grader.id)  # type: ignore[arg-type]
    assert first.drafts == 3
    records[1] = {"case_id": "c1", "draft_text": None, "escalated": True, "citations": []}
    import_(records)
    again = batch_counts(session=session, spec=spec, batch=batch, grader_id=grader.id)  # type: ignore[arg-type]
    assert again.drafts == 2
    assert_index_exact(session, run_id, spec.grading.graders_per_draft)


def test_the_batch_page_and_the_grading_page_show_the_same_progress(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    from webapp.grading.progress import batch_progress

    run_id = world.run.id
    assert run_id is not None
    for user, i in ((world.alice, 0), (world.bob, 0), (world.alice, 1)):
        record_grade(
            session=session,
            spec=spec,
            draft_id=world.drafts[i].id,
            grader_id=user.id,
            scores=scores(spec),
            now=T0,
        )  # type: ignore[arg-type]
    for batch in (BatchFilter(run_id=run_id), BatchFilter(run_id=run_id, category="routine")):
        page = batch_counts(session=session, spec=spec, batch=batch, grader_id=world.alice.id)  # type: ignore[arg-type]
        overview = batch_progress(session=session, spec=spec, batch=batch)
        assert (overview.drafts, overview.grades_done, overview.grades_needed) == (
            page.drafts,
            page.grades_done,
            page.grades_needed,
        )
    # By hand: 6 gradable drafts, 3 grades in; routine = cases 0, 2, 4 with 2 grades in (draft 0).
    whole = batch_progress(session=session, spec=spec, batch=BatchFilter(run_id=run_id))
    routine = batch_progress(session=session, spec=spec, batch=BatchFilter(run_id=run_id, category="routine"))
    assert (whole.drafts, whole.grades_done, routine.drafts, routine.grades_done) == (6, 3, 3, 2)


def test_the_run_total_is_owed_until_commit_read_in_the_transaction_and_dropped_on_rollback(
    session: Session, spec: EvalSpec, world: GradingWorld
) -> None:
    """The run's grade total (one row every save changes) is updated at commit; a read in the same
    transaction settles it first, and a rolled-back grade leaves no trace."""
    run_id = world.run.id
    assert run_id is not None
    batch = BatchFilter(run_id=run_id)

    def stored_total() -> int:
        row = session.exec(
            select(GradingQueueRun)
            .where(GradingQueueRun.run_id == run_id)
            .execution_options(populate_existing=True)
        ).one()
        return row.grades_done

    next_item(session=session, spec=spec, grader_id=world.alice.id, batch=batch, now=T0)  # type: ignore[arg-type]
    session.commit()
    grade = {
        "session": session,
        "spec": spec,
        "draft_id": world.drafts[0].id,
        "scores": scores(spec),
        "now": T0,
    }
    record_grade(grader_id=world.alice.id, **grade)  # type: ignore[arg-type]
    assert stored_total() == 0  # owed: not yet written
    assert batch_counts(session=session, spec=spec, batch=batch).grades_done == 1  # a reader settles it
    assert stored_total() == 1
    session.commit()
    assert stored_total() == 1  # settled once, not twice
    record_grade(grader_id=world.bob.id, **grade)  # type: ignore[arg-type]
    session.rollback()
    assert stored_total() == 1
    record_grade(grader_id=world.bob.id, **grade)  # type: ignore[arg-type]
    session.commit()  # applied at commit
    assert stored_total() == 2
    assert_index_exact(session, run_id, spec.grading.graders_per_draft)
