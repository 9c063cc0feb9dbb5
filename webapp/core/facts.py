"""Facts: what a request (or a command) did that other domains react to, written in its own transaction.

A request commits its own domain's rows plus a fact row (`record_fact`) in the same transaction
and returns; the reactions subscribed to the fact's name (`<domain>/reactions.py`, run by
webapp/core/reactions.py) run after the commit, each in its own transaction, and mark
(fact id, reaction name) done in that transaction, so a fact handled twice changes nothing.

Waking the runner: a session that recorded a fact calls its `ON_FACTS` callback right after its
commit (SQLAlchemy's `after_commit` session event), never before, so a reaction never sees a fact
whose rows could still roll back. `serve` sets the callback to wake its jobs loop; a process with
no loop (tests' apps, `serve --no-background`) to run the reactions there and then (webapp/app/main.py).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, ClassVar, Literal, get_args

from sqlalchemy import JSON, Column, Index, Text, event
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Field, Session, SQLModel

from webapp.core.timeutil import aware_datetime_type, utcnow

log = logging.getLogger(__name__)

# The facts a domain records (docs/architecture.md, "Facts and reactions", says who reacts to each).
FactName = Literal[
    "draft_finalised",  # grading: a grade, revision or adjudication that may have changed a draft's final grade
    "run_checked",  # checks: a run was checked (or re-checked) against the KB
    "regression_alerts_raised",  # regression, ppi: new regression alerts were raised (their notifications are due)
    "hallucination_decided",  # metrics: a hallucination report confirmed or its confirmation undone
    "metrics_rebuilt",  # metrics: stale days' aggregates rebuilt after events batches (their alerts may change)
    "sample_drawn",  # ppi: a run's (or a production week's) human sample was drawn or redrawn
]
FACT_NAMES: tuple[str, ...] = get_args(FactName)
ReactionState = Literal["done", "failed"]

# The session.info keys: the session recorded a fact since its last commit; what to call after that commit.
_PENDING = "draftdesk_facts_pending"
ON_FACTS = "draftdesk_on_facts"
# What a session calls right after it committed a fact (it is given the session, whose engine it may use).
OnFacts = Callable[[OrmSession], None]


class Fact(SQLModel, table=True):
    """One thing that happened, for the reactions subscribed to its name; settled once all of them are done."""

    __tablename__: ClassVar[str] = "fact"
    __table_args__ = (Index("ix_fact_pending", "settled", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=60)
    # What it is about, e.g. {"draft_id": 12} or {"run_id": 3}.
    subject: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: dt.datetime = Field(default_factory=utcnow, sa_type=aware_datetime_type())
    # True once every reaction subscribed to it is done: the runner looks only at unsettled facts.
    settled: bool = False
    # Not before: set while its reactions left to do all wait for a retry (webapp/core/reactions.py).
    due_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())


class FactReaction(SQLModel, table=True):
    """How one reaction to one fact went: done (in the transaction of its writes) or failed, with its next attempt."""

    __tablename__: ClassVar[str] = "fact_reaction"

    fact_id: int = Field(foreign_key="fact.id", primary_key=True, ondelete="CASCADE")
    reaction: str = Field(primary_key=True, max_length=100)
    state: str = Field(max_length=10)  # ReactionState
    attempts: int = 0
    last_error: str | None = Field(default=None, sa_column=Column(Text))
    next_attempt_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    done_at: dt.datetime | None = Field(default=None, sa_type=aware_datetime_type())
    # What the reaction returned, for a caller that waits for it (the re-check API lists the new alerts).
    result: Any = Field(default=None, sa_column=Column(JSON, nullable=True))


def record_fact(session: Session, name: FactName, **subject: int | str) -> Fact:
    """Add a fact to the session's transaction (flushed); its reactions run after the commit."""
    fact = Fact(name=name, subject=dict(subject))
    session.add(fact)
    session.flush()
    session.info[_PENDING] = True
    return fact


@event.listens_for(OrmSession, "after_commit")
def _after_commit(session: OrmSession) -> None:
    if not session.info.pop(_PENDING, False):
        return
    callback: OnFacts | None = session.info.get(ON_FACTS, _process_waker[0])
    if callback is None:
        return
    try:
        callback(session)
    except Exception:
        # the fact has committed: whatever went wrong here, the loop's poll or the next pass takes it
        log.exception("facts: the after-commit callback failed")


# What a session without its own ON_FACTS calls after committing a fact: the jobs loop of this
# process, while one runs (set_waker), so the CLI's and the background jobs' facts wake it too.
_process_waker: list[OnFacts | None] = [None]


def set_waker(callback: OnFacts | None) -> None:
    """Set (or clear, with None) what any session of this process calls after it commits a fact."""
    _process_waker[0] = callback


@event.listens_for(OrmSession, "after_rollback")
def _after_rollback(session: OrmSession) -> None:
    session.info.pop(_PENDING, None)  # the facts rolled back with their rows: nothing to react to
