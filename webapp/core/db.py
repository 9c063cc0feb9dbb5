"""Database engine, one transaction per request, and session helpers for the CLI and tests.

SQLite transactions follow SQLAlchemy's documented pysqlite recipe ("Serializable isolation /
Savepoints / Transactional DDL"), set once in make_engine: the `connect` event turns the
driver's own transaction handling off (`isolation_level = None`: pysqlite began a transaction
only before a write, and Python 3.12's `autocommit=False` begins one at once), and the `begin`
event sends the BEGIN itself, so SAVEPOINTs and DDL sit inside the transaction SQLAlchemy sees.
A transaction that will write begins with `BEGIN IMMEDIATE` (it takes SQLite's write lock at
its first statement, waiting for it up to the busy timeout); one that reads begins with `BEGIN`.
Why: a transaction SQLite opened for a read cannot take the write lock once another connection
has committed since (its first write fails at once with "database is locked", whatever the busy
timeout), so a writer must hold the lock from its start. Which transactions write is decided
in one place each, not remembered by every caller (the begin_write() call this replaces did
nothing once the driver had begun the transaction itself):
- a request by its HTTP method (WRITE_METHODS: get_session);
- a command or a background job by session_scope(engine), which writes unless told `write=False`;
- anything else (tests, a `Session(engine)` of its own) reads, unless it opens its session on
  writer(engine);
- a read request that must write a little (the session's once-a-minute `last_seen_at`, the
  grading page reserving the next draft) does it in write_transaction(session): the read
  transaction so far is committed, the block runs in a transaction begun IMMEDIATE and is
  committed at its end (on a writer session the block simply joins the request's transaction).
PostgreSQL needs none of it (row locks, and a reader never blocks a writer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Table, event, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session, SQLModel, create_engine

# The requests whose transaction writes (HTML forms post; the JSON API also puts, patches and deletes).
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The execution option that marks an engine's (and so its connections') transactions as writers.
_WRITES = "draftdesk_writes"


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine: SQLite gets WAL, foreign keys, a busy timeout and the BEGIN of the module docstring;
    PostgreSQL a pool whose connections are pinged at checkout (a restarted server or an idle
    timeout closes them; the realistic benchmark meets its targets with the ping, docs/benchmarks.md)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30})
        memory = ":memory:" in url or url.rstrip("/") == "sqlite:"

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
            dbapi_conn.isolation_level = None  # the driver sends no BEGIN of its own: _sqlite_begin does
            cur = dbapi_conn.cursor()
            if not memory:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()

        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return create_engine(url, echo=echo, pool_size=10, max_overflow=20, pool_pre_ping=True)


def _sqlite_begin(conn: Connection) -> None:
    """Begin the transaction: IMMEDIATE (the write lock now) when the connection's engine writes, else deferred."""
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITES) else "BEGIN")


def writer(engine: Engine) -> Engine:
    """Return `engine` marked as a writer: its transactions begin IMMEDIATE on SQLite (same pool, same events)."""
    return engine.execution_options(**{_WRITES: True})


def _reader(engine: Engine) -> Engine:
    return engine.execution_options(**{_WRITES: False})


def is_writer(session: Session) -> bool:
    """Tell whether the session's transactions begin IMMEDIATE (always true of PostgreSQL, which needs no mark)."""
    bind = session.get_bind()
    return bind.dialect.name != "sqlite" or bool(bind.get_execution_options().get(_WRITES))


@contextmanager
def write_transaction(session: Session) -> Iterator[None]:
    """Run the block as a write (module docstring): within a writer session's transaction, or in one of its own.

    On a reader session (SQLite) the transaction read so far is committed first (it holds no
    change: a reader's changes are made here), the block runs in a transaction begun IMMEDIATE,
    committed at the end (rolled back on error), and the session reads on afterwards.
    """
    if is_writer(session):
        yield
        return
    engine = session.get_bind()
    assert isinstance(engine, Engine)
    session.commit()
    session.bind = writer(engine)
    try:
        yield
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.bind = _reader(engine)


def is_sqlite(session_or_engine: Session | Engine) -> bool:
    """Tell whether the session's or engine's database is SQLite."""
    bind = session_or_engine.get_bind() if isinstance(session_or_engine, Session) else session_or_engine
    return bind.dialect.name == "sqlite"


def get_session(request: Request) -> Iterator[Session]:
    """Yield the request's session and commit once, after the route has run; roll back on error.

    A request whose method writes (WRITE_METHODS) opens it on writer(engine). A plain generator:
    FastAPI runs its start and its end in a worker thread, and shields the end from a client that
    went away, so the rollback and the close always happen.
    """
    engine: Engine = request.app.state.engine
    bind = writer(engine) if request.method in WRITE_METHODS else engine
    with Session(bind, expire_on_commit=False) as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        session.commit()


# scope="function": the commit happens before the response is sent, so a failed commit is an error
# the client sees, and a client that reads right after a write sees it.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


@contextmanager
def session_scope(engine: Engine, *, write: bool = True) -> Iterator[Session]:
    """One transaction for a CLI command, a background job or a script: commit on success, roll back on error.

    It writes (BEGIN IMMEDIATE on SQLite) unless `write=False`: every caller so far writes.
    """
    with Session(writer(engine) if write else engine, expire_on_commit=False) as session:
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
