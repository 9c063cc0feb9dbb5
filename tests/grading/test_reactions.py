"""A final grade's reactions run after its commit: a reaction that fails never rolls back the grade (issue 42)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import login
from tests.grading.conftest import FORM, GradingWorld, post_form
from tests.reactions_support import run_pending_reactions
from webapp.core import reactions
from webapp.core.facts import Fact, FactReaction
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.grading.models import FinalGrade
from webapp.regression import alerts as regression_alerts
from webapp.regression.models import RegressionAlert

FAIL = {**FORM, "factual_accuracy": "fail", "unsupported_claim": "We will refund you 200 dollars."}


def _grade_golden_fail(app: FastAPI, world: GradingWorld) -> None:
    """Both graders fail the golden draft's factual accuracy through the grading page: its final grade is fail."""
    for user in (world.alice, world.bob):
        with TestClient(app) as c:
            login(c, user.email)
            r = post_form(c, f"/grading/drafts/{world.drafts[0].id}", FAIL)
            assert r.status_code == 303, r.text


class TestAFailingReaction:
    def test_the_grade_stays_the_reaction_is_retried_and_the_alert_raised_once_it_succeeds(
        self, app: FastAPI, session: Session, spec: EvalSpec, world: GradingWorld, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        session.commit()
        real = regression_alerts.raise_alerts_for_run
        calls: list[int] = []

        def flaky(**kw: Any) -> list[RegressionAlert]:
            calls.append(kw["run_id"])
            if len(calls) == 1:
                raise ZeroDivisionError("the alerts bug of the day")
            return real(**kw)

        monkeypatch.setattr(regression_alerts, "raise_alerts_for_run", flaky)
        _grade_golden_fail(app, world)  # the second save runs the reactions after its commit (no jobs loop here)
        session.expire_all()
        final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == world.drafts[0].id)).one()
        assert final.factual_accuracy == "fail"  # the grade is stored although its reaction failed
        assert session.exec(select(RegressionAlert)).all() == []
        mark = session.get(FactReaction, (_fact_id(session), "regression.alerts_after_grade"))
        assert mark is not None and mark.state == "failed" and mark.attempts == 1
        assert "ZeroDivisionError: the alerts bug of the day" in (mark.last_error or "")
        assert [f.reaction for f in reactions.failing(session=session)] == ["regression.alerts_after_grade"]
        with TestClient(app) as c:
            health = c.get("/healthz").json()
        assert health["status"] == "degraded" and health["reactions_failing"] == {"regression.alerts_after_grade": 1}

        # not before its backoff: nothing runs; after it, the retry succeeds and raises the alert
        assert run_pending_reactions(app.state.engine, spec).done == []
        later = utcnow() + dt.timedelta(seconds=reactions.RETRY_CAP_S)
        report = reactions.run_pending(app.state.engine, spec, now=lambda: later)
        assert (_fact_id(session), "regression.alerts_after_grade") in report.done and report.failed == []
        session.expire_all()
        (alert,) = session.exec(select(RegressionAlert)).all()
        assert alert.kind == "golden_factual" and "case-0" in alert.message
        mark = session.get(FactReaction, (_fact_id(session), "regression.alerts_after_grade"))
        assert mark is not None and mark.state == "done" and mark.attempts == 2
        assert reactions.failing(session=session) == []
        assert len(calls) == 2
        with TestClient(app) as c:
            assert c.get("/healthz").json()["status"] == "ok"


def _fact_id(session: Session) -> int:
    (fact,) = session.exec(select(Fact).where(Fact.name == "draft_finalised")).all()
    assert fact.id is not None
    return fact.id
