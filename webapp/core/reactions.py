"""Reactions to facts: the registry (each domain's `reactions.py`) and the runner the jobs loop calls.

A domain that reacts to another's fact declares `REACTIONS: tuple[Reaction, ...]` in
`webapp/<domain>/reactions.py`; `registry()` finds them like every per-domain module
(webapp/core/domains.py), in the domains' order. `run_pending` takes the unsettled facts in the
order they were recorded and runs each subscribed reaction not yet done, each in a transaction
of its own that also marks (fact id, reaction) done: a fact handled twice changes nothing, and a
reaction's writes and its mark commit or roll back together.

Claiming: on PostgreSQL the fact row is locked `FOR UPDATE SKIP LOCKED` by the transaction that
runs its reaction, so two processes never run the same reaction at once (the other passes it by);
on SQLite the transaction begins IMMEDIATE (webapp/core/db.py), which serialises them.

Failures: a reaction that raises is rolled back (never the fact, which committed before), and its
failure is recorded in a transaction of its own: attempts, the error, and when to try again
(exponential backoff with jitter, webapp/core/retry_policy.py, from RETRY_BASE_S up to
RETRY_CAP_S). Decision: it is retried for as long as it fails (a reaction recomputes from what is
stored, so a late success is still right), and later facts do not wait for it; /healthz and
Prometheus show the failing reactions (webapp/ops/health.py) meanwhile. The order: facts by id, and
a fact's reactions in the domains' order (regression before ppi before alerts).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, JsonValue
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session as OrmSession
from sqlmodel import Session, col

from webapp.core.db import is_sqlite, session_scope, table_of
from webapp.core.domains import domain_modules
from webapp.core.facts import Fact, FactName, FactReaction
from webapp.core.retry_policy import backoff, wait_after
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)

RETRY_BASE_S = 2.0
RETRY_CAP_S = 600.0
_WAIT = backoff(base=RETRY_BASE_S, cap=RETRY_CAP_S)
# Enough of an error's message to recognise it; the rest is in the log.
ERROR_CHARS = 2000
# Facts looked at per query of a pass.
BATCH = 50


class FactPublic(BaseModel):
    """A fact as a reaction sees it."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    subject: dict[str, int | str]
    created_at: dt.datetime


# A reaction's handler: the session of its own transaction, the spec and the fact; what it returns
# (JSON) is stored beside its done mark for a caller that waits (None: nothing to tell).
Handler = Callable[[Session, EvalSpec, FactPublic], JsonValue]


@dataclass(frozen=True)
class Reaction:
    """A domain's handler of one fact name, known by a unique name ("regression.alerts_after_check")."""

    name: str
    fact: FactName
    handle: Handler


@functools.cache
def registry() -> tuple[Reaction, ...]:
    """Return every domain's reactions, in the domains' order (imported once per process)."""
    found = tuple(r for m in domain_modules("reactions") for r in m.REACTIONS)
    names = [r.name for r in found]
    assert len(names) == len(set(names)), f"two reactions share a name: {names}"
    return found


def subscribers(name: str, reactions: Sequence[Reaction] | None = None) -> list[Reaction]:
    """Return the reactions subscribed to the fact `name`, in order."""
    return [r for r in (registry() if reactions is None else reactions) if r.fact == name]


@dataclass
class PassReport:
    """What one pass of the runner did: the reactions done, and those that failed (with their errors)."""

    done: list[tuple[int, str]] = field(default_factory=list)
    failed: list[tuple[int, str, str]] = field(default_factory=list)


def run_pending(
    engine: Engine,
    spec: EvalSpec,
    *,
    now: Callable[[], dt.datetime] = utcnow,
    fact_ids: Sequence[int] | None = None,
    reactions: Sequence[Reaction] | None = None,
) -> PassReport:
    """Run every due reaction of every unsettled fact (or only of `fact_ids`), oldest fact first; return what happened."""
    report = PassReport()
    after = 0
    while True:
        with Session(engine) as session:
            t = table_of(Fact)
            stmt = select(t.c.id).where(t.c.settled.is_(False), t.c.id > after, (t.c.due_at.is_(None)) | (t.c.due_at <= now()))
            if fact_ids is not None:
                stmt = stmt.where(t.c.id.in_(list(fact_ids)))
            ids = [int(i) for i in session.execute(stmt.order_by(t.c.id).limit(BATCH)).scalars()]
        if not ids:
            return report
        for fact_id in ids:
            _run_fact(engine, spec, fact_id, report, now, reactions, wait=fact_ids is not None)
        after = ids[-1]


