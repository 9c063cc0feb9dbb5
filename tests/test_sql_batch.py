"""webapp.sql_batch: statements sent together give what SQLAlchemy gives, and deferred writes keep their order."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import bindparam, exc, insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.grading.conftest import build_world, scores
from webapp import sql_batch
from webapp.auth import service as auth_service
from webapp.db import table_of
from webapp.flows import JUDGE
from webapp.grading import queue_index
from webapp.grading.evidence import _DRAFT_CHECKS, kb_read
from webapp.grading.grades import record_grade
from webapp.grading.item import _ITEM, _REFERENCE, _SLOTS_OF, previous_read
from webapp.grading.models import GradingSlot
from webapp.grading.outcome import GRADES_OF as _GRADES_OF
from webapp.grading.queue import BatchFilter, next_item
from webapp.kb.models import KbArticle
from webapp.spec import EvalSpec

SLOTS = table_of(GradingSlot)
ARTICLES = table_of(KbArticle)


def _graded_world(session: Session, spec: EvalSpec) -> Any:
    w = build_world(session)
    batch = BatchFilter(run_id=w.run.id)  # type: ignore[arg-type]
    first = next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch)  # type: ignore[arg-type]
    assert first is not None and first.id is not None
    record_grade(session=session, spec=spec, draft_id=first.id, grader_id=w.alice.id, scores=scores(spec))  # type: ignore[arg-type]
    next_item(session=session, spec=spec, grader_id=w.alice.id, batch=batch)  # type: ignore[arg-type]
    session.commit()
    return w, first.id


def test_together_gives_the_rows_sqlalchemy_gives(session: Session, spec: EvalSpec) -> None:
    """JSON, timestamps with time zone, booleans, floats, NULLs, scalar subqueries and an expanding IN."""
    w, draft_id = _graded_world(session, spec)
    batch = BatchFilter(run_id=w.run.id)
    queue_index.ensure(session=session, run_id=batch.run_id, graders_per_draft=spec.grading.graders_per_draft)
    items: list[tuple[Any, dict[str, Any]]] = [
        (_ITEM, {"draft_id": draft_id}),
        (_GRADES_OF, {"draft_id": draft_id}),
        (_SLOTS_OF, {"draft_id": draft_id}),
        (_REFERENCE, {"case_pk": w.drafts[0].case_pk}),
        previous_read(grader_id=w.alice.id, exclude_draft=-1),  # type: ignore[arg-type]
        (_DRAFT_CHECKS, {"draft_id": draft_id}),
        JUDGE.read(draft_id),
        (queue_index.held_stmt(batch.shape), {**batch.params(), "grader_id": w.alice.id, "exclude": [-1]}),
        (queue_index.counts_stmt(batch.shape), {**batch.params(), "grader_id": w.alice.id, "n": 2}),
    ]
    kb = kb_read([{"article_id": "KB-1"}, {"article_id": "KB-404"}])
    assert kb is not None
    items.append(kb)
    # a value rendered into the SQL (the roles' separator), then the same statement again from the kept SQL
    token = auth_service.start_session(session=session, user=w.alice, hours=1)
    items += [(auth_service._SESSION_USER, {"token_hash": auth_service.sha256_hex(token)})] * 2
    items.append((queue_index._STATE, {"run_id": w.run.id}))
    conn = session.connection()
    expected = [[tuple(r) for r in conn.execute(stmt, params)] for stmt, params in items]
    for attempt in range(3):  # on PostgreSQL: unnamed, then prepared on the server, then run by name
        got = [[tuple(r) for r in result] for result in sql_batch.together(session, *items)]
        assert got == expected, attempt
    assert all(expected[i] for i in (0, 1, 7, 8, 9, 10, 11, 12))  # rows to compare
    assert expected[10][0][-1] == "labeler"  # the roles, joined with the rendered separator
    item = sql_batch.together(session, (_ITEM, {"draft_id": draft_id}))[0].one()
    assert item.citations == [{"article_id": "KB-1", "revision": 1}] and item.golden in (True, False)
    grade = sql_batch.together(session, (_GRADES_OF, {"draft_id": draft_id}))[0].one()
    assert isinstance(grade.created_at, dt.datetime)  # (aware on PostgreSQL: equal to SQLAlchemy's above)


def test_together_runs_in_order_in_the_transaction(session: Session, spec: EvalSpec) -> None:
    """A write and the read after it in one call: the read sees the write; a rollback undoes it."""
    w = build_world(session)
    draft = w.drafts[0]
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    values = {"draft_id": draft.id, "slot": 0, "grader_id": w.bob.id, "reserved_at": now, "expires_at": now}
    inserted, read = sql_batch.together(
        session,
        (insert(SLOTS).returning(SLOTS.c.id), values),
        (select(SLOTS.c.grader_id).where(SLOTS.c.draft_id == bindparam("d")), {"d": draft.id}),
    )
    assert inserted.scalar() is not None and read.scalars().all() == [w.bob.id]
    session.rollback()
    assert session.connection().execute(select(SLOTS.c.id)).all() == []


def test_deferred_writes_go_before_the_next_statement_and_with_the_commit(
    engine: Engine, session: Session, spec: EvalSpec
) -> None:
    w = build_world(session)
    stmt = update(ARTICLES).where(ARTICLES.c.article_id == bindparam("a")).values(intent=bindparam("t"))
    seen: list[list[str]] = []
    stop = sql_batch.observe(engine, seen.append)
    try:
        sql_batch.defer(session, stmt, {"a": "KB-1", "t": "first"})
        sql_batch.defer(session, stmt, {"a": "KB-1", "t": "second"})  # order kept: the last one wins
        # A plain SQLAlchemy statement, not sent through sql_batch, still comes after them.
        title = session.connection().execute(select(ARTICLES.c.intent).where(ARTICLES.c.article_id == "KB-1"))
        assert title.scalar() == "second"
        sql_batch.defer(session, stmt, {"a": "KB-1", "t": "third"})
        session.commit()
    finally:
        stop()
    with Session(engine) as other:
        assert other.connection().execute(select(ARTICLES.c.intent)).scalar() == "third"
    if engine.dialect.name == "postgresql":
        # the two deferred updates in one round trip before the read, the third with the COMMIT
        assert [len(s) for s in seen] == [2, 1, 2] and seen[-1][-1] == "COMMIT"
    else:  # SQLite runs each at once
        assert sum(1 for s in seen if s != ["COMMIT"]) == 4
    assert w.run.id is not None


def test_rollback_drops_deferred_writes(engine: Engine, session: Session, spec: EvalSpec) -> None:
    build_world(session)
    stmt = update(ARTICLES).values(intent=bindparam("t"))
    sql_batch.defer(session, stmt, {"t": "never"})
    session.rollback()
    session.connection().execute(select(ARTICLES.c.id)).all()  # the next statement sends nothing left over
    session.commit()
    with Session(engine) as other:
        assert "never" not in other.connection().execute(select(ARTICLES.c.intent)).scalars().all()


def test_savepoint_rollback_undoes_writes_deferred_inside_it(
    engine: Engine, session: Session, spec: EvalSpec
) -> None:
    build_world(session)
    stmt = update(ARTICLES).values(intent=bindparam("t"))
    savepoint = session.begin_nested()
    sql_batch.defer(session, stmt, {"t": "inside"})
    savepoint.rollback()
    session.commit()
    with Session(engine) as other:
        assert "inside" not in other.connection().execute(select(ARTICLES.c.intent)).scalars().all()


def _bobs_place(w: Any) -> dict[str, Any]:
    """A grading_slot row: inserting it twice breaks a unique constraint."""
    return {
        "draft_id": w.drafts[0].id,
        "slot": 0,
        "grader_id": w.bob.id,
        "reserved_at": dt.datetime.now(dt.UTC),
    }


def test_a_failing_deferred_write_is_raised_where_it_is_sent(session: Session, spec: EvalSpec) -> None:
    w = build_world(session)
    row = _bobs_place(w)
    sql_batch.defer(session, insert(SLOTS), row)
    with pytest.raises(exc.IntegrityError) as raised:
        sql_batch.defer(
            session, insert(SLOTS), row
        )  # the same place twice: a unique violation (SQLite: here)
        sql_batch.together(session, (select(SLOTS.c.id), {}))  # PostgreSQL: sent, and raised, here
    assert "grading_slot" in str(raised.value)
    session.rollback()


def test_a_connection_returned_without_commit_carries_nothing_over(engine: Engine, spec: EvalSpec) -> None:
    with Session(engine) as s:
        build_world(s)
    with Session(engine) as s:
        sql_batch.defer(s, update(ARTICLES).values(intent=bindparam("t")), {"t": "abandoned"})
        s.close()  # back to the pool: reset, not committed
    with Session(engine) as s:
        s.connection().execute(select(ARTICLES.c.id)).all()
        s.commit()
        assert "abandoned" not in s.connection().execute(select(ARTICLES.c.intent)).scalars().all()


def test_an_idle_pooled_connection_closed_by_the_server_is_replaced(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """webapp.db pings a connection at checkout only after it has been idle; a dead one is swapped, not used."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite has no server to close connections")
    from sqlalchemy import text

    from webapp import db

    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        admin = db.make_engine(db_url)  # another pool: this one's only connection is the one to close
        try:
            with admin.connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
                other.commit()
        finally:
            admin.dispose()
        monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 0.0)
        pings: list[int] = []
        real_ping = engine.dialect.do_ping
        monkeypatch.setattr(engine.dialect, "do_ping", lambda c: pings.append(1) or real_ping(c))
        with engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() not in (pid, None)
        assert pings  # the dead connection was pinged, then discarded
        monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 3600.0)
        pings.clear()
        with engine.connect() as conn:
            conn.execute(text("SELECT 1")).scalar()
        assert pings == []  # a connection in steady use is not pinged
    finally:
        engine.dispose()


