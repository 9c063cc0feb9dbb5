"""The write part of a grading request: short, committed before the page renders.

Why: SQLite has one writer at a time. A save-and-next used to take the write lock with its first
INSERT and hold it while it read and rendered the next item, until the request's commit. Now the
route runs only its writes inside `write_section` and commits there; the page is read and
rendered afterwards.

On SQLite the transaction starts with BEGIN IMMEDIATE (a POST's from the request's first statement,
a GET's from the section's, webapp/core/db.py), so it holds the write lock from its first statement: two graders saving at once run one after the other (the second waits in SQLite's busy
timeout), and neither reads the places and grades of a draft while the other is changing them, so
nobody double-grades a draft. An earlier version also queued writers on a process lock and a file
lock beside the database; for 2-3 graders SQLite's own lock is enough (issue 26).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlmodel import Session

from webapp.core.db import write_transaction

_ACTIVE = "grading_write_section"


@contextmanager
def write_section(session: Session) -> Iterator[None]:
    """Run the block as the request's write transaction and commit it at the end (roll back on error).

    Only routes use this (services flush, never commit). Nested sections join the outer one.
    """
    if session.info.get(_ACTIVE):
        yield
        return
    session.info[_ACTIVE] = True
    try:
        with write_transaction(session):  # committed at the end; a GET's in an IMMEDIATE transaction of its own
            yield
    finally:
        session.info.pop(_ACTIVE, None)