def _run_fact(
    engine: Engine,
    spec: EvalSpec,
    fact_id: int,
    report: PassReport,
    now: Callable[[], dt.datetime],
    reactions: Sequence[Reaction] | None,
    *,
    wait: bool = False,
) -> None:
    """Run the fact's due reactions, one transaction each; settle it once all are done (`wait`: for another process's claim)."""
    while True:
        reaction: Reaction | None = None
        try:
            with session_scope(engine) as session:
                fact, reaction, others = _next_step(session, fact_id, now(), reactions, wait=wait)
                if fact is None or reaction is None:
                    return
                result = reaction.handle(session, spec, fact)
                _mark_done(session, fact_id, reaction.name, result, now())
                if not others:
                    _settle(session, fact_id)
            report.done.append((fact_id, reaction.name))
        except Exception as exc:
            if reaction is None:
                raise  # the claim itself failed (the database): the loop records the pass's error
            log.exception("reactions: %s failed on fact %s; it will be retried", reaction.name, fact_id)
            _mark_failed(engine, fact_id, reaction.name, exc, now())
            report.failed.append((fact_id, reaction.name, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]))


def _settle(session: Session, fact_id: int) -> None:
    session.execute(update(table_of(Fact)).where(table_of(Fact).c.id == fact_id).values(settled=True))


def _next_step(
    session: Session, fact_id: int, now: dt.datetime, reactions: Sequence[Reaction] | None, *, wait: bool = False
) -> tuple[FactPublic | None, Reaction | None, bool]:
    """Claim the fact and return it, its next due reaction (None: none is due) and whether others remain undone.

    The fact is None when it is settled or (PostgreSQL) another process holds it; a fact with no
    reaction left to do is settled here.
    """
    stmt = select(Fact).where(col(Fact.id) == fact_id, col(Fact.settled).is_(False))
    if not is_sqlite(session):
        stmt = stmt.with_for_update(skip_locked=not wait)
    row = session.execute(stmt).scalars().first()
    if row is None:
        return None, None, False
    fact = FactPublic.model_validate(row)
    states = {r.reaction: r for r in session.execute(select(FactReaction).where(col(FactReaction.fact_id) == fact_id)).scalars()}
    undone = [r for r in subscribers(fact.name, reactions) if (s := states.get(r.name)) is None or s.state != "done"]
    if not undone:
        _settle(session, fact_id)  # nothing subscribes, or all is done
        return fact, None, False

    def due(r: Reaction) -> bool:
        s = states.get(r.name)
        return s is None or s.next_attempt_at is None or as_utc(s.next_attempt_at) <= now

    first = next((r for r in undone if due(r)), None)
    return fact, first, len(undone) > 1


def _upsert(session: Session, values: dict[str, object], changes: dict[str, object]) -> None:
    table = table_of(FactReaction)
    insert = sqlite_insert if is_sqlite(session) else pg_insert
    stmt = insert(table).values(**values)
    session.execute(stmt.on_conflict_do_update(index_elements=[table.c.fact_id, table.c.reaction], set_=changes))


def _mark_done(session: Session, fact_id: int, name: str, result: JsonValue, now: dt.datetime) -> None:
    table = table_of(FactReaction)
    values: dict[str, object] = {"fact_id": fact_id, "reaction": name, "state": "done", "attempts": 1, "done_at": now,
                                 "result": result, "next_attempt_at": None}
    changes: dict[str, object] = {"state": "done", "attempts": table.c.attempts + 1, "done_at": now, "result": result,
                                  "next_attempt_at": None}
    _upsert(session, values, changes)


