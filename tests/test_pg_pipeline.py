"""webapp.pg_pipeline: a batch gives what psycopg's cursor gives, in one transaction, with the server-side
statements it prepares kept only when the server has them (PostgreSQL only: SQLite has no pipeline)."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors, pq
from psycopg.types.json import Jsonb

from tests.conftest import PG_URL
from webapp import pg_pipeline

pytestmark = pytest.mark.skipif(not PG_URL, reason="PostgreSQL only (DRAFTDESK_TEST_DATABASE_URL)")

READ = "SELECT %(n)s::int + 1 AS n, %(t)s::text AS t, %(at)s::timestamptz AS at, %(doc)s::jsonb AS doc, %(flag)s::boolean AS flag, %(none)s::text AS none, %(amount)s::numeric AS amount"
PARAMS: dict[str, Any] = {
    "n": 41,
    "t": "O'Brien; DROP TABLE x",
    "at": dt.datetime(2026, 11, 24, 9, 30, tzinfo=dt.UTC),
    "doc": Jsonb({"a": [1, 2], "b": None}),
    "flag": True,
    "none": None,
    "amount": decimal.Decimal("12.50"),
}
SERIES = "SELECT g, g * %(k)s AS twice FROM generate_series(1, %(upto)s) AS g ORDER BY g"


@pytest.fixture
def raw() -> Iterator[psycopg.Connection[Any]]:
    """A connection that prepares a statement on its second run (psycopg's default is the sixth)."""
    url = PG_URL.replace("postgresql+psycopg://", "postgresql://")
    conn = psycopg.connect(url)
    conn.prepare_threshold = 1
    try:
        yield conn
    finally:
        conn.close()


def _prepared(conn: psycopg.Connection[Any]) -> set[str]:
    """The SQL of the connection's statements prepared on the server."""
    with conn.cursor() as cur:
        cur.execute("SELECT statement FROM pg_prepared_statements", prepare=False)
        return {row[0] for row in cur.fetchall()}


def _series_prepared(conn: psycopg.Connection[Any]) -> bool:
    return any("generate_series" in sql for sql in _prepared(conn))


def _by_cursor(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, params, prepare=False)
        return cur.fetchall()


def test_rows_are_the_cursors_the_first_time_and_once_prepared(raw: psycopg.Connection[Any]) -> None:
    expected = [_by_cursor(raw, READ, PARAMS), _by_cursor(raw, SERIES, {"k": 2, "upto": 3})]
    assert expected[0] == [
        (
            42,
            "O'Brien; DROP TABLE x",
            PARAMS["at"],
            {"a": [1, 2], "b": None},
            True,
            None,
            decimal.Decimal("12.50"),
        )
    ]
    assert expected[1] == [(1, 2), (2, 4), (3, 6)]
    raw.rollback()
    for attempt in range(3):  # unnamed, then prepared and run by name, then by name
        answers = pg_pipeline.run(raw, [(READ, PARAMS), (SERIES, {"k": 2, "upto": 3})])
        assert [a.rows for a in answers] == expected, attempt
        # int4 text timestamptz jsonb bool text numeric
        assert answers[0].type_codes == [23, 25, 1184, 3802, 16, 25, 1700]
        ours = {sql for sql in _prepared(raw) if "O'Brien" not in sql and ("$1" in sql)}
        assert len(ours) == (0 if attempt == 0 else 2), attempt
    assert all("%(" not in sql for sql in ours)  # as psycopg converted them


def test_a_write_without_returning_answers_no_rows_and_the_batch_opens_the_transaction(
    raw: psycopg.Connection[Any],
) -> None:
    raw.execute("CREATE TEMP TABLE note (id int PRIMARY KEY, body text) ON COMMIT PRESERVE ROWS")
    raw.commit()
    assert raw.pgconn.transaction_status == pq.TransactionStatus.IDLE
    write, read = pg_pipeline.run(
        raw,
        [
            ("INSERT INTO note VALUES (%(id)s, %(body)s)", {"id": 1, "body": "kept?"}),
            ("SELECT body FROM note", {}),
        ],
    )
    assert (write.type_codes, write.rows) == ([], [])
    assert read.rows == [("kept?",)]  # the read saw the write before it
    assert raw.pgconn.transaction_status == pq.TransactionStatus.INTRANS  # BEGIN went in the batch
    raw.rollback()
    assert _by_cursor(raw, "SELECT count(*) FROM note", {}) == [(0,)]  # so the rollback undid the write


def test_the_first_error_is_raised_and_a_prepare_the_server_skipped_is_not_kept(
    raw: psycopg.Connection[Any],
) -> None:
    raw.execute("CREATE TEMP TABLE note (id int PRIMARY KEY) ON COMMIT PRESERVE ROWS")
    raw.execute("SAVEPOINT before")
    raw.execute("ROLLBACK TO SAVEPOINT before")  # seen once: psycopg drops its cache only the first time
    pg_pipeline.run(raw, [(SERIES, {"k": 1, "upto": 1})])  # seen once: prepared the next time
    raw.execute("SAVEPOINT before")
    with pytest.raises(errors.DivisionByZero):
        pg_pipeline.run(
            raw,
            [
                ("INSERT INTO note VALUES (%(id)s)", {"id": 1}),
                ("SELECT 1 / %(zero)s::int", {"zero": 0}),
                (SERIES, {"k": 1, "upto": 1}),  # its prepare comes after the error: the server skips it
            ],
        )
    raw.execute("ROLLBACK TO SAVEPOINT before")
    assert not _series_prepared(raw)
    # had the skipped name been kept, this would run it by name and fail (26000)
    for _ in range(2):  # (counted afresh: prepared on its second run)
        assert [a.rows for a in pg_pipeline.run(raw, [(SERIES, {"k": 3, "upto": 2})])] == [[(1, 3), (2, 6)]]
    assert _series_prepared(raw)
    assert _by_cursor(raw, "SELECT count(*) FROM note", {}) == [(0,)]  # the failed batch wrote nothing


@pytest.mark.parametrize(
    "drop",
    [["ROLLBACK"], ["SAVEPOINT s", "ROLLBACK TO SAVEPOINT s"], ["DEALLOCATE ALL"]],
    ids=["rollback", "savepoint rollback", "deallocate all"],
)
def test_batches_keep_working_after_psycopg_drops_every_prepared_statement(
    raw: psycopg.Connection[Any], drop: list[str]
) -> None:
    """psycopg answers these with DEALLOCATE ALL once it has prepared statements (the first time it
    sees each): the batches' statements go with them, and the batches must not run them by name."""
    for _ in range(2):
        pg_pipeline.run(raw, [(SERIES, {"k": 1, "upto": 1})])
        raw.execute("SELECT 1 + %s", (1,))  # psycopg prepares one of its own through the cursor
    assert _series_prepared(raw)
    for sql in drop:
        raw.execute(sql)  # (a ROLLBACK the way SQLAlchemy sends it: the driver's rollback)
    if drop == ["ROLLBACK"]:
        raw.rollback()
    assert _prepared(raw) == set()
    for _ in range(2):
        assert pg_pipeline.run(raw, [(SERIES, {"k": 4, "upto": 1})])[0].rows == [(1, 4)]
    assert _series_prepared(raw)


def test_a_connection_told_to_prepare_nothing_gets_no_names(raw: psycopg.Connection[Any]) -> None:
    raw.prepare_threshold = None  # psycopg's setting for PgBouncer in transaction mode
    for _ in range(3):
        assert pg_pipeline.run(raw, [(SERIES, {"k": 1, "upto": 2})])[0].rows == [(1, 1), (2, 2)]
    assert _prepared(raw) == set()


def test_a_batch_on_a_connection_the_server_closed_fails_once_then_a_new_one_serves() -> None:
    from sqlalchemy import exc, literal, select, text
    from sqlmodel import Session

    from webapp import db, sql_batch

    engine, admin = db.make_engine(PG_URL), db.make_engine(PG_URL)
    one = select(literal(1).label("x"))
    try:
        with Session(engine) as session:
            pid = session.connection().execute(text("SELECT pg_backend_pid()")).scalar()
            session.commit()
        with admin.connect() as other:
            other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            other.commit()
        with pytest.raises(exc.OperationalError), Session(engine) as session:  # (pinged only after 5 s idle)
            sql_batch.together(session, (one, {}), (one, {}))
        with Session(engine) as session:
            assert [r.all() for r in sql_batch.together(session, (one, {}), (one, {}))] == [[(1,)], [(1,)]]
            assert session.connection().execute(text("SELECT pg_backend_pid()")).scalar() != pid
    finally:
        engine.dispose()
        admin.dispose()