def test_a_deferred_write_failing_at_the_commit_commits_nothing(
    engine: Engine, session: Session, spec: EvalSpec
) -> None:
    w = build_world(session)
    row = _bobs_place(w)
    stmt = update(ARTICLES).values(intent=bindparam("t"))
    with pytest.raises(exc.IntegrityError):
        sql_batch.defer(session, stmt, {"t": "lost with the commit"})
        sql_batch.defer(session, insert(SLOTS), row)
        sql_batch.defer(session, insert(SLOTS), row)  # SQLite raises here, PostgreSQL at the commit
        session.commit()
    session.rollback()
    with Session(engine) as other:
        assert (
            "lost with the commit"
            not in other.connection().execute(select(ARTICLES.c.intent)).scalars().all()
        )
        assert other.connection().execute(select(SLOTS.c.id)).all() == []


def test_a_rollback_after_psycopgs_own_prepared_statements_leaves_batches_working(db_url: str) -> None:
    """psycopg answers a ROLLBACK with DEALLOCATE ALL once it has prepared statements of its own
    (after 5 runs of one statement), which drops the batches' prepared statements too."""
    from sqlalchemy import text

    from webapp import db

    engine = db.make_engine(db_url)
    read = select(SLOTS.c.draft_id).where(SLOTS.c.draft_id == bindparam("d"))
    try:
        with engine.connect() as conn:
            session = Session(bind=conn)
            for attempt in range(3):
                for _ in range(6):  # psycopg prepares this one itself
                    conn.execute(text("SELECT 1 + :x"), {"x": 1}).scalar()
                for _ in range(2):  # and the batch prepares its own
                    assert sql_batch.together(session, (read, {"d": -1}), (read, {"d": -2}))[0].all() == []
                conn.rollback()  # (a real ROLLBACK: the transaction is open)
                assert sql_batch.together(session, (read, {"d": -1}), (read, {"d": -2}))[1].all() == [], (
                    attempt
                )
                conn.rollback()
    finally:
        engine.dispose()
