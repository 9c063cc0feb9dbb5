"""Database engine, one transaction per request, and session helpers for the CLI and tests.

SQLite transactions are set once, in make_engine, by SQLAlchemy's `begin` event (the hook of its
pysqlite recipe, "Serializable isolation / Savepoints / Transactional DDL"): a transaction that
will write begins with `BEGIN IMMEDIATE`, which takes SQLite's write lock at its first statement
(waiting for it up to the busy timeout). Why: a transaction SQLite opened for a read cannot take
the write lock once another connection has committed since (its first write fails at once with
"database is locked", whatever the busy timeout), so a writer must hold the lock from its start.
Which transactions write is decided in one place each, not remembered by every caller (the
begin_write() call this replaces did nothing once the driver had begun a transaction itself):
- a request by its HTTP method (WRITE_METHODS: get_session);
- a command or a background job by session_scope(engine), which writes unless told `write=False`;
- anything else (tests, a `Session(engine)` of its own) reads, unless it opens its session on
  writer(engine), or on snapshot_reader(engine): a plain (deferred) BEGIN, so that all its reads
  see one committed state while it holds no lock (the metrics pass's merge, webapp/metrics/merge_plan.py);
- a request that writes a little, then reads a page (the grading page reserving the next draft,
  save-and-next) does the writes in write_transaction(session): begun IMMEDIATE (a read
  request's in a transaction of its own), committed at the block's end, the page read after it
  without the write lock.

Decision (issue 36): a read's transaction is left to the driver's transaction control, pinned
to `sqlite3.LEGACY_TRANSACTION_CONTROL` on every connection (Python 3.12+; it is the only mode
before), which begins a transaction only before a write; the recipe's other half, turning the
driver's control off (`isolation_level = None`) so that every transaction begins with a BEGIN,
made each read a snapshot transaction: a page that reads, then writes its once-a-minute session
`last_seen_at`, failed with "database is locked" whenever an events batch committed in between,
and a test's session kept reading the snapshot of its first statement (four grading
concurrency tests failed so). The pin also means a future Python whose default is
`autocommit=False` cannot silently start transactions of its own: BEGIN IMMEDIATE would then
fail loudly ("cannot start a transaction within a transaction").
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
# The execution option of a reader whose reads must share one snapshot (SQLite: BEGIN; see snapshot_reader).
_SNAPSHOT = "draftdesk_snapshot"


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine: SQLite gets WAL, foreign keys, a busy timeout and the BEGIN of the module docstring;
    PostgreSQL a pool whose connections are pinged at checkout (a restarted server or an idle
    timeout closes them; the realistic benchmark meets its targets with the ping, docs/benchmarks.md)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30})
        memory = ":memory:" in url or url.rstrip("/") == "sqlite:"

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
            legacy = getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", None)  # Python 3.12+: see the module docstring
            if legacy is not None:
                setattr(dbapi_conn, "autocommit", legacy)  # noqa: B010 - the attribute is 3.12's, not in 3.11's stubs
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
    """Begin a writer's transaction with BEGIN IMMEDIATE (the write lock now), a snapshot reader's with BEGIN (no lock,
    one snapshot for all its reads); a reader's is the driver's (module docstring)."""
    options = conn.get_execution_options()
    if options.get(_WRITES):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif options.get(_SNAPSHOT):
        conn.exec_driver_sql("BEGIN")


def snapshot_reader(engine: Engine) -> Engine:
    """Return `engine` marked as a snapshot reader: on SQLite its transactions begin with a plain BEGIN, so every read
    of one transaction sees the same committed state, and it takes no write lock (PostgreSQL: unchanged)."""
    return engine.execution_options(**{_SNAPSHOT: True})


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
    """Run the block as a short write committed at its end; the session reads on afterwards (module docstring).

    On SQLite: a reader session commits what it holds first and runs the block in a transaction
    begun IMMEDIATE; a writer session (a POST) runs it in the transaction it holds already (begun
    IMMEDIATE); either way the block's end commits (an error rolls back), and what the request
    reads next is read without the write lock. On PostgreSQL the block's end commits, nothing else.
    """
    engine = session.get_bind()
    assert isinstance(engine, Engine)
    sqlite = engine.dialect.name == "sqlite"
    if sqlite and not is_writer(session):
        session.commit()
        session.bind = writer(engine)
    try:
        yield
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        if sqlite:
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
        on_facts = getattr(request.app.state, "on_facts", None)
        if on_facts is not None:
            session.info["draftdesk_on_facts"] = on_facts  # webapp.core.facts.ON_FACTS: run or wake the reactions
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
