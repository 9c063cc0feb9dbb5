"""The plan's review cadence as due items: periods per phase, who marked each done, the page and home."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.factories import make_user
from webapp.auth.service import principal_for_user
from webapp.core.spec import EvalSpec
from webapp.metrics import daily as metrics_daily
from webapp.reviews import cadence


def _phase(spec: EvalSpec, phase: str) -> EvalSpec:
    return spec.model_copy(update={"review": spec.review.model_copy(update={"phase": phase})})


class TestPeriods:
    def test_pilot_is_daily_on_business_days_of_the_pilot(self, spec: EvalSpec) -> None:
        # The pilot runs Mon 2 - Fri 13 Nov 2026 (no holiday in it): 10 business days.
        assert (spec.online_metrics.pilot.start, spec.online_metrics.pilot.end) == (dt.date(2026, 11, 2), dt.date(2026, 11, 13))
        early = cadence.periods(spec=spec, today=dt.date(2026, 11, 9))  # Mon of week 2: 2,3,4,5,6 and 9 Nov
        assert [p for _k, p, _s, _e in early] == ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06", "2026-11-09"]
        assert {k for k, *_ in early} == {"metrics_daily"}
        assert len(cadence.periods(spec=spec, today=dt.date(2026, 12, 1))) == 10
        assert cadence.periods(spec=spec, today=dt.date(2026, 11, 1)) == []

    def test_post_launch_weekly_then_bi_weekly(self, spec: EvalSpec) -> None:
        # Counted from the Monday after the pilot (Fri 13 Nov): Mon 16 Nov is ISO week 2026-W47.
        weekly = cadence.periods(spec=_phase(spec, "post_launch_month1"), today=dt.date(2026, 11, 30))
        assert [(k, p, s, e) for k, p, s, e in weekly] == [
            ("eval_weekly", "2026-W47", dt.date(2026, 11, 16), dt.date(2026, 11, 22)),
            ("eval_weekly", "2026-W48", dt.date(2026, 11, 23), dt.date(2026, 11, 29)),
            ("eval_weekly", "2026-W49", dt.date(2026, 11, 30), dt.date(2026, 12, 6)),
        ]
        biweekly = cadence.periods(spec=_phase(spec, "steady_state"), today=dt.date(2026, 12, 14))
        assert [(k, p, e) for k, p, _s, e in biweekly] == [
            ("eval_biweekly", "2026-11-16", dt.date(2026, 11, 29)),
            ("eval_biweekly", "2026-11-30", dt.date(2026, 12, 13)),
            ("eval_biweekly", "2026-12-14", dt.date(2026, 12, 27)),
        ]


class TestMarkDone:
    def test_who_marked_the_metrics_review_and_when(self, session: Session, spec: EvalSpec) -> None:
        sl = principal_for_user(session=session, user=make_user(session, email="sl@example.test", roles=["support_lead"], name="Rami"))
        ml = principal_for_user(session=session, user=make_user(session, email="ml@example.test", roles=["ml_lead"], name="Yuki"))
        today = dt.date(2026, 11, 4)
        cadence.mark_done(session=session, spec=spec, principal=sl, kind="metrics_daily", period="2026-11-03", today=today, note="reject spike explained")
        due = cadence.due_reviews(session=session, spec=spec, today=today)
        assert [(d.period, d.done) for d in due] == [("2026-11-04", False), ("2026-11-03", True), ("2026-11-02", False)]
        (mark,) = due[1].marks
        assert (mark.name, mark.role, mark.note) == ("Rami", "support_lead", "reject spike explained")
        with pytest.raises(cadence.CadenceError, match="already marked"):
            cadence.mark_done(session=session, spec=spec, principal=sl, kind="metrics_daily", period="2026-11-03", today=today)
        with pytest.raises(cadence.CadenceError, match="^role: "):
            cadence.mark_done(session=session, spec=spec, principal=ml, kind="metrics_daily", period="2026-11-03", today=today)
        with pytest.raises(cadence.CadenceError, match="^period: '2026-11-05' is not"):
            cadence.mark_done(session=session, spec=spec, principal=sl, kind="metrics_daily", period="2026-11-05", today=today)
        with pytest.raises(cadence.CadenceError, match="^kind: "):
            cadence.mark_done(session=session, spec=spec, principal=sl, kind="weekly", period="2026-11-03", today=today)

    def test_an_eval_review_needs_the_pm_and_the_ml_lead(self, session: Session, spec: EvalSpec) -> None:
        spec = _phase(spec, "post_launch_month1")
        pm = principal_for_user(session=session, user=make_user(session, email="pm@example.test", roles=["pm"], name="Petra"))
        ml = principal_for_user(session=session, user=make_user(session, email="ml@example.test", roles=["ml_lead"], name="Yuki"))
        today = dt.date(2026, 11, 18)
        cadence.mark_done(session=session, spec=spec, principal=pm, kind="eval_weekly", period="2026-W47", today=today)
        (week,) = cadence.due_reviews(session=session, spec=spec, today=today)
        assert not week.done and week.missing == ["ml_lead"]
        cadence.mark_done(session=session, spec=spec, principal=ml, kind="eval_weekly", period="2026-W47", today=today)
        (week,) = cadence.due_reviews(session=session, spec=spec, today=today)
        assert week.done and [(m.name, m.role) for m in week.marks] == [("Petra", "pm"), ("Yuki", "ml_lead")]


class TestPages:
    @pytest.fixture(autouse=True)
    def _today(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(metrics_daily, "today_in", lambda spec: dt.date(2026, 11, 4))

    def test_mark_done_on_the_page_and_the_home_card_says_who(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        make_user(session, email="rami@example.test", roles=["support_lead"], name="Rami Haddad")
        session.commit()
        sl = client_as("support_lead", email="rami@example.test")
        page = sl.get("/cadence")
        assert page.status_code == 200 and "Daily review of online metrics and agent feedback" in page.text
        assert page.text.count('action="/cadence/done"') == 3  # 2, 3 and 4 Nov
        assert page.text.count(">missed</span>") == 2 and page.text.count(">due</span>") == 1  # 4 Nov is today
        home = sl.get("/").text
        assert "Daily metrics review: Wed 2026-11-04" in home
        assert "Due: nobody has marked it done yet. 2 earlier reviews not done." in home
        r = sl.post("/cadence/done", data={"kind": "metrics_daily", "period": "2026-11-04", "note": "<b>ok</b>"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/cadence#metrics_daily-2026-11-04"
        page = sl.get("/cadence").text
        assert "Rami Haddad" in page and "&lt;b&gt;ok&lt;/b&gt;" in page and page.count('action="/cadence/done"') == 2
        assert "Done by Rami Haddad (" in sl.get("/").text
        bad = sl.post("/cadence/done", data={"kind": "metrics_daily", "period": "2026-11-09"}, follow_redirects=True)
        assert "is not a daily review of online metrics and agent feedback due by 2026-11-04" in bad.text

    def test_roles_and_csrf(self, client_as: Callable[..., TestClient]) -> None:
        labeler = client_as("labeler")
        assert labeler.get("/cadence").status_code == 403
        assert labeler.post("/cadence/done", data={"kind": "metrics_daily", "period": "2026-11-04"}).status_code == 403
        ml = client_as("ml_lead")
        assert ml.get("/cadence").status_code == 200
        no_csrf = TestClient(ml.app, base_url=str(ml.base_url), cookies=dict(ml.cookies))
        assert no_csrf.post("/cadence/done", data={"kind": "eval_weekly", "period": "2026-W47"}, follow_redirects=False).status_code == 403
