"""SQLite's planner statistics (webapp/ops/planner_stats.py): gathered by the job, and what they change for the queue."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.factories import make_dataset, make_run, make_user
from webapp.core.spec import EvalSpec
from webapp.grading import queue, queue_statements
from webapp.grading.queue import BatchFilter
from webapp.ops import planner_stats
from webapp.runs.models import Draft


def query_plan(engine: Engine, stmt: Select[Any], values: dict[str, object]) -> list[str]:
    """SQLite's plan for one of the queue's statements, one line per step."""
    compiled = stmt.compile(engine)
    sql = str(compiled).replace("__[POSTCOMPILE_exclude]", "-1")
    with engine.connect() as conn:
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, tuple(values[k] for k in compiled.positiontup or [] if k != "exclude"))
        return [str(r[3]) for r in rows]


def test_the_statistics_send_the_next_draft_query_through_the_cases_in_queue_order(
    engine: Engine, session: Session, spec: EvalSpec
) -> None:
    """A 600-draft run: without statistics SQLite walks the run's drafts and sorts them all; with them,
    the dataset's cases in position order (the LIMIT stops early), and the held drafts go through the
    grader's reservations either way."""
    ds = make_dataset(session, [{"case_id": f"c{i}"} for i in range(60)])
    run = make_run(session, ds, [{"case_id": f"c{i % 60}", "sample_index": i // 60, "draft_text": "Hello"} for i in range(600)])
    grader = make_user(session, email="g@example.test", roles=["labeler"])
    assert run.id is not None and grader.id is not None
    batch = BatchFilter(run_id=run.id)
    first = queue.reserve_next(session=session, spec=spec, grader_id=grader.id, batch=batch)
    assert first is not None
    second = queue.reserve_next(session=session, spec=spec, grader_id=grader.id, batch=batch, exclude=(first,))
    session.commit()
    held = queue.held_drafts(session=session, spec=spec, grader_id=grader.id, batch=batch)
    values = {**batch.params(), "grader_id": grader.id, "n": 2, "param_1": 50, "param_2": 0}
    candidates = queue_statements.candidates_stmt(batch.shape, False, False)
    held_stmt = queue_statements.held_stmt(batch.shape, False)
    if engine.dialect.name != "sqlite":
        assert planner_stats.refresh(engine) is False  # PostgreSQL's autoanalyze keeps its own
        return
    assert query_plan(engine, candidates, values)[0].startswith("SEARCH draft USING INDEX ix_draft_run_id")
    assert query_plan(engine, held_stmt, values)[0].startswith("SEARCH draft USING INDEX ix_draft_run_id (run_id=? AND rowid=?)")
    assert planner_stats.refresh(engine) is True
    with engine.connect() as conn:
        tables = {str(t) for (t,) in conn.exec_driver_sql("SELECT DISTINCT tbl FROM sqlite_stat1")}
    assert {"draft", "grading_slot", "eval_case"} <= tables  # tables with rows (an empty one gets no statistics)
    step = query_plan(engine, candidates, values)[0]
    assert step.startswith("SEARCH eval_case USING COVERING INDEX ix_eval_case_dataset_position"), step
    step = query_plan(engine, held_stmt, values)[0]
    assert step.startswith("SEARCH draft USING INTEGER PRIMARY KEY"), step  # by the reservations' draft ids
    # the same rows either way: the queue's next two drafts, then the ones after them
    assert queue.held_drafts(session=session, spec=spec, grader_id=grader.id, batch=batch) == held and len(held) == 2
    assert [h[0] for h in held] == [first, second]
    third = queue.reserve_next(session=session, spec=spec, grader_id=grader.id, batch=batch, exclude=(first, second), held=None)
    ids = {(d.case_pk, d.sample_index): d.id for d in session.exec(select(Draft).where(Draft.run_id == run.id))}
    cases = sorted({pk for pk, _ in ids})
    assert (first, second, third) == (ids[(cases[0], 0)], ids[(cases[0], 1)], ids[(cases[0], 2)])
