"""The metrics and reviews demo hooks plant what the demo promises."""

from __future__ import annotations

import datetime as dt
import random

from sqlmodel import Session

from tests.factories import make_user
from webapp.core.spec import EvalSpec
from webapp.demo.context import DemoContext
from webapp.metrics import alert_states, reports, versions
from webapp.metrics import demo as metrics_demo
from webapp.metrics import streaks as metrics_streaks
from webapp.reviews import demo as reviews_demo
from webapp.reviews import service as reviews


def test_demo_hooks(session: Session, spec: EvalSpec) -> None:
    users = {role: make_user(session, email=f"{role}@demo.test", roles=[role]) for role in ("lead", "pm", "labeler")}
    today = spec.online_metrics.pilot.end + dt.timedelta(days=9)
    ctx = DemoContext(rng=random.Random(7), today=today, users=users, dataset=None, cases={}, run=None, drafts={})  # type: ignore[arg-type]
    metrics_demo.seed(session=session, spec=spec, ctx=ctx)
    reviews_demo.seed(session=session, spec=spec, ctx=ctx)
    session.commit()
    start, end = ctx.extra["metrics_range"]  # type: ignore[misc]
    assert start <= spec.online_metrics.pilot.start and end >= spec.online_metrics.pilot.end
    alerts = {a.metric: a for a in alert_states.alerts(session=session, spec=spec)}
    reject = [t.to_state for t in alerts["reject_rate"].history]
    assert "firing" in reject and reject[-1] == "resolved"
    changes = versions.versions_for(session=session, spec=spec, start=start, end=end)
    assert any(c.kind == "model_version" for c in changes)
    confirmed = reports.confirmed_hallucination_reports(session=session, start=spec.online_metrics.pilot.start, end=spec.online_metrics.pilot.end)
    assert len(confirmed) == 1
    assert reports.pending_report_count(session=session) == 1
    streaks = metrics_streaks.business_day_streaks(session=session, spec=spec, start=start, end=end)
    assert streaks.longest >= spec.gates.production.consecutive_business_days
    periods = reviews.list_periods(session=session, spec=spec, today=today)
    drawn = [p for p in periods if p.sample is not None]
    assert len(drawn) == 1 and str(drawn[0].progress) == "12/20 reviewed"
