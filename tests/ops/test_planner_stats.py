"""SQLite's planner statistics (webapp/ops/planner_stats.py): gathered by the job, and what they change for the queue."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.factories import make_dataset, make_run, make_user
from webapp.core.spec import EvalSpec
from webapp.grading import queue
from webapp.grading.queue import BatchFilter
from webapp.ops import planner_stats


def held_plan(engine: Engine, run_id: int, grader_id: int) -> list[str]:
    """SQLite's plan for "the drafts this grader holds" (held_stmt), one line per step."""
    stmt = queue.held_stmt(BatchFilter(run_id=run_id).shape)
    compiled = stmt.compile(engine)
    values = {**BatchFilter(run_id=run_id).params(), "grader_id": grader_id, "param_1": 2, "param_2": 0}
    sql = str(compiled).replace("__[POSTCOMPILE_exclude]", "-1")
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, tuple(values[k] for k in compiled.positiontup or [] if k != "exclude"))
        return [str(r[3]) for r in rows]


def test_the_statistics_send_the_held_drafts_query_through_the_graders_reservations(
    engine: Engine, session: Session, spec: EvalSpec
) -> None:
    """A 600-draft run, a grader holding two: without statistics SQLite walks the run's drafts; with them, the grader's reservations."""
    ds = make_dataset(session, [{"case_id": f"c{i}"} for i in range(60)])
    run = make_run(session, ds, [{"case_id": f"c{i % 60}", "sample_index": i // 60, "draft_text": "Hello"} for i in range(600)])
    grader = make_user(session, email="g@example.test", roles=["labeler"])
    assert run.id is not None and grader.id is not None
    batch = BatchFilter(run_id=run.id)
    first = queue.reserve_next(session=session, spec=spec, grader_id=grader.id, batch=batch)
    assert first is not None
    queue.reserve_next(session=session, spec=spec, grader_id=grader.id, batch=batch, exclude=(first,))
    session.commit()
    held = queue.held_drafts(session=session, spec=spec, grader_id=grader.id, batch=batch)
    if engine.dialect.name != "sqlite":
        assert planner_stats.refresh(engine) is False  # PostgreSQL's autoanalyze keeps its own
        return
    assert held_plan(engine, run.id, grader.id)[0].startswith("SEARCH draft USING INDEX ix_draft_run_id")
    assert planner_stats.refresh(engine) is True
    with engine.connect() as conn:
        tables = {str(t) for (t,) in conn.exec_driver_sql("SELECT DISTINCT tbl FROM sqlite_stat1")}
    assert {"draft", "grading_slot", "eval_case"} <= tables  # tables with rows (an empty one gets no statistics)
    step = held_plan(engine, run.id, grader.id)[0]
    assert step.startswith(("SCAN grading_slot", "SEARCH grading_slot")), step  # the two reservations first, then their drafts
    # the same rows either way
    assert queue.held_drafts(session=session, spec=spec, grader_id=grader.id, batch=batch) == held and len(held) == 2
