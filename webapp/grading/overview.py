"""The grader's overviews: my queues (every run's batch, returned and recent grades, pace) and one batch's drafts."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from webapp.auth.service import Principal
from webapp.core.db import stored_id
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.grades import returned_grades
from webapp.grading.models import Grade, GradingPlan, GradingSlot
from webapp.grading.plan import plan_closed_reason
from webapp.grading.progress import BatchProgress, Pace, batch_progress, grading_pace, waiting_for_grader
from webapp.grading.queue import BatchFilter, batch_drafts_stmt
from webapp.grading.skips import skip_counts
from webapp.grading.status import GradingStatus, grading_status
from webapp.runs.models import Draft, Run
from webapp.web.page_view import PageView


@dataclass(frozen=True)
class QueuesView(PageView):
    """My queues: each run's batch with its progress, grades returned to me, my recent grades and places, my pace."""

    batches: list[tuple[Run, BatchProgress]]
    returned: list[Grade]
    mine: list[Grade]
    held: list[GradingSlot]
    waiting: int
    my_pace: Pace | None
    team_pace: list[Pace] | None  # the lead sees everyone's pace; a labeler only their own
    closed: dict[int, str]  # by run: why its remaining drafts are no longer served (graded until decided)
    flash: str | None = None


def queues_view(*, session: Session, spec: EvalSpec, principal: Principal) -> QueuesView:
    """Return my queues: each run's batch with its progress, grades returned to me, my recent grades and my pace."""
    me = principal.user_id
    runs = session.exec(select(Run).order_by(col(Run.created_at).desc(), col(Run.id).desc())).all()
    batches = [
        (run, batch_progress(session=session, spec=spec, batch=BatchFilter(run_id=run.id)))
        for run in runs
        if run.id is not None
    ]
    mine = session.exec(
        select(Grade).where(Grade.grader_id == me).order_by(col(Grade.updated_at).desc()).limit(15)
    ).all()
    held = session.exec(
        select(GradingSlot).where(
            GradingSlot.grader_id == me,
            col(GradingSlot.grade_id).is_(None),
            col(GradingSlot.expires_at) > utcnow(),
        )
    ).all()
    return QueuesView(
        batches=[(r, p) for r, p in batches if p.drafts],
        returned=returned_grades(session=session, grader_id=me),
        mine=list(mine),
        held=list(held),
        waiting=waiting_for_grader(session=session, spec=spec, grader_id=me),
        my_pace=next(iter(grading_pace(session=session, grader_ids=[me])), None),
        team_pace=grading_pace(session=session) if principal.has_role("lead") else None,
        closed=closed_runs(session=session),
    )


def closed_runs(*, session: Session) -> dict[int, str]:
    """Return, by run, why its remaining planned drafts are closed to grading (a run graded until decided closed)."""
    rows = session.exec(
        select(GradingPlan.run_id, GradingPlan.closed_reason).where(col(GradingPlan.closed_reason).is_not(None)).distinct()
    ).all()
    return {run_id: reason for run_id, reason in rows if reason is not None}


# Drafts listed per page of a batch. A run of 1,500 drafts listed whole took ~240 ms to render
# (bench_realistic); a page of 100 is what a grader scans, and the queue, not the list, hands out work.
PAGE_SIZE = 100


@dataclass(frozen=True)
class BatchView(PageView):
    """A batch: its progress overall and per grader, the filters it offers, and where each draft of a page stands."""

    run: Run
    batch: BatchFilter
    progress: BatchProgress
    status: GradingStatus | None  # the state column is the lead's, for the rows of this page only
    rows: list[tuple[Draft, EvalCase]]
    page: int
    pages: int
    total: int
    first_row: int
    own: dict[int, Grade]  # the viewer's grades of the page's drafts
    count_by_draft: dict[int, int]
    categories: list[str]
    intents: list[str]  # the case's intent (the dataset's label)
    draft_intents: list[str]  # the intent the assistant predicted for the draft
    is_lead: bool
    skips: dict[int, int]
    closed: str | None  # why the run's remaining drafts are no longer served (graded until decided), else None
    flash: str | None = None
    error: str | None = None


def batch_view(
    *, session: Session, spec: EvalSpec, principal: Principal, batch: BatchFilter, page: int = 1
) -> BatchView | None:
    """Return a batch: its progress overall and per grader, the filters it offers, and where each draft of a page stands.

    None when the run does not exist. `page` counts from 1; a page past the last shows the last.
    """
    run = session.get(Run, batch.run_id)
    if run is None:
        return None
    progress = batch_progress(session=session, spec=spec, batch=batch)
    total = progress.drafts  # the batch's gradable drafts, counted once for the progress and the pages
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(max(1, page), pages)
    rows = list(session.exec(batch_drafts_stmt(batch).limit(PAGE_SIZE).offset((page - 1) * PAGE_SIZE)).all())
    ids = [stored_id(d.id) for d, _ in rows]
    own = {
        g.draft_id: g
        for g in session.exec(
            select(Grade).where(Grade.grader_id == principal.user_id, col(Grade.draft_id).in_(ids))
        )
    }
    count_by_draft: dict[int, int] = {}
    for draft_id in session.exec(select(Grade.draft_id).where(col(Grade.draft_id).in_(ids))):
        count_by_draft[draft_id] = count_by_draft.get(draft_id, 0) + 1
    labels = session.exec(
        select(EvalCase.category, EvalCase.intent).where(EvalCase.dataset_id == run.dataset_id).distinct()
    ).all()
    draft_intents = session.exec(
        select(Draft.intent).where(Draft.run_id == batch.run_id, col(Draft.intent).is_not(None)).distinct()
    ).all()
    is_lead = principal.has_role("lead")
    return BatchView(
        run=run,
        batch=batch,
        progress=progress,
        status=grading_status(session=session, run_id=batch.run_id, only=ids) if is_lead else None,
        rows=[(d, c) for d, c in rows],
        page=page,
        pages=pages,
        total=total,
        first_row=(page - 1) * PAGE_SIZE + 1,
        own=own,
        count_by_draft=count_by_draft,
        categories=sorted({c for c, _ in labels if c}),
        intents=sorted({i for _, i in labels if i}),
        draft_intents=sorted({i for i in draft_intents if i}),
        is_lead=is_lead,
        skips=skip_counts(session=session, draft_ids=ids) if is_lead else {},
        closed=plan_closed_reason(session=session, run_id=batch.run_id),
    )


def runs_newest_first(*, session: Session) -> list[Run]:
    """Return every run, newest first (the agreement page's run filter)."""
    return list(session.exec(select(Run).order_by(col(Run.id).desc())).all())