def _mark_failed(engine: Engine, fact_id: int, name: str, exc: BaseException, now: dt.datetime) -> dt.datetime:
    """Record the failure in a transaction of its own; return when the reaction is due again."""
    message = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
    with session_scope(engine) as session:
        row = session.get(FactReaction, (fact_id, name))
        attempts = (row.attempts if row is not None else 0) + 1
        retry_at = now + dt.timedelta(seconds=wait_after(_WAIT, attempts))
        values: dict[str, object] = {"fact_id": fact_id, "reaction": name, "state": "failed", "attempts": attempts,
                                     "last_error": message, "next_attempt_at": retry_at}
        _upsert(session, values, {"state": "failed", "attempts": attempts, "last_error": message, "next_attempt_at": retry_at})
        # the runner's list skips the fact until its earliest retry is due
        t = table_of(Fact)
        session.execute(
            update(t).where(t.c.id == fact_id, t.c.due_at.is_(None) | (t.c.due_at <= now) | (t.c.due_at > retry_at)).values(due_at=retry_at)
        )
    return retry_at


class ReactionFailure(BaseModel):
    """A reaction that has failed and not yet succeeded: /healthz and Prometheus show them."""

    reaction: str
    facts: int
    last_error: str | None


def failing(*, session: Session) -> list[ReactionFailure]:
    """Return each reaction with failed, not yet done attempts: how many facts, and one of its errors."""
    t = table_of(FactReaction)
    rows = session.execute(
        select(t.c.reaction, func.count(), func.max(t.c.last_error))
        .where(t.c.state == "failed")
        .group_by(t.c.reaction)
        .order_by(t.c.reaction)
    ).all()
    return [ReactionFailure(reaction=r, facts=int(n), last_error=e) for r, n, e in rows]


def pending_count(*, session: Session) -> int:
    """Return how many facts still wait for a reaction."""
    return int(session.execute(select(func.count()).select_from(Fact).where(col(Fact.settled).is_(False))).scalar_one())


def results(*, session: Session, fact_id: int) -> dict[str, JsonValue]:
    """Return what each done reaction of the fact returned, by reaction name."""
    t = table_of(FactReaction)
    rows = session.execute(select(t.c.reaction, t.c.result).where(t.c.fact_id == fact_id, t.c.state == "done")).all()
    return {name: result for name, result in rows}


def run_now(session: Session, spec: EvalSpec, fact_id: int) -> list[JsonValue]:
    """Commit the session, run the fact's reactions now (not waiting for the loop) and return their results, in order.

    For a caller that reports what its fact caused (the re-check API and `draftdesk check` list the
    new alerts): a reaction that fails here is left to the loop's retries, its result missing.
    """
    session.commit()
    bind = session.get_bind()
    assert isinstance(bind, Engine)
    run_pending(bind, spec, fact_ids=[fact_id])
    done = results(session=session, fact_id=fact_id)
    return [done[r.name] for r in registry() if r.name in done]


def run_in_session(session: Session, spec: EvalSpec) -> int:
    """Run every pending fact's reactions inside the session's own transaction; return how many ran.

    For a caller that builds a whole database in one transaction (the demo seed, all or nothing):
    later steps read what earlier facts' reactions wrote. A failure raises, as any step of it would.
    """
    ran = 0
    while True:
        session.flush()
        rows = session.execute(select(Fact).where(col(Fact.settled).is_(False)).order_by(col(Fact.id))).scalars().all()
        if not rows:
            return ran
        for row in rows:
            fact = FactPublic.model_validate(row)
            done = set(results(session=session, fact_id=fact.id))
            for reaction in subscribers(fact.name):
                if reaction.name not in done:
                    _mark_done(session, fact.id, reaction.name, reaction.handle(session, spec, fact), utcnow())
                    ran += 1
            _settle(session, fact.id)
        session.expire_all()


_RUNNING = threading.local()


def inline(spec: EvalSpec) -> Callable[[OrmSession], None]:
    """Return the after-commit callback of a process without a jobs loop: it runs the due reactions there and then.

    Never raises (the fact has committed; a failure is recorded for the retries). Reentrant calls
    (a reaction's own fact) return at once: the pass running in this thread takes the newer facts too.
    """

    def run(session: OrmSession) -> None:
        if getattr(_RUNNING, "on", False):
            return
        bind = session.get_bind()
        assert isinstance(bind, Engine)
        _RUNNING.on = True
        try:
            run_pending(bind, spec)
        except Exception:
            log.exception("reactions: the pass after a commit failed; the facts wait for the next one")
        finally:
            _RUNNING.on = False

    return run
