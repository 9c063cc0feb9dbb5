"""The write part of a grading request: short, committed before the page renders, and queued fairly on SQLite.

Why: SQLite has one writer at a time. A save-and-next used to take the write lock with its first
INSERT and hold it while it read and rendered the next item, until the request's commit; the
other writers waited in SQLite's busy handler, which polls with sleeps growing to 100 ms, so under
load a save could lose the lock again and again and wait seconds. Now the route runs only its
writes inside `write_section` and commits there; the page is read and rendered afterwards.

On SQLite, writers queue before they touch the database: threads of one worker on a process
lock, the workers of `serve --workers N` on an advisory file lock beside the database (woken in
turn by the kernel, not by polling), and the transaction starts with BEGIN IMMEDIATE so it holds
the write lock from its first statement and never has to upgrade a read. Writers that do not
take the file lock (the command line, other pages) still wait in the busy handler as before.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from sqlalchemy.engine import Engine
from sqlmodel import Session

from webapp.grading import queue_index

_ACTIVE = "grading_write_section"
_guard = threading.Lock()
_process_locks: dict[str, threading.Lock] = {}
_lock_files: dict[str, IO[bytes]] = {}


def _locks_for(database: str) -> tuple[threading.Lock, IO[bytes] | None]:
    with _guard:
        lock = _process_locks.setdefault(database, threading.Lock())
        handle = _lock_files.get(database)
        if handle is None and database and database != ":memory:" and not database.startswith("file:"):
            try:
                handle = open(database + "-write-lock", "ab")  # noqa: SIM115 (kept open for the process's life)
            except OSError:
                handle = None  # a read-only directory: the process lock and SQLite's own lock still hold
            if handle is not None:
                _lock_files[database] = handle
        return lock, handle


@contextmanager
def write_section(session: Session) -> Iterator[None]:
    """Run the block as the request's write transaction and commit it at the end (roll back on error).

    Only routes use this (services flush, never commit). Nested sections join the outer one.
    """
    if session.info.get(_ACTIVE):
        yield
        return
    bind = session.get_bind()
    session.info[_ACTIVE] = True
    try:
        if bind.dialect.name != "sqlite":
            with _committing(session):
                yield
            return
        engine = bind if isinstance(bind, Engine) else bind.engine
        lock, handle = _locks_for(str(engine.url.database or ""))
        with lock:
            if handle is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                conn = session.connection()
                dbapi = conn.connection.dbapi_connection
                if dbapi is not None and not getattr(dbapi, "in_transaction", True):
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                with _committing(session):
                    yield
            finally:
                if handle is not None:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        session.info.pop(_ACTIVE, None)


@contextmanager
def _committing(session: Session) -> Iterator[None]:
    try:
        yield
    except BaseException:
        session.rollback()
        raise
    restore = queue_index.carry_over(session)
    session.commit()
    restore()
