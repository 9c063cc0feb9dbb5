"""Database engine, one transaction per request, and session helpers for the CLI and tests."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import anyio
from fastapi import Depends, Request
from sqlalchemy import Table, event, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError
from sqlmodel import Session, SQLModel, create_engine
from starlette.concurrency import run_in_threadpool


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine; SQLite gets WAL, foreign keys and a busy timeout on every connection."""
    if url.startswith("sqlite"):
        engine = create_engine(url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if ":memory:" not in url:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    engine = create_engine(url, echo=echo, pool_size=10, max_overflow=20)
    _ping_after_idle(engine)
    return engine


# A pooled connection idle this long is pinged before use (a server restart or an idle timeout
# may have closed it meanwhile); one in steady use is not.
PING_AFTER_IDLE_SECONDS = 5.0
_IDLE_SINCE = "draftdesk_idle_since"


def _ping_after_idle(engine: Engine) -> None:
    """Ping a PostgreSQL connection at checkout only when it has been idle (SQLAlchemy's pre-ping pinged every one).

    Why: pool_pre_ping sent a round trip at every checkout, three per grading save-and-next on a
    busy server whose connections had been idle for milliseconds. A connection closed while in
    steady use still fails its request once; SQLAlchemy then invalidates the pool, so the next
    requests get fresh connections. (SQLAlchemy's documented recipe: raising DisconnectionError
    in a checkout listener makes the pool discard the connection and take another.)
    """

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as err:  # noqa: BLE001 - any failure means this connection is gone
            raise DisconnectionError("the pooled connection is closed") from err
        if not alive:
            raise DisconnectionError("the pooled connection is closed")


def is_sqlite(session_or_engine: Session | Engine) -> bool:
    """Tell whether the session's or engine's database is SQLite."""
    bind = session_or_engine.get_bind() if isinstance(session_or_engine, Session) else session_or_engine
    return bind.dialect.name == "sqlite"


async def get_session(request: Request) -> AsyncIterator[Session]:
    """Yield the request's session and commit once, after the route has run; roll back on error.

    Async, with the end in one worker thread: making a Session does no I/O (it connects at its
    first statement), so only the commit-or-rollback and the close need a thread, and they share
    one hop (a plain generator dependency took two, one to enter and one to leave).
    """
    session = Session(request.app.state.engine, expire_on_commit=False)
    try:
        yield session
    except BaseException:
        with anyio.CancelScope(shield=True):  # a client that went away still gets its rollback and close
            await run_in_threadpool(_end, session, commit=False)
        raise
    with anyio.CancelScope(shield=True):
        await run_in_threadpool(_end, session, commit=True)


def _end(session: Session, *, commit: bool) -> None:
    """Commit (or roll back) and close: the connection goes back to the pool whatever happens."""
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    finally:
        session.close()


# scope="function": the commit happens before the response is sent, so a failed commit is an error
# the client sees, and a client that reads right after a write sees it.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def begin_write(session: Session) -> None:
    """On SQLite, open the session's transaction with BEGIN IMMEDIATE (the write lock from its first statement).

    A transaction SQLite opened for a read cannot take the write lock once another connection has
    written since: its first write fails at once with "database is locked", whatever the busy
    timeout. One that starts with the lock waits for it instead. No-op on PostgreSQL, or when a
    transaction is already open.
    """
    if session.get_bind().dialect.name != "sqlite":
        return
    conn = session.connection()
    dbapi = conn.connection.dbapi_connection
    if dbapi is not None and not getattr(dbapi, "in_transaction", True):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction for a CLI command or a script: commit on success, roll back on error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


# The widest id column either database has (PostgreSQL bigint); a larger number names no row.
MAX_ID = 2**63 - 1


def id_from_ref(ref: str | int) -> int | None:
    """Return `ref` as a row id when it is written in ASCII digits (and fits an id column), else None.

    `str.isdigit()` alone also accepts digits such as '¹' or '٣' that `int()` refuses (a 500 found
    by fuzzing `GET /api/v1/runs/¹6/regression`): every "name or id" lookup goes through here.
    """
    if isinstance(ref, int):
        return ref if 0 <= ref <= MAX_ID else None
    text = ref.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if number <= MAX_ID else None


def stored_id(value: int | None) -> int:
    """Return the primary key of a row read from or flushed to the database (None only before a flush)."""
    if value is None:
        raise RuntimeError("the row has no primary key yet: flush it before using its id")
    return value


def table_of(model: type[SQLModel]) -> Table:
    """Return a table model's Table (SQLModel leaves the class's `__table__` untyped)."""
    table = inspect(model).local_table
    assert isinstance(table, Table), f"{model.__name__} is not a table model"
    return table
