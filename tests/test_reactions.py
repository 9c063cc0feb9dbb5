"""The reactions runner (webapp/core/reactions.py): after the commit, in order, once, retried; on both databases."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest
from pydantic import JsonValue
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.conftest import SPEC_PATH, TEST_SECRET
from webapp.app import jobs
from webapp.app.main import create_app
from webapp.core import reactions
from webapp.core.config import Settings
from webapp.core.db import session_scope, table_of
from webapp.core.facts import Fact, FactReaction, record_fact
from webapp.core.reactions import FactPublic, Reaction
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.ops import jobruns
from webapp.ops.models import JobRun


def _recording(seen: list[tuple[int, str]], name: str, *, fail: set[int] | None = None) -> Reaction:
    """A reaction that writes a job_run row per fact (its visible effect) and notes the order it ran in."""

    def handle(session: Session, spec: EvalSpec, fact: FactPublic) -> JsonValue:
        if fail is not None and fact.id in fail:
            fail.discard(fact.id)
            raise RuntimeError(f"{name} broke on {fact.id}")
        seen.append((fact.id, name))
        jobruns.record_pass(session=session, job=f"{name}:{fact.id}", period_s=1.0, now=utcnow())
        return {"fact": fact.id}

    return Reaction(name=name, fact="sample_drawn", handle=handle)


def _facts(engine: Engine, n: int) -> list[int]:
    with session_scope(engine) as session:
        ids = [record_fact(session, "sample_drawn", run_id=i).id for i in range(n)]
    return [int(i) for i in ids if i is not None]


def _rows(session: Session) -> int:
    session.expire_all()
    return len(session.exec(select(JobRun)).all())


class TestRunPending:
    def test_facts_in_order_and_a_facts_reactions_in_registry_order(self, engine: Engine, session: Session, spec: EvalSpec) -> None:
        seen: list[tuple[int, str]] = []
        regs = [_recording(seen, "a.first"), _recording(seen, "b.second")]
        ids = _facts(engine, 3)
        report = reactions.run_pending(engine, spec, reactions=regs)
        assert seen == [(i, name) for i in ids for name in ("a.first", "b.second")]
        assert report.done == seen and report.failed == []
        assert _rows(session) == 6
        assert all(f.settled for f in session.exec(select(Fact)).all())
        assert reactions.results(session=session, fact_id=ids[0]) == {"a.first": {"fact": ids[0]}, "b.second": {"fact": ids[0]}}

    def test_a_fact_handled_twice_changes_nothing(self, engine: Engine, session: Session, spec: EvalSpec) -> None:
        seen: list[tuple[int, str]] = []
        regs = [_recording(seen, "a.first")]
        (fact_id,) = _facts(engine, 1)
        reactions.run_pending(engine, spec, reactions=regs)
        assert reactions.run_pending(engine, spec, reactions=regs).done == []  # settled: not looked at again
        # a second look at the same fact (a crash after the reaction committed, say): its mark holds
        with session_scope(engine) as s:
            s.execute(update(table_of(Fact)).where(table_of(Fact).c.id == fact_id).values(settled=False))
        assert reactions.run_pending(engine, spec, reactions=regs).done == []
        assert seen == [(fact_id, "a.first")] and _rows(session) == 1

    def test_a_failure_rolls_back_the_reaction_only_and_is_retried_after_its_backoff(
        self, engine: Engine, session: Session, spec: EvalSpec
    ) -> None:
        seen: list[tuple[int, str]] = []
        first, second = _facts(engine, 2)
        regs = [_recording(seen, "a.flaky", fail={first}), _recording(seen, "b.fine")]
        before = utcnow()
        report = reactions.run_pending(engine, spec, reactions=regs)
        after = utcnow()
        # the failing reaction waits for its retry; the fact's other reaction and the next fact go on
        assert [(f, r) for f, r, _ in report.failed] == [(first, "a.flaky")]
        assert seen == [(first, "b.fine"), (second, "a.flaky"), (second, "b.fine")]
        session.expire_all()
        mark = session.get(FactReaction, (first, "a.flaky"))
        assert mark is not None and mark.state == "failed" and mark.next_attempt_at is not None
        assert "RuntimeError: a.flaky broke on" in (mark.last_error or "")
        assert session.get(Fact, first).settled is False  # type: ignore[union-attr]
        assert reactions.pending_count(session=session) == 1
        # the first backoff step: between half the base and the base after the failure
        due = as_utc(mark.next_attempt_at)
        assert before + dt.timedelta(seconds=reactions.RETRY_BASE_S / 2) <= due <= after + dt.timedelta(seconds=reactions.RETRY_BASE_S)
        assert reactions.run_pending(engine, spec, reactions=regs).done == []  # not due yet
        later = utcnow() + dt.timedelta(seconds=reactions.RETRY_BASE_S + 1)
        assert reactions.run_pending(engine, spec, reactions=regs, now=lambda: later).done == [(first, "a.flaky")]
        session.expire_all()
        assert session.get(Fact, first).settled is True  # type: ignore[union-attr]
        assert reactions.failing(session=session) == [] and _rows(session) == 4

    def test_two_processes_never_run_the_same_reaction_twice(self, engine: Engine, session: Session, spec: EvalSpec) -> None:
        seen: list[tuple[int, str]] = []
        regs = [_recording(seen, "a.first"), _recording(seen, "b.second")]
        ids = _facts(engine, 20)
        errors: list[BaseException] = []

        def worker() -> None:
            try:
                reactions.run_pending(engine, spec, reactions=regs)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(seen) == sorted((i, n) for i in ids for n in ("a.first", "b.second"))  # each exactly once
        assert _rows(session) == 40


class TestRegistry:
    def test_each_domain_reaction_subscribes_to_a_fact_and_names_are_unique(self) -> None:
        found = {(r.name, r.fact) for r in reactions.registry()}
        assert {
            ("regression.alerts_after_check", "run_checked"),
            ("regression.alerts_after_grade", "draft_finalised"),
            ("ppi.sampled_drop_after_check", "run_checked"),
            ("ppi.sampled_drop_after_grade", "draft_finalised"),
            ("ppi.calls_after_grade", "draft_finalised"),
            ("gates.report_after_check", "run_checked"),
            ("alerts.notify_regression", "regression_alerts_raised"),
            ("alerts.notify_hallucination", "hallucination_decided"),
            ("alerts.notify_metrics", "metrics_rebuilt"),
        } <= found
        names = [r.name for r in reactions.registry()]
        # the order a fact's reactions run in: regression raises before ppi, alerts notify last
        assert names.index("regression.alerts_after_check") < names.index("ppi.sampled_drop_after_check")

    def test_a_rolled_back_fact_wakes_nobody(self, engine: Engine, spec: EvalSpec) -> None:
        woken: list[bool] = []
        with Session(engine) as s:
            s.info["draftdesk_on_facts"] = lambda _s: woken.append(True)
            record_fact(s, "sample_drawn", run_id=1)
            s.rollback()
            s.commit()
        assert woken == []
        with Session(engine) as s:
            s.info["draftdesk_on_facts"] = lambda _s: woken.append(True)
            record_fact(s, "sample_drawn", run_id=1)
            s.commit()
        assert woken == [True]


class TestTheJobsLoop:
    def test_a_commit_wakes_the_loop_and_a_separate_process_fact_is_polled(
        self, db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The loop runs a fact's reactions on the commit's wake-up, long before its (here 60 s) poll would."""
        monkeypatch.setattr(jobs, "POLL_S", 60.0)
        app = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))

        def settled() -> bool:
            with Session(engine) as s:
                return all(f.settled for f in s.exec(select(Fact)).all())

        async def scenario() -> None:
            task = asyncio.create_task(jobs.run_reactions(app))
            try:
                await asyncio.sleep(0.2)  # the loop's first pass (nothing to do) and its wait

                def commit_a_fact() -> None:
                    with Session(engine) as s:  # any session of the process: it wakes the loop after its commit
                        record_fact(s, "draft_finalised", draft_id=999_999)
                        s.commit()

                await asyncio.to_thread(commit_a_fact)
                for _ in range(100):
                    if await asyncio.to_thread(settled):
                        return
                    await asyncio.sleep(0.1)
                raise AssertionError("the loop did not wake on the commit")
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        try:
            asyncio.run(scenario())
        finally:
            app.state.engine.dispose()
        with Session(engine) as s:
            (fact,) = s.exec(select(Fact)).all()
            done = reactions.results(session=s, fact_id=int(fact.id or 0))
        # the reactions to a final grade ran (the draft does not exist: nothing to raise)
        # ppi.calls_after_grade and ppi.figures_after_grade answer None for a draft that is in no sample
        assert done == {
            "regression.alerts_after_grade": [],
            "ppi.sampled_drop_after_grade": [],
            "ppi.calls_after_grade": None,
            "ppi.figures_after_grade": None,
        }
